// Alert rules of the orders API's request completer (shared/edge/completer.py, the timer function
// complete_requests, every minute): a request committed but whose message is still not sent, and
// a completer that stopped reporting. Either is an intent the API accepted that no consumer may
// ever hear of. Deployed by alerts.bicep on its action group. Log alerts query the Application
// Insights component; the names are the ones of shared/telemetry/names.py ("the request
// completer"; docs/operations.md, "Orders API: unsent request").
param namePrefix string
param location string
param tags object = {}

param applicationInsightsName string

@description('The action group of alerts.bicep (its output actionGroupId).')
param actionGroupId string

@description('Alert when the request completer finds a request committed this long ago whose message is still not sent (seconds). Above the completer\'s own age (90 s: the API\'s in-progress window and the longest a send may take) plus two of its 1-minute runs: it fires only when the completer could not send it either.')
@minValue(240)
param completerUnsentThresholdSeconds int = 300

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// The completer reports on every run, every minute, whether it sends or not: the age of the
// oldest unsent request record (0 if none). An empty input still gives one row (summarize without
// by: sum() 0, max() null, learn.microsoft.com/kusto/query/summarize-operator "Default values of
// aggregations"), dropped by Runs > 0: no run is the silent alert's.
var completerUnsentQuery = 'customMetrics | where name == "orders.edge.completer.unsent_age" | summarize Runs = sum(valueCount), OldestUnsentS = max(valueMax) | where Runs > 0'
// No run in 15 minutes (fifteen are due): the completer itself is down (app stopped, timer lock,
// host storage role removed, its query refused): nothing else would notice an unsent request.
var completerSilentQuery = 'customMetrics | where name == "orders.edge.completer.unsent_age" | summarize Runs = sum(valueCount)'

resource completerUnsentAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-completer-unsent'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: an accepted API request unsent over ${completerUnsentThresholdSeconds} s'
    description: 'The request completer found an orders API request committed long ago whose message is still not on the orders queue, and could not send it either: the consumer has not been told of an order, amendment or cancellation the API accepted. Runbook: docs/operations.md#orders-api-unsent-request'
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
          query: completerUnsentQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'OldestUnsentS'
          operator: 'GreaterThan'
          threshold: completerUnsentThresholdSeconds
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

resource completerSilentAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-completer-silent'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: request completer silent for 15 min'
    description: 'The orders API\'s request completer (every minute) has reported nothing for 15 minutes: nothing would send, or notice, a request whose message was never sent. Runbook: docs/operations.md#orders-api-request-completer-silent'
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
          query: completerSilentQuery
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
