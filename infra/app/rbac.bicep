// Least-privilege role assignments. Every assignment is scoped to the single resource the principal
// needs (queue, topic, topic subscription, database, secret, storage account, Application
// Insights), never the resource group.
param managedIdentityPrincipalId string

@description('Object id of the developer running `azd up` (AZURE_PRINCIPAL_ID). Empty = no developer roles.')
param principalId string = ''

@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param principalType string = 'User'

param serviceBusNamespaceName string
param queueName string
param topicName string
param inventorySubscriptionName string
param paymentsSubscriptionName string
param cosmosAccountName string
param cosmosDatabaseName string
param cosmosLeasesContainerName string
param storageAccountName string
param applicationInsightsName string
param keyVaultName string
param paymentProviderApiKeySecretName string

@description('Also grant Azure Service Bus Data Owner on the queue: with Listen rights only, target-based scaling cannot read the queue length and reverts to incremental scale (Learn: target-based scaling). main.bicep turns it on by default.')
param grantQueueDataOwnerForScaling bool = true

// Documented built-in role definition ids (learn.microsoft.com/azure/role-based-access-control/built-in-roles).
var serviceBusDataReceiverRoleId = '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0' // Azure Service Bus Data Receiver
var serviceBusDataSenderRoleId = '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39' // Azure Service Bus Data Sender
var serviceBusDataOwnerRoleId = '090c5cfd-751d-490a-894a-3ce6f1109419' // Azure Service Bus Data Owner
var storageBlobDataOwnerRoleId = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b' // Storage Blob Data Owner
var monitoringMetricsPublisherRoleId = '3913510d-42f4-4e42-8a64-420c390055eb' // Monitoring Metrics Publisher
var keyVaultSecretsUserRoleId = '4633458b-17de-408a-b874-0445c86b69e6' // Key Vault Secrets User

// ---- Cosmos DB data-plane roles: custom, with the data actions the app uses and no other ----
// Not the built-in Data Contributor (items/* and containers/*: item deletes, stored procedures,
// conflicts), which the app never uses. The data actions: Learn, "Azure Cosmos DB for NoSQL data
// plane actions reference" (learn.microsoft.com/azure/cosmos-db/nosql/security/reference-data-plane-actions).
// What uses each, read from the code (tests/infra/test_cosmos_roles.py holds the code to this list):
// - readMetadata: every SDK client, for the account, the containers' partition key and their
//   physical partitions ("must be allowed in every situation where your account is accessed
//   through one of the SDKs", same page, Required metadata);
// - items/create: the orders' create or batch, the kit's markers and records
//   (shared/adapters/cosmos_orders.py: create_item, execute_item_batch "create");
// - items/read: the point reads of a conflict and of a stock item, a payment, an order index
//   (read_item);
// - items/replace: patches, alone (the outbox's dispatched/parked marks,
//   shared/adapters/cosmos_outbox.py patch_item) or in a batch (the stock item's increment, the
//   payment's state: execute_item_batch "patch"); and the relay trigger's lease renewals and
//   checkpoints, replaces with If-Match (azure-cosmos-dotnet-v3,
//   ChangeFeedProcessor/LeaseManagement/DocumentServiceLeaseUpdaterCosmos.cs, ReplaceItemAsync);
// - items/upsert: the page lists no action for a patch (REST "Patch Document", an HTTP PATCH on
//   the item). A patch changes an existing item, as replace does; upsert is granted too so that a
//   patch is allowed whichever of the two Cosmos DB checks. It widens nothing: an upsert is a
//   create or a replace, both granted already, and neither deletes. Not verified on a live
//   account (no Azure account here): a patch refused with 403 would show as a systemic error;
// - executeQuery and readChangeFeed: the outbox watchdog's query (query_items); the SDKs need both
//   for a query ("you must have both", same page); readChangeFeed is also the relay trigger's
//   change feed on the orders container, and the trigger lists its leases with a query
//   (DocumentServiceLeaseContainerCosmos.cs, ListDocumentsAsync).
// The relay trigger's lease container needs one more: items/delete (the initialization lock it
// releases, DocumentServiceLeaseStoreCosmos.cs TryDeleteItemAsync; a split partition's lease,
// DocumentServiceLeaseManagerCosmos.cs DeleteAsync). That is a role of its own, assigned on the leases
// container only: the app can delete nothing in orders, inventory or payments. No stored
// procedure, no conflict feed (executeStoredProcedure, manageConflicts): the app uses neither.
var cosmosAppDataActions = [
  'Microsoft.DocumentDB/databaseAccounts/readMetadata'
  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/create'
  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/read'
  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/replace'
  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/upsert'
  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/executeQuery'
  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/readChangeFeed'
]
var cosmosLeaseDeleteActions = [
  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/delete'
]

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource queue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: namespace
  name: queueName
}

