// Idempotent Consumer reference implementation: entry point for `azd up` / `azd provision`.
// Creates the resource group and wires the modules in ./app (one per concern).
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('azd environment name; used to derive a unique suffix for every resource name.')
param environmentName string

@minLength(1)
@description('Region for all resources. Only regions that offer Flex Consumption: a region without it fails half-way through the deployment. The list is the one the official Flex azd quickstart allows (Azure-Samples/functions-quickstart-python-http-azd infra/main.bicep, commit 0bb0f10), without its canary region eastus2euap; `az functionapp list-flexconsumption-locations` shows the current one.')
@allowed([
  'australiaeast'
  'australiasoutheast'
  'brazilsouth'
  'canadacentral'
  'centralindia'
  'centralus'
  'eastasia'
  'eastus'
  'eastus2'
  'francecentral'
  'germanywestcentral'
  'italynorth'
  'japaneast'
  'koreacentral'
  'northcentralus'
  'northeurope'
  'norwayeast'
  'southafricanorth'
  'southcentralus'
  'southeastasia'
  'southindia'
  'spaincentral'
  'swedencentral'
  'uaenorth'
  'uksouth'
  'ukwest'
  'westcentralus'
  'westeurope'
  'westus'
  'westus2'
  'westus3'
])
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Object id of the developer running azd (AZURE_PRINCIPAL_ID). Granted data roles only when grantDeveloperAccess is true.')
param principalId string = ''

@description('Grant principalId Cosmos DB data and Service Bus send/receive rights, to run the consumer locally against the cloud. Off by default: CI and production deployments must not grant whoever deploys access to the data.')
param grantDeveloperAccess bool = false

@allowed([
  'User'
  'ServicePrincipal'
  'Group'
])
param principalType string = 'User'

@description('Optional resource group name (default rg-<environmentName>).')
param resourceGroupName string = ''

@description('Cosmos DB serverless (default). false = provisioned autoscale throughput per container (orders, inventory and payments: cosmosAutoscaleMaxThroughput each; leases: cosmosLeasesAutoscaleMaxThroughput).')
param cosmosServerless bool = true

@description('Maximum autoscale RU/s of the orders container, and of each of the inventory and payments containers, when cosmosServerless = false (a multiple of 1000).')
@minValue(1000)
@maxValue(1000000)
param cosmosAutoscaleMaxThroughput int = 1000

@description('Optional override of messaging.json duplicateDetectionHistoryTimeWindow (empty = use the file).')
@allowed([
  ''
  'PT1M'
  'PT5M'
  'PT10M'
  'PT30M'
  'PT1H'
  'PT6H'
  'PT12H'
  'P1D'
  'P2D'
  'P3D'
  'P7D'
])
param duplicateDetectionHistoryTimeWindowOverride string = ''

@description('How long the order-events topic\'s default subscription `retained` keeps each OrderAccepted event, or "none" (on purpose only: events sent while no subscription exists are lost). infra/app/servicebus.bicep, docs/events.md.')
@allowed([
  'PT1H'
  'PT6H'
  'PT12H'
  'P1D'
  'P2D'
  'P3D'
  'P7D'
  'none'
])
param retainedEventsTimeToLive string = 'P1D'

@description('How long after a message is dead-lettered an operator may still resubmit it (`python -m ops resubmit`) and have a copy the consumer already handled recognised as a duplicate by its inbox marker. The markers are kept this long beyond what the queue itself can redeliver (INBOX_MARKER_TTL_SECONDS; docs/configuration.md, "Inbox markers: retention"). Past it, a replayed amendment or cancellation is still caught by the order\'s version (stale), never applied twice.')
@allowed([
  'P1D'
  'P3D'
  'P7D'
  'P14D'
  'P30D'
  'P60D'
  'P90D'
  'P180D'
  'P365D'
])
param deadLetterReplayHorizon string = 'P14D'

@description('Flex Consumption scale-out cap of the app: 40 for 100 orders/s, 100 for 1,000/s, 250 for 10,000/s (docs/capacity.md). It also caps the load on Cosmos DB.')
@minValue(1)
@maxValue(1000)
param functionMaximumInstanceCount int = 40

