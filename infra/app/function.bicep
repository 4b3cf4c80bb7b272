// Flex Consumption (FC1) plan + Python 3.13 Function App running as the user-assigned identity.
// All connections are identity-based: no key, SAS or connection string with a secret is stored.
// The one credential, the payment provider's API key, is a Key Vault reference (below).
param planName string
param functionAppName string
param location string
param tags object = {}

@description('azd service name (azure.yaml); azd finds the app to deploy by this tag.')
param serviceName string = 'consumer'

param identityId string
param identityClientId string

param storageAccountName string
param storageBlobEndpoint string
param deploymentContainerName string

param serviceBusFullyQualifiedNamespace string
param queueName string
param topicName string
param inventorySubscriptionName string
param paymentsSubscriptionName string

param cosmosEndpoint string
param cosmosDatabaseName string
param cosmosContainerName string
param inventoryContainerName string
param paymentsContainerName string
param requestsContainerName string

param applicationInsightsConnectionString string

@description('Base URL of the payment provider\'s HTTP API (PAYMENT_PROVIDER_BASE_URL): https only, the origin without the API version (the app adds /v1/...), e.g. https://api.provider.example. The deployment fails on any other scheme (paymentProviderBaseUrlMustBeHttps below).')
@minLength(9)
param paymentProviderBaseUrl string

@description('Whether the payment provider honours the Idempotency-Key header (PAYMENT_PROVIDER_IDEMPOTENCY_KEYS): honoured, or ignored (the consumer then looks an in-progress operation up by its reference before repeating it).')
@allowed([
  'honoured'
  'ignored'
])
param paymentProviderIdempotencyKeys string = 'honoured'

@description('URI of the Key Vault secret holding the provider\'s API key, without a version (keyvault.bicep). Not the key: the app setting is a Key Vault reference to it.')
param paymentProviderApiKeySecretUri string

@description('Extra app settings merged over the defaults (must not contain secrets).')
param extraAppSettings object = {}

@description('Memory of each Flex Consumption instance (MB); the instance gets CPU in proportion (Learn: Flex Consumption plan, instance memory).')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('The outbox watchdog republishes an OrderAccepted event still pending this many seconds after its order was accepted (OUTBOX_WATCHDOG_MIN_AGE_SECONDS; at least 60). It runs every 5 minutes.')
@minValue(60)
param outboxWatchdogMinAgeSeconds int = 300

@description('How long after its first delivery the orders queue may still deliver a message, in seconds: lockDuration x maxDeliveryCount + defaultMessageTimeToLive of infra/messaging.json (servicebus.bicep\'s redeliveryHorizonSeconds output). INBOX_REDELIVERY_HORIZON_SECONDS.')
@minValue(1)
param inboxRedeliveryHorizonSeconds int

@description('How long after dead-lettering a message may still be resubmitted and recognised by its inbox marker, in seconds (main.bicep\'s deadLetterReplayHorizon). DEAD_LETTER_REPLAY_HORIZON_SECONDS.')
@minValue(0)
param deadLetterReplayHorizonSeconds int

@description('Scale-out cap of the app (Flex Consumption allows up to 1000).')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Always-ready instances of the consume_order function (0 = none: scale from zero). Billed while idle; removes the cold start of the first instances.')
@minValue(0)
@maxValue(1000)
param alwaysReadyInstances int = 0

@description('Resource id of the subnet (delegated to Microsoft.App/environments) the app integrates with; empty = no VNet integration.')
param virtualNetworkSubnetId string = ''

@description('Application (client) id of the Entra ID app registration that represents the orders API (docs/infrastructure.md, The orders API). Empty = App Service authentication stays off and the function keys alone protect the API.')
param apiAuthClientId string = ''

@description('Entra ID tenant that issues the API\'s tokens; empty = the tenant of the deployment.')
param apiAuthTenantId string = ''

// Flex Consumption names always-ready groups "function:<function name>" (Learn: Flex Consumption
// plan, always ready instances); the SDK model is FunctionsAlwaysReadyConfig (name, instanceCount).
var alwaysReady = (alwaysReadyInstances > 0) ? [
  {
    name: 'function:consume_order'
    instanceCount: alwaysReadyInstances
  }
] : []

// Bicep has no pattern decorator: the scheme is checked here. ARM evaluates only the branch an
// if() takes (learn.microsoft.com/azure/azure-resource-manager/templates/template-functions-logical,
// "if": "only the false value is evaluated"), so an https URL passes unchanged and any other
// fails the deployment on json() of a text that is not JSON, in the variable named after the
// rule. The text interpolates the parameter, so nothing can evaluate it before deployment.
var paymentProviderBaseUrlMustBeHttps = startsWith(toLower(paymentProviderBaseUrl), 'https://') ? paymentProviderBaseUrl : json('PAYMENT_PROVIDER_BASE_URL must be an https URL, not ${paymentProviderBaseUrl}')

