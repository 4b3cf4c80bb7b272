// Alert rules for the idempotent consumer + an action group (optional e-mail receiver).
// Log alerts query the Application Insights component (classic table names: traces, requests,
// customMetrics). The telemetry names are the ones the consumer emits (see docs/operations.md).
param namePrefix string
param location string
param tags object = {}

param serviceBusNamespaceName string
param queueName string
param topicName string
param applicationInsightsName string

@description('The Log Analytics workspace behind Application Insights, where the platform logs land (diagnostics.bicep): the scope of the Cosmos DB alerts (cosmos-alerts.bicep).')
param logAnalyticsWorkspaceId string

@description('E-mail address notified by the action group, or "none": the alerts are deployed and notify nobody (main.bicep makes azd ask).')
@minLength(1)
param alertEmail string

@description('The stalled-consumer alert fires when the queue\'s active message count stays above this for the whole window while no message of the queue is completed.')
@minValue(0)
param stalledQueueActiveMessagesThreshold int = 0

@description('How long messages must wait with no completion before the stalled-consumer alert fires.')
@allowed([
  'PT15M'
  'PT30M'
  'PT1H'
])
param stalledQueueWindow string = 'PT15M'

@description('Alert when more than this percentage of settled deliveries were abandoned in the window.')
@minValue(1)
@maxValue(100)
param abandonRateThresholdPercent int = 10

@description('Minimum settled deliveries in the window before the abandon rate is evaluated (avoids noise).')
@minValue(1)
param abandonRateMinMessages int = 20

@description('Alert when the p95 duration of the `process orders` consumer span exceeds this (milliseconds).')
@minValue(100)
param processingP95ThresholdMs int = 2000

@description('Minimum deliveries in the window before the p95 is evaluated.')
@minValue(1)
param processingP95MinDeliveries int = 10

@description('Alert when the outbox relay\'s mean lag (outbox createdAt to publish) exceeds this (seconds).')
@minValue(1)
param relayLagThresholdSeconds int = 60

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// "none" is an explicit choice, made at `azd up` (ALERT_EMAIL): alerts fire into a group with no
// receiver, visible in the portal only. Anything else must be an e-mail address.
var notifyNobody = toLower(alertEmail) == 'none'

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = {
  name: 'ag-${namePrefix}'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'orders'
    enabled: true
    emailReceivers: notifyNobody ? [] : [
      {
        name: 'oncall'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

// 1. Anything sitting in the orders dead-letter queue.
resource deadLetteredAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'alert-${namePrefix}-deadlettered'
  location: 'global'
  tags: tags
  properties: {
    description: 'Messages in the dead-letter queue of the orders queue. Runbook: docs/operations.md#dead-lettered-messages'
    severity: 2
    enabled: true
    scopes: [
      namespace.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    autoMitigate: true
    targetResourceType: 'Microsoft.ServiceBus/namespaces'
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'DeadletteredMessages'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'DeadletteredMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                queueName
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Maximum'
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}

// 1b. A stalled consumer: the function stopped (host down, scale stuck, trigger permission
// broken, every delivery held) and messages wait. "Stalled" = messages waiting while nothing
// completes: ActiveMessages (available + locked; Average/Minimum/Maximum) stays above the
// threshold for the whole window AND CompleteMessage (completed messages; Total) is zero over it.
// Both are per entity (dimension EntityName) in the Service Bus metrics (Learn: Supported metrics
// for Microsoft.ServiceBus/namespaces). ActiveMessages alone also counts in-flight (locked)
// messages, so under steady load it never reaches zero and would page on a healthy consumer;
// the criteria of one rule must all hold, so a consumer that completes anything stays quiet.
resource stalledConsumerAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'alert-${namePrefix}-stalled-consumer'
  location: 'global'
  tags: tags
  properties: {
    description: 'Messages have waited in the orders queue for the whole window and none was completed: the consumer is not draining it. Runbook: docs/operations.md#stalled-consumer'
    severity: 1
    enabled: true
    scopes: [
      namespace.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: stalledQueueWindow
    autoMitigate: true
    targetResourceType: 'Microsoft.ServiceBus/namespaces'
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'ActiveMessages'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'ActiveMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                queueName
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: stalledQueueActiveMessagesThreshold
          timeAggregation: 'Minimum'
        }
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'NothingCompleted'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'CompleteMessage'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                queueName
              ]
            }
          ]
          operator: 'LessThanOrEqual'
          threshold: 0
          timeAggregation: 'Total'
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}

// 2. Same MessageId, different payload: a producer bug, the message was dead-lettered.
var hashMismatchQuery = 'traces | where tostring(customDimensions["deadletter_reason"]) == "HashMismatch" | project timestamp, message, message_id = tostring(customDimensions["message_id"]), order_id = tostring(customDimensions["order_id"])'

// 3. Systemic failures (configuration / RBAC / dependency down): every message will fail alike.
// A systemic failure first shows as retries within the delivery (attempt_outcome), about a
// minute before the delivery gives up (outcome): page on the first.
var systemicQuery = 'traces | where tostring(customDimensions["outcome"]) == "systemic" or tostring(customDimensions["attempt_outcome"]) == "systemic" | project timestamp, message, severityLevel, message_id = tostring(customDimensions["message_id"])'

// 4. Share of settled deliveries that were abandoned (redelivered later).
var abandonRateQuery = 'customMetrics | where name == "orders.messages" | extend settlement = tostring(customDimensions["settlement"]) | where settlement in ("complete", "abandon", "deadletter") | summarize Settled = sum(valueSum), Abandoned = sumif(valueSum, settlement == "abandon") | where Settled >= ${abandonRateMinMessages} | extend AbandonRatePct = round(100.0 * Abandoned / Settled, 2)'

// 5. p95 of the consumer span `process <queue>` (CONSUMER spans land in the requests table, duration in ms).
// Requests are sampled: each row stands for itemCount deliveries.
var processingP95Query = 'requests | where name == "process ${queueName}" | summarize P95Ms = percentilew(duration, itemCount, 95), Deliveries = sum(itemCount) | where Deliveries >= ${processingP95MinDeliveries}'

// 6. The outbox relay (shared/telemetry/consumer.py RelayTelemetry; its metrics exist once it has run).
// A parked event (invalid, refused, or retries exhausted): an OrderAccepted not published.
var relayParkedQuery = 'customMetrics | where name == "orders.relay.parked" | summarize Parked = sum(valueSum)'
// Mean lag from the outbox document's createdAt to the publish (histogram: valueSum / valueCount).
var relayLagQuery = 'customMetrics | where name == "orders.relay.lag" | summarize Published = sum(valueCount), LagSum = sum(valueSum) | where Published > 0 | extend MeanLagS = LagSum / Published'

resource relayParkedAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-relay-parked'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: relay parked an event'
    description: 'The outbox relay parked an OrderAccepted event (no valid event, refused by the broker, or retries exhausted): it is not published until an operator resets its status to pending. Runbook: docs/operations.md#relay-parked-event'
    severity: 1
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: relayParkedQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'Parked'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: false
    actions: {
      actionGroups: [
        actionGroup.id
      ]
    }
  }
}