@description('Grant the app identity Azure Service Bus Data Owner on the orders queue only. With Listen (Data Receiver) rights alone target-based scaling cannot read the queue length and reverts to incremental scale, one instance at a time (Learn: target-based scaling), which cannot absorb a burst. On by default; false = least privilege at the cost of slow scale-out. See docs/capacity.md#scaling-permission.')
param grantQueueDataOwnerForScaling bool = true

@minLength(1)
@description('E-mail address notified when an alert fires, or "none" (the default, so that `azd provision --no-prompt` and pipelines run): the alerts are deployed and notify nobody; the ALERTS_NOTIFY output says so. Set ALERT_EMAIL.')
param alertEmail string = 'none'

@minValue(1)
@maxValue(100)
param abandonRateThresholdPercent int = 10

@minValue(100)
param processingP95ThresholdMs int = 2000

// ---- Capacity tier: infra/tiers/*.parameters.json set these for 100, 1,000 and 10,000 orders/s
// (docs/capacity.md). The defaults are the 100 orders/s tier.

@description('Service Bus tier: Standard (credit-throttled, about 200-250 orders/s per namespace) or Premium (dedicated messaging units; private endpoints; zone redundancy).')
@allowed([
  'Standard'
  'Premium'
])
param serviceBusSku string = 'Standard'

@description('Premium only: messaging units per partition (the namespace gets this times serviceBusPremiumPartitions).')
@allowed([
  1
  2
  4
  8
  16
])
param serviceBusMessagingUnitsPerPartition int = 1

@description('Premium only: partitions of the namespace (1, 2 or 4; fixed at creation).')
@allowed([
  1
  2
  4
])
param serviceBusPremiumPartitions int = 1

@description('Premium only: zone-redundant namespace (create-time only).')
param serviceBusZoneRedundant bool = true

@description('Largest size of the orders queue and the order-events topic (MB), sized for the outage the backlog must survive (docs/capacity.md). Standard: at most 5120 (larger values are capped to it).')
@allowed([
  1024
  2048
  3072
  4096
  5120
  10240
  20480
  40960
  81920
])
param serviceBusMaxSizeInMegabytes int = 5120

@description('Maximum autoscale RU/s of the leases container when cosmosServerless = false.')
@minValue(1000)
param cosmosLeasesAutoscaleMaxThroughput int = 1000

@description('Memory of each Flex Consumption instance (MB).')
@allowed([
  512
  2048
  4096
])
param functionInstanceMemoryMB int = 2048

@description('Always-ready instances of consume_order (0 = scale from zero; each is billed while idle).')
@minValue(0)
@maxValue(1000)
param functionAlwaysReadyInstances int = 0

@description('Private network: a VNet with the Function App integrated (delegated subnet), private endpoints for Cosmos DB, Storage and (Premium only) Service Bus, and public network access off on them. Off by default; see docs/infrastructure.md#network for what then runs only inside the VNet.')
param vnetEnabled bool = false

@description('Daily ingestion cap of the Log Analytics workspace (GB); -1 = none. Reaching it stops ingestion, and the log alerts with it, until the next reset.')
@minValue(-1)
param logAnalyticsDailyQuotaGb int = -1

@description('Send Cosmos DB DataPlaneRequests and PartitionKeyRUConsumption logs (one row per request) to Log Analytics. Off by default: the largest ingestion cost per order; docs/capacity.md says what an operator has without them.')
param cosmosDataPlaneLogs bool = false

// ---- The payment provider (capture_payment; issue 28). No defaults: a deployment names its
// provider and its key (azd asks, or reads PAYMENT_PROVIDER_BASE_URL and PAYMENT_PROVIDER_API_KEY
// from the environment; a pipeline gets them from azure.yaml's pipeline variables and secrets).

@description('Base URL of the payment provider\'s HTTP API: https only (the deployment fails on another scheme; function.bicep). PAYMENT_PROVIDER_BASE_URL.')
@minLength(9)
param paymentProviderBaseUrl string

