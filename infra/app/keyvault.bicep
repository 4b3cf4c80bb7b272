// Key Vault holding the payment provider's credential, the one secret of the deployment: the
// app reads it only as a Key Vault reference app setting (function.bicep), resolved by the app's
// user-assigned identity, which rbac.bicep makes "Key Vault Secrets User" on this one secret.
// The value is written once: on the deployment given a non-empty @secure() parameter (azd:
// PAYMENT_PROVIDER_API_KEY, which main.bicep then clears from the azd environment); a deployment
// without it leaves the secret as it is, so a key rotated in the vault (a new version) is never
// rolled back. It is never an output, a plain app setting or a default.
param name string
param location string
param tags object = {}

@secure()
@description('The payment provider\'s API key, written as the secret payment-provider-api-key when non-empty (the first deployment); empty = the secret is not touched.')
param paymentProviderApiKey string = ''

@description('Turn public network access off (vnetEnabled: the app reaches the vault through its private endpoint, network.bicep).')
param disablePublicNetworkAccess bool = false

@description('Days a deleted vault or secret stays recoverable (7 to 90).')
@minValue(7)
@maxValue(90)
param softDeleteRetentionInDays int = 90

// Name shared with the app's documentation (names.md): the reference points at it.
var paymentProviderApiKeySecretName = 'payment-provider-api-key'

// RBAC authorization (no access policies: Learn, "Azure RBAC for Key Vault data plane
// operations"); soft delete and purge protection on (purge protection cannot be turned off
// again, and a purge-protected vault keeps its name for the retention period after deletion:
// `azd down --purge` cannot purge it). Public network as the other resources: Entra ID only by
// default, off with vnetEnabled, where ARM's own secret writes still pass as a trusted service
// ("all traffic except private endpoint traffic and that that originates from trusted services
// will be blocked", VaultProperties.publicNetworkAccess, Key Vault REST spec 2024-11-01).
// A variable, not an inline conditional: checkov 3.3.30's CKV_AZURE_189 calls .lower() on the
// property and crashes on a conditional expression (its skip below is then never reached).
var publicNetworkAccess = disablePublicNetworkAccess ? 'Disabled' : 'Enabled'

resource vault 'Microsoft.KeyVault/vaults@2024-11-01' = {
  //checkov:skip=CKV_AZURE_109: the default deployment is public with RBAC (Entra ID) only, like Cosmos DB and Storage; with vnetEnabled the network rules deny all but the private endpoint and trusted services
  //checkov:skip=CKV_AZURE_189: public access is off when vnetEnabled (private endpoint in network.bicep); the default deployment is public with RBAC (Entra ID) only
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: tenant().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: softDeleteRetentionInDays
    enablePurgeProtection: true
    enabledForDeployment: false
    enabledForDiskEncryption: false
    enabledForTemplateDeployment: false
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: disablePublicNetworkAccess ? 'Deny' : 'Allow'
    }
  }
}

// The provider's credential, written only when given (keyvault-secret.bicep): a deployment
// (incremental mode) leaves a secret its template does not declare as it is, while an ARM write
// of the secret's value adds a version that would put back the key the parameter held and undo a
// rotation. A module, not a conditional resource, so that checkov sees the secret's properties.
module paymentProviderApiKeySecret 'keyvault-secret.bicep' = if (!empty(paymentProviderApiKey)) {
  name: 'payment-provider-api-key-secret'
  params: {
    vaultName: vault.name
    secretName: paymentProviderApiKeySecretName
    value: paymentProviderApiKey
  }
}

output id string = vault.id
output name string = vault.name
// From the vault, not the conditional secret: a deployment that does not write the secret still
// names it.
output paymentProviderApiKeySecretName string = paymentProviderApiKeySecretName
// The secret's URI without a version (not its value): the Key Vault reference of the app setting.
// vaultUri ends with '/' ("https://<vault>.vault.azure.net/"); the same form as the secret's
// own secretUri.
output paymentProviderApiKeySecretUri string = '${vault.properties.vaultUri}secrets/${paymentProviderApiKeySecretName}'
