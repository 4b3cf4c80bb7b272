// Diagnostic settings: the platform logs and metrics of Service Bus, Cosmos DB, Storage and Key
// Vault go to the Log Analytics workspace behind Application Insights, so one workspace answers
// "what did the broker, the database, the host storage and the vault see" next to the app's own
// telemetry.
// The resources are referenced by name (`existing`): their own modules stay one concern each.
param logAnalyticsWorkspaceId string
param serviceBusNamespaceName string
param cosmosAccountName string
param storageAccountName string
param keyVaultName string

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

resource vault 'Microsoft.KeyVault/vaults@2024-11-01' existing = {
  name: keyVaultName
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
// statistics (low volume). PartitionKeyStatistics is what the partition-full alert reads
// (cosmos-alerts.bicep): the table CDBPartitionKeyStatistics, one row per reported logical
// partition key with its SizeKb. It does not list every key: "outlier logical partition keys that
// have consumed more storage space than others ... based on a sub-sampling ... approximate.
// Partition keys that are below 1GB of storage may not show up" (Learn: Azure Monitor Logs
// reference, CDBPartitionKeyStatistics), "emitted against the first three partition keys that
// occupy most data storage" (Learn: Monitor Azure Cosmos DB data by using diagnostic settings,
// PartitionKeyStatistics). A key near 20 GB is such an outlier. Opt-in: DataPlaneRequests (one row for every data-plane request:
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

// Who read the provider's key: the vault's audit logs (category group `audit`: AuditEvent, every
// authenticated request with the caller's identity and the secret's name, never its value) into
// the resource-specific table AZKVAuditLogs (Learn: Supported logs for Microsoft.KeyVault/vaults).
// Without it nothing recorded a read of the secret (issue 36, finding 10).
resource keyVaultDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: vault
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logAnalyticsDestinationType: 'Dedicated'
    logs: [
      {
        categoryGroup: 'audit'
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