@secure()
@description('The payment provider\'s API key, for the FIRST deployment of an environment only: it is stored as the Key Vault secret payment-provider-api-key and the deployment then clears PAYMENT_PROVIDER_API_KEY from the azd environment (the output below). Empty (every later deployment) = the secret is left as it is in the vault, where the key is rotated (docs/operations.md, The provider credential). The app reads it through a Key Vault reference.')
param paymentProviderApiKey string = ''

@description('honoured (default): the provider deduplicates requests by their Idempotency-Key header; ignored: it does not, and the consumer looks an in-progress operation up by its reference before repeating it. PAYMENT_PROVIDER_IDEMPOTENCY_KEYS.')
@allowed([
  'honoured'
  'ignored'
])
param paymentProviderIdempotencyKeys string = 'honoured'

// ---- The public orders API's authentication (issue 33; docs/infrastructure.md, The orders API).

@description('Application (client) id of the Entra ID app registration of the orders API (`az ad app create`, docs/infrastructure.md). Set = App Service authentication (Entra ID) in front of the function keys, the production default; empty (the default, as no template can create an app registration) = the function keys alone protect the API. API_AUTH_CLIENT_ID.')
param apiAuthClientId string = ''

@description('Entra ID tenant of that app registration; empty = the tenant of the deployment. API_AUTH_TENANT_ID.')
param apiAuthTenantId string = ''

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
// The replay horizon in seconds, the way servicebus.bicep reads messaging.json's durations (an
// ISO 8601 duration added to the epoch, read back as epoch seconds; Bicep date functions).
var deadLetterReplayHorizonSeconds = dateTimeToEpoch(dateTimeAdd('1970-01-01T00:00:00Z', deadLetterReplayHorizon))
var tags = {
  'azd-env-name': environmentName
  workload: 'idempotent-consumer'
}
var functionAppName = 'func-orders-${resourceToken}'
var deploymentContainerName = 'app-package-${take(functionAppName, 32)}-${take(resourceToken, 7)}'

resource rg 'Microsoft.Resources/resourceGroups@2024-11-01' = {
  name: !empty(resourceGroupName) ? resourceGroupName : 'rg-${environmentName}'
  location: location
  tags: tags
}

module identity 'app/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: 'id-orders-${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring 'app/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: 'log-${resourceToken}'
    applicationInsightsName: 'appi-${resourceToken}'
    location: location
    tags: tags
    dailyQuotaGb: logAnalyticsDailyQuotaGb
  }
}

module storage 'app/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: 'st${resourceToken}'
    location: location
    tags: tags
    deploymentContainerName: deploymentContainerName
    disablePublicNetworkAccess: vnetEnabled
  }
}

module serviceBus 'app/servicebus.bicep' = {
  name: 'servicebus'
  scope: rg
  params: {
    name: 'sb-${resourceToken}'
    location: location
    tags: tags
    duplicateDetectionHistoryTimeWindowOverride: duplicateDetectionHistoryTimeWindowOverride
    sku: serviceBusSku
    messagingUnitsPerPartition: serviceBusMessagingUnitsPerPartition
    premiumMessagingPartitions: serviceBusPremiumPartitions
    zoneRedundant: serviceBusZoneRedundant
    maxSizeInMegabytes: serviceBusMaxSizeInMegabytes
    disablePublicNetworkAccess: vnetEnabled
    retainedEventsTimeToLive: retainedEventsTimeToLive
  }
}

module cosmos 'app/cosmos.bicep' = {
  name: 'cosmos'
  scope: rg
  params: {
    accountName: 'cosmos-${resourceToken}'
    location: location
    tags: tags
    databaseName: 'orders'
    containerName: 'orders'
    leasesContainerName: 'leases'
    inventoryContainerName: 'inventory'
    paymentsContainerName: 'payments'
    requestsContainerName: 'requests'
    serverless: cosmosServerless
    autoscaleMaxThroughput: cosmosAutoscaleMaxThroughput
    leasesAutoscaleMaxThroughput: cosmosLeasesAutoscaleMaxThroughput
    disablePublicNetworkAccess: vnetEnabled
  }
}