// Key Vault reference syntax: @Microsoft.KeyVault(SecretUri=<secret URI>), the URI without a
// version so that a new version of the secret is picked up (Learn: "Use Key Vault references as
// app settings in Azure App Service and Azure Functions"; rotation: within 24 hours, or at once
// on a configuration change or restart). Flex Consumption resolves Key Vault references, also
// from network-restricted vaults since October 2025 (Azure update 512379: "network restricted
// Key Vault and App Configuration references for Flex Consumption", generally available).
var paymentProviderApiKeyReference = '@Microsoft.KeyVault(SecretUri=${paymentProviderApiKeySecretUri})'

// The inbox markers' window (per-item ttl, counted by Cosmos DB from the marker's last write):
// everything the queue can still redeliver plus the dead-letter replay horizon. The app refuses a
// shorter INBOX_MARKER_TTL_SECONDS at start-up (shared/config.py); docs/configuration.md, "Inbox markers: retention".
var inboxMarkerTtlSeconds = inboxRedeliveryHorizonSeconds + deadLetterReplayHorizonSeconds

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  //checkov:skip=CKV_AZURE_225: Flex Consumption zone redundancy is region-dependent; opt in with properties.zoneRedundant where offered
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

// siteConfig holds only what Flex Consumption accepts. Flex rejects ftpsState (ARM error 51021:
// the site configuration property Site.SiteConfig.FtpsState for Flex Consumption sites is
// invalid); FTP is off through ftpPolicy below. The official Flex azd samples set neither
// http20Enabled nor scmMinTlsVersion (Azure-Samples/functions-quickstart-dotnet-azd,
// infra/app/api.bicep, sets siteConfig to alwaysOn false only), so neither is set here.
resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  //checkov:skip=CKV_AZURE_17: the orders API's callers authenticate with function keys (no anonymous write: tests/infra/test_orders_api_bicep.py) and, when configured, Entra ID tokens (apiAuthentication below), not client certificates
  //checkov:skip=CKV_AZURE_212: Flex Consumption scales out per queue length (and to zero); always-ready instances are the alwaysReadyInstances parameter, not a plan minimum
  //checkov:skip=CKV_AZURE_213: no health endpoint: the only HTTP routes are the orders API's, behind keys; health is observed through the alerts in alerts.bicep
  //checkov:skip=CKV_AZURE_222: `azd deploy` reaches the app's deployment endpoint over the public network, also with vnetEnabled (outbound traffic then goes through the VNet)
  //checkov:skip=CKV_AZURE_67: http20Enabled is not set: the official Flex Consumption azd samples set no HTTP version (see above)
  //checkov:skip=CKV_AZURE_18: same check as CKV_AZURE_67 for web apps: no http20Enabled on Flex Consumption (see above)
  //checkov:skip=CKV_AZURE_78: Flex Consumption rejects siteConfig.ftpsState (ARM 51021); FTP basic-auth publishing is off through the ftp basicPublishingCredentialsPolicies resource
  name: functionAppName
  location: location
  tags: union(tags, {
    'azd-service-name': serviceName
  })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    // The identity that resolves Key Vault references: the user-assigned one, the only identity
    // of the site (without it the platform uses the system-assigned identity, which does not
    // exist here: Learn, "Use Key Vault references as app settings", user-assigned identity).
    keyVaultReferenceIdentity: identityId
    clientCertEnabled: false
    virtualNetworkSubnetId: (!empty(virtualNetworkSubnetId)) ? virtualNetworkSubnetId : null
    // Only what Flex Consumption accepts (see the comment above the resource).
    siteConfig: {
      minTlsVersion: '1.2'
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storageBlobEndpoint}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
        alwaysReady: alwaysReady
      }
      runtime: {
        name: 'python'
        version: '3.13'
      }
    }
  }
}