resource relayLagAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-relay-lag'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: relay lag above ${relayLagThresholdSeconds} s'
    description: 'OrderAccepted events reach the topic late (outbox createdAt to publish). Runbook: docs/operations.md#relay-lag'
    severity: 2
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: relayLagQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'MeanLagS'
          operator: 'GreaterThan'
          threshold: relayLagThresholdSeconds
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: [
        actionGroup.id
      ]
    }
  }
}

resource hashMismatchAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-hash-mismatch'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: HashMismatch dead-letter'
    description: 'A redelivered MessageId carried a different payload than the stored order. Runbook: docs/operations.md#hashmismatch'
    severity: 1
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: hashMismatchQuery
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: false
    actions: {
      actionGroups: [
        actionGroup.id
      ]
    }
  }
}

resource systemicAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-systemic'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: systemic errors'
    description: 'The consumer classified a failure as systemic (config, RBAC, dependency). Runbook: docs/operations.md#systemic-errors'
    severity: 1
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: systemicQuery
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: [
        actionGroup.id
      ]
    }
  }
}

resource abandonRateAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-abandon-rate'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: abandon rate above ${abandonRateThresholdPercent}%'
    description: 'Too many deliveries are abandoned (transient failures, redelivery). Runbook: docs/operations.md#abandon-rate'
    severity: 2
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: abandonRateQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'AbandonRatePct'
          operator: 'GreaterThan'
          threshold: abandonRateThresholdPercent
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: [
        actionGroup.id
      ]
    }
  }
}

resource processingP95Alert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-processing-p95'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: processing p95 above ${processingP95ThresholdMs} ms'
    description: 'The p95 duration of the process orders span is above the threshold. Runbook: docs/operations.md#processing-latency'
    severity: 3
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: processingP95Query
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'P95Ms'
          operator: 'GreaterThan'
          threshold: processingP95ThresholdMs
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: [
        actionGroup.id
      ]
    }
  }
}

// The relay's edges (a stuck outbox event, a silent watchdog, sends failing for 15 minutes, a
// relay that cannot start): relay-alerts.bicep, on this action group.
module relayAlerts 'relay-alerts.bicep' = {
  name: 'relay-alerts'
  params: {
    namePrefix: namePrefix
    location: location
    tags: tags
    applicationInsightsName: applicationInsightsName
    actionGroupId: actionGroup.id
  }
}

// The orders API's request completer (an accepted request still unsent, a completer that stopped
// reporting): completer-alerts.bicep, on this action group.
module completerAlerts 'completer-alerts.bicep' = {
  name: 'completer-alerts'
  params: {
    namePrefix: namePrefix
    location: location
    tags: tags
    applicationInsightsName: applicationInsightsName
    actionGroupId: actionGroup.id
  }
}

// The orders API's answers (a 500, a lasting share of 503): orders-api-alerts.bicep, on this
// action group.
module ordersApiAlerts 'orders-api-alerts.bicep' = {
  name: 'orders-api-alerts'
  params: {
    namePrefix: namePrefix
    location: location
    tags: tags
    applicationInsightsName: applicationInsightsName
    actionGroupId: actionGroup.id
  }
}

// The downstream consumers' alerts (dead letters of the order-events subscriptions, payments
// needing reconciliation): order-events-alerts.bicep, on this action group.
module orderEventsAlerts 'order-events-alerts.bicep' = {
  name: 'order-events-alerts'
  params: {
    namePrefix: namePrefix
    location: location
    tags: tags
    serviceBusNamespaceName: serviceBusNamespaceName
    topicName: topicName
    applicationInsightsName: applicationInsightsName
    actionGroupId: actionGroup.id
  }
}

// The Cosmos DB account's own limits (a logical partition filling up): cosmos-alerts.bicep, on the
// workspace's platform logs, on this action group.
module cosmosAlerts 'cosmos-alerts.bicep' = {
  name: 'cosmos-alerts'
  params: {
    namePrefix: namePrefix
    location: location
    tags: tags
    logAnalyticsWorkspaceId: logAnalyticsWorkspaceId
    actionGroupId: actionGroup.id
  }
}

output actionGroupId string = actionGroup.id
output alertsNotify string = notifyNobody ? 'nobody (ALERT_EMAIL=none)' : alertEmail
