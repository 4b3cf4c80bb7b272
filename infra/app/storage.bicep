// Storage account for the Functions host (AzureWebJobsStorage) and the Flex Consumption deployment
// package container. Shared keys are disabled: the app reaches it only through its managed identity.
param name string
param location string
param tags object = {}
param deploymentContainerName string

@description('Turn public network access off (vnetEnabled: the app reaches blobs through its private endpoint), as the official Flex azd quickstarts do with vnetEnabled.')
param disablePublicNetworkAccess bool = false

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  //checkov:skip=CKV_AZURE_35: default network action is Deny when vnetEnabled; the default deployment is public with shared keys disabled (Entra-only)
  //checkov:skip=CKV_AZURE_59: public access is off when vnetEnabled (private endpoint in network.bicep); the default deployment is public, Entra-only
  //checkov:skip=CKV_AZURE_206: host/deployment storage is re-creatable by `azd deploy`; LRS is sufficient
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    allowCrossTenantReplication: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: disablePublicNetworkAccess ? 'Disabled' : 'Enabled'
    networkAcls: disablePublicNetworkAccess ? {
      defaultAction: 'Deny'
      bypass: 'None'
    } : {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: 7
    }
  }
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

output id string = storage.id
output name string = storage.name
output blobEndpoint string = storage.properties.primaryEndpoints.blob
output deploymentContainerName string = deploymentContainer.name
