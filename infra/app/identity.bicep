// User-assigned managed identity of the consumer Function App.
// Every data-plane permission (Service Bus, Cosmos DB, Storage, App Insights) is granted to it in rbac.bicep.
param name string
param location string
param tags object = {}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: name
  location: location
  tags: tags
}

output id string = identity.id
output name string = identity.name
output principalId string = identity.properties.principalId
output clientId string = identity.properties.clientId
