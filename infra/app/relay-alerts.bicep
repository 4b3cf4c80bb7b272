// Alert rules of the relay's edges: what no publish would show (a stuck outbox event the
// watchdog could not publish, a watchdog that stopped reporting, a backlog growing faster than
// the watchdog drains), sends failing for good and a
// relay that cannot start. The relay's own parked and lag alerts live in alerts.bicep, which
// deploys this module on its action group. Log alerts query the Application Insights component; the names are the
// ones of shared/telemetry/names.py (docs/operations.md, "Relay").
param namePrefix string
param location string
param tags object = {}

param applicationInsightsName string

@description('The action group of alerts.bicep (its output actionGroupId).')
param actionGroupId string

@description('Alert when the outbox watchdog finds an OrderAccepted event still pending this long after its order was accepted (seconds). Above the watchdog\'s own age (OUTBOX_WATCHDOG_MIN_AGE_SECONDS, 300) plus its 5-minute schedule: it fires only when the watchdog could not publish the event either.')
@minValue(600)
param relayStuckThresholdSeconds int = 900

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// The outbox watchdog (shared/relay/watchdog.py) reports on every run, every 5 minutes, whether the
// relay publishes or not: the age of the oldest outbox document still pending (0 if none).
// An empty input still gives one row (summarize without by: sum() 0, max() null,
// learn.microsoft.com/kusto/query/summarize-operator "Default values of aggregations").
var relayStuckQuery = 'customMetrics | where name == "orders.relay.stuck_age" | summarize Runs = sum(valueCount), OldestStuckS = max(valueMax) | where Runs > 0'
// No run in 15 minutes (three are due): the watchdog itself is down (app stopped, timer lock,
// host storage role removed): nothing else would notice a relay that stopped too.
var relayWatchdogSilentQuery = 'customMetrics | where name == "orders.relay.stuck_age" | summarize Runs = sum(valueCount)'
// A backlog growing faster than the watchdog drains it: every run of the window stopped at its
// page limit (it left stuck events behind) and the oldest stuck age rose from the first run to
// the last. The watchdog publishes the oldest first, so when it keeps up (or catches up) that age
// falls run over run; only arrivals faster than its capacity (MAX_PAGES_PER_RUN pages of
// OUTBOX_WATCHDOG_MAX_DOCUMENTS every 5 minutes, about 33 events/s: below every tier's orders/s)
// make it rise. The tuple names arg_min/arg_max's columns (learn.microsoft.com/kusto/query/
// arg-min-aggregation-function); an empty window gives 0.
var relayWatchdogBehindQuery = 'customMetrics | where name == "orders.relay.stuck_age" | extend WatchdogEnd = tostring(customDimensions["orders.relay.watchdog_end"]) | summarize Runs = sum(valueCount), AtPageLimit = sumif(valueCount, WatchdogEnd == "page_limit"), (FirstAt, FirstAgeS) = arg_min(timestamp, valueMax), (LastAt, LastAgeS) = arg_max(timestamp, valueMax) | extend GrowthS = iff(Runs >= 2 and AtPageLimit == Runs, LastAgeS - FirstAgeS, 0.0)'
// Sends failing in at least three 5-minute bins of the last 15 minutes: an outage that the
// relay's retries are not riding out (a blip is retried and published at once).
var relayFailedSendsQuery = 'customMetrics | where name == "orders.relay.failed" | summarize Failed = sum(valueSum) by bin(timestamp, 5m) | summarize FailingPeriods = countif(Failed > 0), Failed = sum(Failed)'
// The relay (or the watchdog) cannot even be built: an invalid or missing setting, named.
var relayConfigurationQuery = 'traces | where severityLevel == 4 and tostring(customDimensions["logger_name"]) == "orders.relay" and isnotempty(tostring(customDimensions["setting"])) | project timestamp, message, setting = tostring(customDimensions["setting"])'

resource relayStuckAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-relay-stuck'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: an OrderAccepted event pending over ${relayStuckThresholdSeconds} s'
    description: 'The outbox watchdog found an outbox document still pending long after its order was accepted, and could not publish it either: downstream has not been told about an accepted order. Runbook: docs/operations.md#relay-stuck-outbox-event'
    severity: 1
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: relayStuckQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'OldestStuckS'
          operator: 'GreaterThan'
          threshold: relayStuckThresholdSeconds
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
        actionGroupId
      ]
    }
  }
}

resource relayWatchdogSilentAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-relay-watchdog-silent'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: outbox watchdog silent for 15 min'
    description: 'The outbox watchdog (every 5 minutes) has reported nothing for 15 minutes: nothing would notice an outbox event the relay does not publish. Runbook: docs/operations.md#relay-watchdog-silent'
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
          query: relayWatchdogSilentQuery
          timeAggregation: 'Minimum'
          metricMeasureColumn: 'Runs'
          operator: 'LessThan'
          threshold: 1
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
        actionGroupId
      ]
    }
  }
}

resource relayWatchdogBehindAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-relay-watchdog-behind'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: outbox backlog growing faster than the watchdog drains'
    description: 'Every outbox watchdog run for 15 minutes stopped at its page limit and the oldest stuck event grew older: the change-feed relay is not publishing, and the watchdog (a backstop of about 33 events/s) cannot keep up with the orders. Runbook: docs/operations.md#relay-watchdog-falling-behind'
    severity: 1
    enabled: true
    scopes: [
      applicationInsights.id
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: relayWatchdogBehindQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'GrowthS'
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
        actionGroupId
      ]
    }
  }
}

resource relayFailedSendsAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-relay-failed-sends'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: relay sends failing for 15 min'
    description: 'Sends of OrderAccepted events to the topic have failed in every 5-minute period for 15 minutes (a missing, disabled or full topic, a removed role, an outage): events wait in the outbox. Runbook: docs/operations.md#relay-failed-sends'
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
          query: relayFailedSendsQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'FailingPeriods'
          operator: 'GreaterThanOrEqual'
          threshold: 3
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
        actionGroupId
      ]
    }
  }
}

resource relayConfigurationAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-relay-configuration'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: relay cannot start (invalid setting)'
    description: 'The outbox relay or its watchdog logged an invalid or missing app setting (named in the log): no OrderAccepted event is published until it is fixed. Runbook: docs/operations.md#relay-invalid-configuration'
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
          query: relayConfigurationQuery
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
        actionGroupId
      ]
    }
  }
}
