// Alert rules of the orders API (shared/edge, the HTTP functions place_order, amend_order,
// cancel_order, get_order): an exception escaping it (500), and a share of its answers being 503
// for long. Deployed by alerts.bicep on its action group. Log alerts query the Application
// Insights component; the names are shared/telemetry/names.py's ("the orders API";
// docs/operations.md, "Orders API: 5xx answers").
param namePrefix string
param location string
param tags object = {}

param applicationInsightsName string

@description('The action group of alerts.bicep (its output actionGroupId).')
param actionGroupId string

@description('Alert when at least this share of the orders API\'s answers in 15 minutes are 503 (percent). A client retries a 503 with its key, so a few are the moment; a lasting share is Cosmos DB or the queue refusing, or a setting (docs/operations.md, "Orders API: 5xx answers").')
@minValue(1)
@maxValue(100)
param ordersApiUnavailablePercent int = 10

@description('... with at least this many answers in the window (a quiet API\'s one 503 is no outage).')
@minValue(1)
param ordersApiUnavailableMinimumAnswers int = 20

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// Every request is counted once (the counter orders.edge.requests, its status on each point),
// so sums are answers, never sampled spans.
var failedQuery = 'customMetrics | where name == "orders.edge.requests" | where toint(customDimensions["orders.edge.status_code"]) == 500 | summarize Failed = sum(valueSum)'
var unavailableQuery = 'customMetrics | where name == "orders.edge.requests" | extend status_code = toint(customDimensions["orders.edge.status_code"]) | summarize Answered = sum(valueSum), Unavailable = sumif(valueSum, status_code == 503) | where Answered >= ${ordersApiUnavailableMinimumAnswers} | extend UnavailablePercent = 100.0 * Unavailable / Answered'

resource failedAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-orders-api-failed'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: the orders API answered 500'
    description: 'An exception escaped the orders API (a bug, or the queue missing or refusing the app\'s identity): the request was answered 500 and its client may not retry. Runbook: docs/operations.md#orders-api-5xx-answers'
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
          query: failedQuery
          timeAggregation: 'Total'
          metricMeasureColumn: 'Failed'
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

resource unavailableAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-orders-api-unavailable'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: the orders API answering 503 to ${ordersApiUnavailablePercent}% or more'
    description: 'For 15 minutes the orders API has answered 503 to a large share of its requests: Cosmos DB or the orders queue refusing, or an invalid setting. Clients retrying with their keys lose nothing, but no order is being taken. Runbook: docs/operations.md#orders-api-5xx-answers'
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
          query: unavailableQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'UnavailablePercent'
          operator: 'GreaterThanOrEqual'
          threshold: ordersApiUnavailablePercent
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