// The payment provider's credential (keyvault.bicep). 'kv-' and the 13-character token: within
// Key Vault's 24 characters.
module keyVault 'app/keyvault.bicep' = {
  name: 'keyvault'
  scope: rg
  params: {
    name: 'kv-${resourceToken}'
    location: location
    tags: tags
    paymentProviderApiKey: paymentProviderApiKey
    disablePublicNetworkAccess: vnetEnabled
  }
}

// Optional private network (vnetEnabled); the modules above turn public access off with it.
module network 'app/network.bicep' = if (vnetEnabled) {
  name: 'network'
  scope: rg
  params: {
    name: 'vnet-${resourceToken}'
    location: location
    tags: tags
    cosmosAccountId: cosmos.outputs.accountId
    storageAccountId: storage.outputs.id
    serviceBusNamespaceId: serviceBus.outputs.id
    serviceBusPrivateEndpoint: serviceBusSku == 'Premium'
    keyVaultId: keyVault.outputs.id
  }
}

module functionApp 'app/function.bicep' = {
  name: 'function'
  scope: rg
  params: {
    planName: 'plan-${resourceToken}'
    functionAppName: functionAppName
    location: location
    tags: tags
    serviceName: 'consumer'
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.name
    storageBlobEndpoint: storage.outputs.blobEndpoint
    deploymentContainerName: storage.outputs.deploymentContainerName
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    queueName: serviceBus.outputs.queueName
    topicName: serviceBus.outputs.topicName
    inventorySubscriptionName: serviceBus.outputs.inventorySubscriptionName
    paymentsSubscriptionName: serviceBus.outputs.paymentsSubscriptionName
    cosmosEndpoint: cosmos.outputs.endpoint
    cosmosDatabaseName: cosmos.outputs.databaseName
    cosmosContainerName: cosmos.outputs.containerName
    inventoryContainerName: cosmos.outputs.inventoryContainerName
    paymentsContainerName: cosmos.outputs.paymentsContainerName
    requestsContainerName: cosmos.outputs.requestsContainerName
    paymentProviderBaseUrl: paymentProviderBaseUrl
    paymentProviderIdempotencyKeys: paymentProviderIdempotencyKeys
    paymentProviderApiKeySecretUri: keyVault.outputs.paymentProviderApiKeySecretUri
    applicationInsightsConnectionString: monitoring.outputs.connectionString
    maximumInstanceCount: functionMaximumInstanceCount
    instanceMemoryMB: functionInstanceMemoryMB
    alwaysReadyInstances: functionAlwaysReadyInstances
    virtualNetworkSubnetId: vnetEnabled ? network.outputs.appSubnetId : ''
    inboxRedeliveryHorizonSeconds: serviceBus.outputs.redeliveryHorizonSeconds
    deadLetterReplayHorizonSeconds: deadLetterReplayHorizonSeconds
    apiAuthClientId: apiAuthClientId
    apiAuthTenantId: apiAuthTenantId
  }
  dependsOn: [
    rbac
  ]
}

module rbac 'app/rbac.bicep' = {
  name: 'rbac'
  scope: rg
  params: {
    managedIdentityPrincipalId: identity.outputs.principalId
    principalId: grantDeveloperAccess ? principalId : ''
    principalType: principalType
    serviceBusNamespaceName: serviceBus.outputs.name
    queueName: serviceBus.outputs.queueName
    topicName: serviceBus.outputs.topicName
    inventorySubscriptionName: serviceBus.outputs.inventorySubscriptionName
    paymentsSubscriptionName: serviceBus.outputs.paymentsSubscriptionName
    cosmosAccountName: cosmos.outputs.accountName
    cosmosDatabaseName: cosmos.outputs.databaseName
    cosmosLeasesContainerName: cosmos.outputs.leasesContainerName
    storageAccountName: storage.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    keyVaultName: keyVault.outputs.name
    paymentProviderApiKeySecretName: keyVault.outputs.paymentProviderApiKeySecretName
    grantQueueDataOwnerForScaling: grantQueueDataOwnerForScaling
  }
}

