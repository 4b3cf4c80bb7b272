// Diagnostic settings: the platform logs and metrics of Service Bus, Cosmos DB and Storage go to
// the Log Analytics workspace behind Application Insights, so one workspace answers "what did the
// broker, the database and the host storage see" next to the app's own telemetry.
// The resources are referenced by name (`existing`): their own modules stay one concern each.
param logAnalyticsWorkspaceId string
param serviceBusNamespaceName string
param cosmosAccountName string
param storageAccountName string

@description('Also send Cosmos DB DataPlaneRequests and PartitionKeyRUConsumption: a row per data-plane request (or per partition-key charge summary), the largest Log Analytics ingestion per order. Off by default; see docs/capacity.md for what an operator has without them.')
param cosmosDataPlaneLogs bool = false

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource cosmosAccount 'Microsoft.DocumentDB/databaseAccounts@2024-11-15' existing = {
  name: cosmosAccountName
}

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' existing = {
  parent: storage
  name: 'default'
}

// Operational, runtime (dead-lettering, settlement) and audit logs; ActiveMessages and friends.
resource serviceBusDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: namespace
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'AllMetrics'
        enabled: true
      }
    ]
  }
}

// Cosmos DB log categories (Learn: Supported logs for Microsoft.DocumentDB/DatabaseAccounts).
// Always: control-plane operations, partition-key storage statistics and query runtime
// statistics (low volume). Opt-in: DataPlaneRequests (one row for every data-plane request:
// status code, RU, duration) and PartitionKeyRUConsumption (RU per logical partition key; every
// order is its own key). Without them the Requests metrics (below, AllMetrics-style counts by
// status code), the app's orders.cosmos.request_charge histogram and the workbook still show RU,
// throttling and errors; what is lost is the per-request row (which operation, which document)
// for an after-the-fact investigation. Resource-specific tables (CDB*) are cheaper to query
// than AzureDiagnostics.
var cosmosAlwaysLogs = [
  'ControlPlaneRequests'
  'PartitionKeyStatistics'
  'QueryRuntimeStatistics'
]
var cosmosDataPlaneCategories = [
  'DataPlaneRequests'
  'PartitionKeyRUConsumption'
]
var cosmosLogCategories = cosmosDataPlaneLogs ? concat(cosmosAlwaysLogs, cosmosDataPlaneCategories) : cosmosAlwaysLogs

resource cosmosDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: cosmosAccount
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logAnalyticsDestinationType: 'Dedicated'
    logs: [for category in cosmosLogCategories: {
      category: category
      enabled: true
    }]
    metrics: [
      {
        category: 'Requests'
        enabled: true
      }
    ]
  }
}

// Account-level transaction metrics; blob logs are per service (the host's leases and the
// deployment package live in blobs).
resource storageDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: storage
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    metrics: [
      {
        category: 'Transaction'
        enabled: true
      }
    ]
  }
}

resource blobDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: blobService
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
    metrics: [
      {
        category: 'Transaction'
        enabled: true
      }
    ]
  }
}
