// Alerts of the order-events topic's two downstream consumers (stock-reservation: reserve_stock
// on the subscription `inventory`; payment-capture: capture_payment on `payments`), on the
// consumer's action group (alerts.bicep deploys this module). Each description names the runbook
// section of docs/operations.md.
//
// Dead letters: Service Bus reports DeadletteredMessages per queue or topic, its EntityName
// dimension, not per subscription ("Count of dead-lettered messages in a Queue/Topic", Learn:
// Azure Service Bus monitoring data reference). So the broker's own count is one alert on the
// topic (both subscriptions; the `retained` subscription, which nobody receives from and which
// drops expired events, dead-letters nothing), and each consumer's own dead letters are a log
// alert on its settlements (the metric orders.messages with settlement "deadletter", filtered on
// the attribute orders.consumer, shared/telemetry/names.py).
//
// A stock shortfall (orders.stock.shortfall) is a business outcome, counted and shown, never an
// alert: nothing is wrong with the system when stock runs out.
param namePrefix string
param location string
param tags object = {}

param serviceBusNamespaceName string
param topicName string
param applicationInsightsName string
param actionGroupId string

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// The consumers' names (names.md): the value of the attribute orders.consumer.
var stockReservationConsumer = 'stock-reservation'
var paymentCaptureConsumer = 'payment-capture'

// The runbook sections (docs/operations.md).
var stockReservationRunbook = 'docs/operations.md#stock-reservation'
var paymentsRunbook = 'docs/operations.md#payments-needing-reconciliation'

// A counter's increments in the window (customMetrics rows are pre-aggregated: valueSum).
var stockReservationDeadLetteredQuery = 'customMetrics | where name == "orders.messages" | where tostring(customDimensions["orders.consumer"]) == "${stockReservationConsumer}" | where tostring(customDimensions["settlement"]) == "deadletter" | summarize DeadLettered = sum(valueSum)'
var paymentCaptureDeadLetteredQuery = 'customMetrics | where name == "orders.messages" | where tostring(customDimensions["orders.consumer"]) == "${paymentCaptureConsumer}" | where tostring(customDimensions["settlement"]) == "deadletter" | summarize DeadLettered = sum(valueSum)'
// Events parked as needing reconciliation: the provider could not tell whether the money moved.
var reconciliationNeededQuery = 'customMetrics | where name == "orders.payments.reconciliation_needed" | summarize Parked = sum(valueSum)'

resource orderEventsDeadLetteredAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'alert-${namePrefix}-order-events-deadlettered'
  location: 'global'
  tags: tags
  properties: {
    description: 'Messages in a dead-letter queue of the order-events topic (subscription inventory: stock reservation; payments: payment capture). Service Bus counts dead letters per topic, not per subscription: the per-consumer alerts say which. Runbooks: ${stockReservationRunbook} (inventory), ${paymentsRunbook} (payments)'
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
                topicName
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
        actionGroupId: actionGroupId
      }
    ]
  }
}

resource stockReservationDeadLetteredAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-stock-reservation-deadlettered'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: stock reservation dead-lettered an event'
    description: 'reserve_stock dead-lettered an event of the inventory subscription (invalid or refused event, or its retries exhausted): its stock is not reserved or released until it is resubmitted. Runbook: ${stockReservationRunbook}'
    severity: 2
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: stockReservationDeadLetteredQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'DeadLettered'
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
        actionGroupId
      ]
    }
  }
}

resource paymentCaptureDeadLetteredAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-payment-capture-deadlettered'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: payment capture dead-lettered an event'
    description: 'capture_payment dead-lettered an event of the payments subscription (invalid or refused event, retries exhausted, or parked as needing reconciliation): no money moves for it until it is resolved. Runbook: ${paymentsRunbook}'
    severity: 2
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: paymentCaptureDeadLetteredQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'DeadLettered'
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
        actionGroupId
      ]
    }
  }
}

// Severity 1: money may have moved, or not, and only a person can tell (issue 28: never retried
// blindly). Not auto-mitigated: it stays fired until an operator resolves the parked events.
resource reconciliationNeededAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-payments-reconciliation-needed'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: payment needs reconciliation'
    description: 'capture_payment parked an event as needing reconciliation (dead-letter reason NeedsReconciliation): the provider could not tell whether the capture or refund happened. Resolve it with python -m ops before anything retries it. Runbook: ${paymentsRunbook}'
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
          query: reconciliationNeededQuery
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
        actionGroupId
      ]
    }
  }
}