module alerts 'app/alerts.bicep' = {
  name: 'alerts'
  scope: rg
  params: {
    namePrefix: 'orders-${resourceToken}'
    location: location
    tags: tags
    serviceBusNamespaceName: serviceBus.outputs.name
    queueName: serviceBus.outputs.queueName
    topicName: serviceBus.outputs.topicName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    logAnalyticsWorkspaceId: monitoring.outputs.logAnalyticsId
    alertEmail: alertEmail
    abandonRateThresholdPercent: abandonRateThresholdPercent
    processingP95ThresholdMs: processingP95ThresholdMs
  }
}

module diagnostics 'app/diagnostics.bicep' = {
  name: 'diagnostics'
  scope: rg
  params: {
    logAnalyticsWorkspaceId: monitoring.outputs.logAnalyticsId
    serviceBusNamespaceName: serviceBus.outputs.name
    cosmosAccountName: cosmos.outputs.accountName
    storageAccountName: storage.outputs.name
    keyVaultName: keyVault.outputs.name
    cosmosDataPlaneLogs: cosmosDataPlaneLogs
  }
}

module workbook 'app/workbook.bicep' = {
  name: 'workbook'
  scope: rg
  params: {
    location: location
    tags: tags
    applicationInsightsName: monitoring.outputs.applicationInsightsName
  }
}

// azd writes these into .azure/<env>/.env (used to run the consumer locally against the cloud).
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output SERVICE_CONSUMER_NAME string = functionApp.outputs.name
output AZURE_USER_ASSIGNED_IDENTITY_CLIENT_ID string = identity.outputs.clientId
output SERVICEBUS_FULLY_QUALIFIED_NAMESPACE string = serviceBus.outputs.fullyQualifiedNamespace
output ORDERS_QUEUE_NAME string = serviceBus.outputs.queueName
output ORDER_EVENTS_TOPIC_NAME string = serviceBus.outputs.topicName
output COSMOS_ENDPOINT string = cosmos.outputs.endpoint
output COSMOS_DATABASE string = cosmos.outputs.databaseName
output COSMOS_CONTAINER string = cosmos.outputs.containerName
output INVENTORY_SUBSCRIPTION_NAME string = serviceBus.outputs.inventorySubscriptionName
output INVENTORY_CONTAINER string = cosmos.outputs.inventoryContainerName
output PAYMENTS_SUBSCRIPTION_NAME string = serviceBus.outputs.paymentsSubscriptionName
output PAYMENTS_CONTAINER string = cosmos.outputs.paymentsContainerName
output REQUESTS_CONTAINER string = cosmos.outputs.requestsContainerName
// How the orders API authenticates its callers: entra-id-and-function-keys, or
// function-keys-only (API_AUTH_CLIENT_ID not set: docs/infrastructure.md warns of it).
output API_AUTHENTICATION string = functionApp.outputs.apiAuthentication
// The vault's name, for an operator rotating the provider's key (never the key itself).
output AZURE_KEY_VAULT_NAME string = keyVault.outputs.name
// Written once: azd writes every output into .azure/<env>/.env (azure-dev,
// cli/azd/pkg/infra/provisioning/provisioning.go UpdateEnvironment: DotenvSet for each output), so
// this empty value replaces the key the first deployment was given. The next `azd up` then passes
// an empty paymentProviderApiKey and leaves the secret as it is in the vault: a key rotated there
// is never rolled back, and the plain key does not stay in the azd environment.
output PAYMENT_PROVIDER_API_KEY string = ''
output APPLICATIONINSIGHTS_CONNECTION_STRING string = monitoring.outputs.connectionString
output APPLICATIONINSIGHTS_NAME string = monitoring.outputs.applicationInsightsName
output LOG_ANALYTICS_WORKSPACE_ID string = monitoring.outputs.logAnalyticsId
output ALERTS_NOTIFY string = alerts.outputs.alertsNotify
output ORDERS_WORKBOOK_ID string = workbook.outputs.id
// The deployed duplicate-detection window (tier default or override): what python -m ops compares
// resubmits against.
output SERVICEBUS_DUPLICATE_DETECTION_WINDOW string = serviceBus.outputs.duplicateDetectionHistoryTimeWindow
output SERVICEBUS_ENTITY_MAX_SIZE_MB int = serviceBus.outputs.entityMaxSizeInMegabytes