resource topic 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' existing = {
  parent: namespace
  name: topicName
}

// A role assignment may be scoped to a queue, a topic or a topic subscription (Learn: "Authenticate
// and authorize an application with Microsoft Entra ID to access Azure Service Bus entities",
// resource scope): each consumer's identity receives from its own subscription only.
resource inventorySubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' existing = {
  parent: topic
  name: inventorySubscriptionName
}

resource paymentsSubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' existing = {
  parent: topic
  name: paymentsSubscriptionName
}

resource vault 'Microsoft.KeyVault/vaults@2024-11-01' existing = {
  name: keyVaultName
}

// Key Vault RBAC roles can be assigned on a single secret, the narrowest scope (Learn: "Provide
// access to Key Vault keys, certificates, and secrets with Azure role-based access control",
// secret scope role assignment).
resource paymentProviderApiKeySecret 'Microsoft.KeyVault/vaults/secrets@2024-11-01' existing = {
  parent: vault
  name: paymentProviderApiKeySecretName
}

resource cosmosAccount 'Microsoft.DocumentDB/databaseAccounts@2024-11-15' existing = {
  name: cosmosAccountName
}

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

var cosmosDatabaseScope = '${cosmosAccount.id}/dbs/${cosmosDatabaseName}'
var cosmosLeasesScope = '${cosmosDatabaseScope}/colls/${cosmosLeasesContainerName}'

// The two custom roles (actions above). A role definition's name is a GUID; its assignable
// scopes are the narrowest each is assigned at (Learn: "Use data plane role-based access control
// with Azure Cosmos DB for NoSQL": account, database or container scope). The developer and an
// operator running `python -m ops` get the same roles (docs/infrastructure.md, Least privilege).
resource cosmosAppDataRole 'Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions@2024-11-15' = {
  parent: cosmosAccount
  name: guid(cosmosAccount.id, cosmosDatabaseScope, 'orders-app-data')
  properties: {
    roleName: 'orders app data (${cosmosDatabaseName})'
    type: 'CustomRole'
    assignableScopes: [
      cosmosDatabaseScope
    ]
    permissions: [
      {
        dataActions: cosmosAppDataActions
      }
    ]
  }
}

resource cosmosLeaseDeleteRole 'Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions@2024-11-15' = {
  parent: cosmosAccount
  name: guid(cosmosAccount.id, cosmosLeasesScope, 'orders-lease-delete')
  properties: {
    roleName: 'orders lease delete (${cosmosDatabaseName}/${cosmosLeasesContainerName})'
    type: 'CustomRole'
    assignableScopes: [
      cosmosLeasesScope
    ]
    permissions: [
      {
        dataActions: cosmosLeaseDeleteActions
      }
    ]
  }
}

// ---- Function App identity -------------------------------------------------------------------

// Receive + complete/abandon/dead-letter on the orders queue only.
resource appQueueReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(queue.id, managedIdentityPrincipalId, serviceBusDataReceiverRoleId)
  scope: queue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiverRoleId)
    principalId: managedIdentityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// Send on the orders queue only: the public orders API (issue 33) hands each accepted request to
// the queue that consume_order reads (shared/edge/sender.py). Azure Service Bus Data Sender
// (69a216fc-b8fb-44d8-bc22-1f3c2cd27a39, Learn: Azure built-in roles, Integration) at the queue's
// scope, not the namespace's: the app can send to this queue and to the topic (appTopicSender)
// and nowhere else.
resource appQueueSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(queue.id, managedIdentityPrincipalId, serviceBusDataSenderRoleId)
  scope: queue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSenderRoleId)
    principalId: managedIdentityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// Queue-length reads for target-based scaling (Data Owner includes Manage): on by default,
// scoped to the orders queue only (docs/capacity.md#scaling-permission).
resource appQueueOwnerForScaling 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantQueueDataOwnerForScaling) {
  name: guid(queue.id, managedIdentityPrincipalId, serviceBusDataOwnerRoleId)
  scope: queue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataOwnerRoleId)
    principalId: managedIdentityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// Receive + complete/abandon/dead-letter on each downstream consumer's subscription only
// (reserve_stock: inventory; capture_payment: payments). Listen rights only: as for the queue
// without grantQueueDataOwnerForScaling, target-based scaling of these two triggers cannot read
// the subscription's length and scales incrementally (Learn: target-based scaling).
resource appInventorySubscriptionReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(inventorySubscription.id, managedIdentityPrincipalId, serviceBusDataReceiverRoleId)
  scope: inventorySubscription
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiverRoleId)
    principalId: managedIdentityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource appPaymentsSubscriptionReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(paymentsSubscription.id, managedIdentityPrincipalId, serviceBusDataReceiverRoleId)
  scope: paymentsSubscription
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiverRoleId)
    principalId: managedIdentityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// Read the payment provider's credential, and nothing else of the vault: the app setting
