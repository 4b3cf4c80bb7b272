// Alerts on the Cosmos DB account's own limits, read from its diagnostic logs in the Log Analytics
// workspace (diagnostics.bicep sends them to resource-specific tables), on the consumer's action
// group (alerts.bicep deploys this module).
//
// A logical partition holds at most 20 GB ("Maximum storage across all items per (logical)
// partition", Learn: Azure Cosmos DB service quotas, learn.microsoft.com/azure/cosmos-db/concepts-limits);
// past it every write to that partition key is refused with 403, sub-status 1014 ("Partition key
// reached maximum size", Learn: Diagnose and troubleshoot Azure Cosmos DB forbidden exceptions).
// The consumers hold such a write as systemic (PartitionFull): retried, abandoned, never
// dead-lettered, and the systemic-errors alert pages. This alert comes before that: a key past
// the threshold, while its writes still succeed.
param namePrefix string
param location string
param tags object = {}

@description('The Log Analytics workspace the Cosmos DB diagnostic settings write to (monitoring.bicep): the alert\'s scope.')
param logAnalyticsWorkspaceId string

@description('The action group of alerts.bicep (its output actionGroupId).')
param actionGroupId string

@description('Alert when one logical partition key of a container holds more than this many GB (of the 20 GB a logical partition may hold). 15 = 75%: 5 GB left before writes to that key are refused.')
@minValue(1)
@maxValue(19)
param partitionKeySizeThresholdGb int = 15

// The partition keys' sizes: CDBPartitionKeyStatistics (the PartitionKeyStatistics category),
// columns CollectionName, PartitionKey, SizeKb (Learn: Azure Monitor Logs reference,
// CDBPartitionKeyStatistics). It reports outliers only, the largest keys by storage (above about
// 1 GB), from a sub-sample and so approximate: diagnostics.bicep. Each key's largest report of the
// window, then the largest key of each container, in GB (1 GB = 1,048,576 KB). The keys themselves
// (a SKU, an order id: values from messages) stay out of the alert: it names the container only,
// a bounded set; the runbook's query lists the keys.
var partitionKeySizeQuery = 'CDBPartitionKeyStatistics | summarize SizeKb = max(SizeKb) by CollectionName, PartitionKey | summarize LargestKeyGb = round(max(SizeKb) / 1048576.0, 2), KeysReported = count() by CollectionName'

// Severity 2, not 1: nothing fails yet, a person has days to act in working hours; the write that
// finds the partition full pages at severity 1 through the systemic-errors alert. Hourly over one
// day: the statistics are periodic reports, not a stream (Learn gives no interval), and a
// partition grows over days. Stateful (autoMitigate): it fires once and resolves when the key
// shrinks below the threshold or stops being reported.
resource partitionKeySizeAlert 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-${namePrefix}-cosmos-partition-key-size'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'orders: a Cosmos DB logical partition above ${partitionKeySizeThresholdGb} GB of 20'
    description: 'A logical partition key of a Cosmos DB container holds more than the threshold of the 20 GB a logical partition may hold; at 20 GB every write to it is refused (403, sub-status 1014) and the consumer holds those messages as systemic (PartitionFull). Runbook: docs/operations.md#a-logical-partition-is-filling-partitionfull'
    severity: 2
    enabled: true
    scopes: [
      logAnalyticsWorkspaceId
    ]
    evaluationFrequency: 'PT1H'
    windowSize: 'P1D'
    criteria: {
      allOf: [
        {
          query: partitionKeySizeQuery
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'LargestKeyGb'
          dimensions: [
            {
              name: 'CollectionName'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: partitionKeySizeThresholdGb
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