// Setting names are the ones read by the Functions host (ServiceBusConnection__*, AzureWebJobsStorage__*,
// CosmosDBConnection__*) and by the application code (ORDERS_*, COSMOS_*, OUTBOX_*, INBOX_*,
// DEAD_LETTER_REPLAY_HORIZON_SECONDS: shared/config.py; INVENTORY_*, PAYMENTS_*, PAYMENT_PROVIDER_*:
// the downstream consumers, names.md). The app's own clients authenticate as
// the host's connections to the same resources do, from the same __credential/__clientId
// settings: ManagedIdentityCredential with the user-assigned client id
// (shared/adapters/identity.py), so no AZURE_CLIENT_ID (the default chain's setting) is set.
resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  //checkov:skip=CKV_AZURE_13: false positive, this config resource holds app settings only; authentication is the authsettingsV2 resource (apiAuthentication)
  //checkov:skip=CKV_AZURE_63: false positive, app settings resource; HTTP logging is a web config setting, not an app setting
  //checkov:skip=CKV_AZURE_65: false positive, app settings resource; detailed error pages are a web config setting, not an app setting
  //checkov:skip=CKV_AZURE_66: false positive, app settings resource; failed request tracing is a web config setting, not an app setting
  //checkov:skip=CKV_AZURE_80: false positive, Python app; .NET Framework version does not apply
  //checkov:skip=CKV_AZURE_88: Flex Consumption has no Azure Files content share; the package lives in blob storage
  //checkov:skip=CKV_AZURE_222: false positive, app settings resource; public network access is set on the site (see above)
  parent: functionApp
  name: 'appsettings'
  properties: union({
    ORDERS_QUEUE_NAME: queueName
    ORDER_EVENTS_TOPIC_NAME: topicName
    // The downstream consumers: reserve_stock (stock-reservation) and capture_payment
    // (payment-capture), each on its subscription of the topic, each with its container.
    INVENTORY_SUBSCRIPTION_NAME: inventorySubscriptionName
    INVENTORY_CONTAINER: inventoryContainerName
    PAYMENTS_SUBSCRIPTION_NAME: paymentsSubscriptionName
    PAYMENTS_CONTAINER: paymentsContainerName
    // The public orders API (issue 33): its heads and Idempotency-Key records (cosmos.bicep).
    REQUESTS_CONTAINER: requestsContainerName
    PAYMENT_PROVIDER_BASE_URL: paymentProviderBaseUrlMustBeHttps
    // A Key Vault reference, never the key (tests/infra: the only form this setting may take).
    PAYMENT_PROVIDER_API_KEY: paymentProviderApiKeyReference
    PAYMENT_PROVIDER_IDEMPOTENCY_KEYS: paymentProviderIdempotencyKeys
    ServiceBusConnection__fullyQualifiedNamespace: serviceBusFullyQualifiedNamespace
    ServiceBusConnection__credential: 'managedidentity'
    ServiceBusConnection__clientId: identityClientId
    AzureWebJobsStorage__accountName: storageAccountName
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    COSMOS_ENDPOINT: cosmosEndpoint
    // The outbox relay's Cosmos DB trigger (connection "CosmosDBConnection"): identity-based.
    CosmosDBConnection__accountEndpoint: cosmosEndpoint
    CosmosDBConnection__credential: 'managedidentity'
    CosmosDBConnection__clientId: identityClientId
    COSMOS_DATABASE: cosmosDatabaseName
    COSMOS_CONTAINER: cosmosContainerName
    // The outbox watchdog (a timer trigger: its schedule monitor and lock live in
    // AzureWebJobsStorage above).
    OUTBOX_WATCHDOG_MIN_AGE_SECONDS: string(outboxWatchdogMinAgeSeconds)
    COSMOS_VERIFY_TLS: 'true'
    OUTBOX_ENABLED: 'true'
    // The inbox markers' retention: the window and the two terms the app checks it against; one
    // window for the three consumers (the subscriptions redeliver as the queue: servicebus.bicep).
    INBOX_MARKER_TTL_SECONDS: string(inboxMarkerTtlSeconds)
    INBOX_REDELIVERY_HORIZON_SECONDS: string(inboxRedeliveryHorizonSeconds)
    DEAD_LETTER_REPLAY_HORIZON_SECONDS: string(deadLetterReplayHorizonSeconds)
    APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsightsConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
    // The app configures the OpenTelemetry distro itself; this tells the host to stop
    // re-exporting worker logs and to pass its trace context (docs/telemetry.md). Never set
    // PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY: the worker would configure a second pipeline.
    PYTHON_ENABLE_OPENTELEMETRY: 'true'
    // pydantic looks for plugins (the `pydantic` entry points of every installed distribution)
    // when the first schema is built, at the app's import; the app uses none. The variable is
    // pydantic's own switch (pydantic/plugin/_loader.py, docs.pydantic.dev "Pydantic Plugins"):
    // a cold start does not scan the distributions (docs/benchmarks.md, target 4).
    PYDANTIC_DISABLE_PLUGINS: '__all__'
  }, extraAppSettings)
}