// PAYMENT_PROVIDER_API_KEY is a Key Vault reference resolved with this identity
// (function.bicep, keyVaultReferenceIdentity).
resource appPaymentProviderApiKeyReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(paymentProviderApiKeySecret.id, managedIdentityPrincipalId, keyVaultSecretsUserRoleId)
  scope: paymentProviderApiKeySecret
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', keyVaultSecretsUserRoleId)
    principalId: managedIdentityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// Publish OrderAccepted events (outbox relay) to the topic only.
resource appTopicSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(topic.id, managedIdentityPrincipalId, serviceBusDataSenderRoleId)
  scope: topic
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSenderRoleId)
    principalId: managedIdentityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// The app's data role on the orders database: its five containers (orders, leases, inventory,
// payments, requests). Database scope, not container scope, although Cosmos DB role assignments may be
// scoped to a container (Learn: "Configure role-based access control with Microsoft Entra ID for
// your Azure Cosmos DB account": account, database or container): the relay's Cosmos DB trigger
// is a change feed processor, which reads the database's metadata and is refused with a role
// scoped to its containers (Azure/azure-cosmos-dotnet-v3#3638: 403, readMetadata on dbs/<db>).
resource appCosmosData 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: cosmosAccount
  name: guid(cosmosDatabaseScope, managedIdentityPrincipalId, cosmosAppDataRole.id)
  properties: {
    roleDefinitionId: cosmosAppDataRole.id
    principalId: managedIdentityPrincipalId
    scope: cosmosDatabaseScope
  }
}

// Deletes in the leases container only (the relay trigger's lease store).
resource appCosmosLeaseDelete 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = {
  parent: cosmosAccount
  name: guid(cosmosLeasesScope, managedIdentityPrincipalId, cosmosLeaseDeleteRole.id)
  properties: {
    roleDefinitionId: cosmosLeaseDeleteRole.id
    principalId: managedIdentityPrincipalId
    scope: cosmosLeasesScope
  }
}

// Host storage (AzureWebJobsStorage) and the Flex Consumption deployment package container.
resource appStorageBlobOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, managedIdentityPrincipalId, storageBlobDataOwnerRoleId)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwnerRoleId)
    principalId: managedIdentityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// Entra-authenticated telemetry ingestion (local auth is disabled on Application Insights).
resource appMetricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, managedIdentityPrincipalId, monitoringMetricsPublisherRoleId)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisherRoleId)
    principalId: managedIdentityPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// ---- Developer principal (optional): run the consumer locally against the cloud resources ----

resource devQueueSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(principalId)) {
  name: guid(queue.id, principalId, serviceBusDataSenderRoleId)
  scope: queue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSenderRoleId)
    principalId: principalId
    principalType: principalType
  }
}

resource devQueueReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(principalId)) {
  name: guid(queue.id, principalId, serviceBusDataReceiverRoleId)
  scope: queue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiverRoleId)
    principalId: principalId
    principalType: principalType
  }
}

resource devInventorySubscriptionReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(principalId)) {
  name: guid(inventorySubscription.id, principalId, serviceBusDataReceiverRoleId)
  scope: inventorySubscription
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiverRoleId)
    principalId: principalId
    principalType: principalType
  }
}

resource devPaymentsSubscriptionReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(principalId)) {
  name: guid(paymentsSubscription.id, principalId, serviceBusDataReceiverRoleId)
  scope: paymentsSubscription
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiverRoleId)
    principalId: principalId
    principalType: principalType
  }
}

resource devTopicSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(principalId)) {
  name: guid(topic.id, principalId, serviceBusDataSenderRoleId)
  scope: topic
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSenderRoleId)
    principalId: principalId
    principalType: principalType
  }
}

// The developer runs the consumer (and its relay trigger) and `python -m ops` locally: the app's
// two roles, not Data Contributor.
resource devCosmosData 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = if (!empty(principalId)) {
  parent: cosmosAccount
  name: guid(cosmosDatabaseScope, principalId, cosmosAppDataRole.id)
  properties: {
    roleDefinitionId: cosmosAppDataRole.id
    principalId: principalId
    scope: cosmosDatabaseScope
  }
}

resource devCosmosLeaseDelete 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15' = if (!empty(principalId)) {
  parent: cosmosAccount
  name: guid(cosmosLeasesScope, principalId, cosmosLeaseDeleteRole.id)
  properties: {
    roleDefinitionId: cosmosLeaseDeleteRole.id
    principalId: principalId
    scope: cosmosLeasesScope
  }
}
