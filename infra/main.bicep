// Idempotent Consumer reference implementation: entry point for `azd up` / `azd provision`.
// Creates the resource group and wires the modules in ./app (one per concern).
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('azd environment name; used to derive a unique suffix for every resource name.')
param environmentName string

@minLength(1)
@description('Region for all resources. Must offer Flex Consumption (az functionapp list-flexconsumption-locations).')
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

@description('Cosmos DB serverless (default). false = provisioned autoscale throughput on the database.')
param cosmosServerless bool = true

@minValue(1000)
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

@minValue(1)
@maxValue(1000)
param functionMaximumInstanceCount int = 40

@description('Grant the app identity Azure Service Bus Data Owner on the orders queue, so that target-based scaling can read the queue length (Data Receiver cannot; without it the scale controller falls back and scales out slowly). Off by default: Data Owner includes Manage and Send on the queue. See docs/operations.md#scaling-permission.')
param grantQueueDataOwnerForScaling bool = false

@minLength(1)
@description('E-mail address notified when an alert fires, or "none" to deploy the alerts without any receiver (nobody is notified). No default: azd up asks (ALERT_EMAIL).')
param alertEmail string

@minValue(1)
@maxValue(100)
param abandonRateThresholdPercent int = 10

@minValue(100)
param processingP95ThresholdMs int = 2000

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
  workload: 'idempotent-consumer'
}
var functionAppName = 'func-orders-${resourceToken}'
var deploymentContainerName = 'app-package-${take(functionAppName, 32)}-${take(resourceToken, 7)}'

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
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
    serverless: cosmosServerless
    autoscaleMaxThroughput: cosmosAutoscaleMaxThroughput
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
    cosmosEndpoint: cosmos.outputs.endpoint
    cosmosDatabaseName: cosmos.outputs.databaseName
    cosmosContainerName: cosmos.outputs.containerName
    applicationInsightsConnectionString: monitoring.outputs.connectionString
    maximumInstanceCount: functionMaximumInstanceCount
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
    cosmosAccountName: cosmos.outputs.accountName
    cosmosDatabaseName: cosmos.outputs.databaseName
    storageAccountName: storage.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
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
    applicationInsightsName: monitoring.outputs.applicationInsightsName
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
output APPLICATIONINSIGHTS_CONNECTION_STRING string = monitoring.outputs.connectionString
output APPLICATIONINSIGHTS_NAME string = monitoring.outputs.applicationInsightsName
output LOG_ANALYTICS_WORKSPACE_ID string = monitoring.outputs.logAnalyticsId
output ALERTS_NOTIFY string = alerts.outputs.alertsNotify
output ORDERS_WORKBOOK_ID string = workbook.outputs.id