// ---- The orders API's authentication (issue 33) ----------------------------------------------
// Two layers. The function keys: the API's functions are auth level FUNCTION and none takes a
// write anonymously (tests/infra/test_orders_api_bicep.py), so the host refuses a write without a
// key with 401, whatever this resource says. And, when apiAuthClientId is given, App Service
// authentication (Easy Auth, authsettingsV2) in front of the host: a request without a valid Entra
// ID token for the API's app registration is answered 401 before it reaches a function
// (requireAuthentication + Return401: an API, so no redirect to a sign-in page). A caller then
// sends both: the token (who it is) and a function key. Entra ID is the production default of the
// docs; an app registration cannot be created by Bicep, hence the parameter, and without it the
// resource is not deployed (docs/infrastructure.md says how to create one and warns of the
// keys-only mode).
// Flex Consumption: its preview documentation said "EasyAuth isn't currently supported.
// Unauthenticated callers currently aren't blocked when EasyAuth is enabled" (MicrosoftDocs/
// azure-docs, articles/azure-functions/flex-consumption-plan.md, Considerations, commit
// ab021c0); the current page no longer lists it among the plan's considerations (same file,
// commit 1dd74df, 2026), and says nothing positive either. Not verified on a live app here (no
// Azure account): docs/infrastructure.md gives the check to run after each deployment (a request
// without a token must get 401). Should it not, the function keys still stand.
// No excluded path: nothing of the app is meant to be reachable anonymously. The OpenAPI
// document, if the app serves one, is served to callers as the API is (a caller has credentials
// before it needs the contract); the host's admin endpoints take the master key anyway.
// Bearer tokens only: no sign-in flow, so no client secret, no token store.
var apiAuthEnabled = !empty(apiAuthClientId)
var apiAuthTenant = empty(apiAuthTenantId) ? tenant().tenantId : apiAuthTenantId

// checkov runs its checks of the `web` config (siteConfig) on every Microsoft.Web/sites/config
// resource, whatever its name (bridgecrewio/checkov#6555): on this one they read properties the
// authsettingsV2 schema does not have, as on appSettings above, whose skips these are.
resource apiAuthentication 'Microsoft.Web/sites/config@2024-04-01' = if (apiAuthEnabled) {
  //checkov:skip=CKV_AZURE_13: false positive, reads V1 authsettings' properties.enabled; this is authsettingsV2, enabled by platform.enabled and requireAuthentication (tests/infra)
  //checkov:skip=CKV_AZURE_63: false positive, authentication settings resource; HTTP logging is a web config setting, not an authentication setting
  //checkov:skip=CKV_AZURE_65: false positive, authentication settings resource; detailed error pages are a web config setting, not an authentication setting
  //checkov:skip=CKV_AZURE_66: false positive, authentication settings resource; failed request tracing is a web config setting, not an authentication setting
  //checkov:skip=CKV_AZURE_80: false positive, Python app; .NET Framework version does not apply (and is no authentication setting)
  //checkov:skip=CKV_AZURE_88: Flex Consumption has no Azure Files content share; the package lives in blob storage (not an authentication setting)
  //checkov:skip=CKV_AZURE_222: false positive, authentication settings resource; public network access is set on the site (see above)
  parent: functionApp
  name: 'authsettingsV2'
  properties: {
    platform: {
      enabled: true
    }
    globalValidation: {
      requireAuthentication: true
      unauthenticatedClientAction: 'Return401'
      excludedPaths: []
    }
    httpSettings: {
      requireHttps: true
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          clientId: apiAuthClientId
          // v2.0 issuer of the tenant (Learn: "Configure your App Service or Azure Functions
          // app to use Microsoft Entra sign-in", Issuer URL).
          openIdIssuer: '${environment().authentication.loginEndpoint}${apiAuthTenant}/v2.0'
        }
        validation: {
          // The audience of the API's access tokens: its Application ID URI (v1 tokens) or its
          // client id (v2 tokens); docs/infrastructure.md sets the URI to api://<client id>.
          allowedAudiences: [
            'api://${apiAuthClientId}'
            apiAuthClientId
          ]
        }
      }
    }
    login: {
      tokenStore: {
        enabled: false
      }
    }
  }
}

// Basic-auth (publishing credential) access to FTP and SCM is off: azd deploys with Entra ID.
resource ftpPolicy 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: functionApp
  name: 'ftp'
  properties: {
    allow: false
  }
}

resource scmPolicy 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: functionApp
  name: 'scm'
  properties: {
    allow: false
  }
}

output id string = functionApp.id
output name string = functionApp.name
output defaultHostName string = functionApp.properties.defaultHostName
output planId string = plan.id
output apiAuthentication string = apiAuthEnabled ? 'entra-id-and-function-keys' : 'function-keys-only'
