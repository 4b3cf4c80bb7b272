// The optional private network (main.bicep vnetEnabled, off by default), as the official Flex
// Consumption azd quickstarts offer it (Azure-Samples/functions-quickstart-python-http-azd,
// infra/app/vnet.bicep): a VNet with a subnet delegated to Microsoft.App/environments (Flex
// Consumption VNet integration) and a subnet for private endpoints; a private endpoint, a private
// DNS zone and its VNet link for Cosmos DB (group Sql), Storage (group blob: host storage and the
// deployment package), Key Vault (group vault: the payment provider's key, read through a Key
// Vault reference, which Flex Consumption resolves from a network-restricted vault: function.bicep)
// and, on the Premium tier only, Service Bus (group namespace: private endpoints do not exist on
// Standard). Zone names: Learn, Azure Private Endpoint private DNS zone
// values. The resources themselves turn public network access off (main.bicep passes
// vnetEnabled to each module).
param name string
param location string
param tags object = {}

@description('Address space of the VNet.')
param addressPrefix string = '10.0.0.0/16'

@description('Subnet of the private endpoints.')
param privateEndpointSubnetPrefix string = '10.0.1.0/24'

@description('Subnet the Function App integrates with. A /22 leaves an address for each of up to 1000 instances (one address per instance is this template\'s assumption).')
param appSubnetPrefix string = '10.0.4.0/22'

param cosmosAccountId string
param storageAccountId string
param serviceBusNamespaceId string
param keyVaultId string

@description('Give Service Bus a private endpoint (Premium namespaces only).')
param serviceBusPrivateEndpoint bool = false

var privateEndpointSubnetName = 'private-endpoints'
var appSubnetName = 'app'
var cosmosZoneName = 'privatelink.documents.azure.com'
var blobZoneName = 'privatelink.blob.${environment().suffixes.storage}'
var serviceBusZoneName = 'privatelink.servicebus.windows.net'
var keyVaultZoneName = 'privatelink.vaultcore.azure.net'

resource vnet 'Microsoft.Network/virtualNetworks@2024-05-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        addressPrefix
      ]
    }
    subnets: [
      {
        name: privateEndpointSubnetName
        properties: {
          addressPrefix: privateEndpointSubnetPrefix
          privateEndpointNetworkPolicies: 'Disabled'
        }
      }
      {
        name: appSubnetName
        properties: {
          addressPrefix: appSubnetPrefix
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                // The delegation Flex Consumption VNet integration requires (the quickstart above).
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
        }
      }
    ]
  }
}

var privateEndpointSubnetId = resourceId('Microsoft.Network/virtualNetworks/subnets', vnet.name, privateEndpointSubnetName)

resource cosmosZone 'Microsoft.Network/privateDnsZones@2024-06-01' = {
  name: cosmosZoneName
  location: 'global'
  tags: tags
}

resource blobZone 'Microsoft.Network/privateDnsZones@2024-06-01' = {
  name: blobZoneName
  location: 'global'
  tags: tags
}

resource serviceBusZone 'Microsoft.Network/privateDnsZones@2024-06-01' = if (serviceBusPrivateEndpoint) {
  name: serviceBusZoneName
  location: 'global'
  tags: tags
}

resource keyVaultZone 'Microsoft.Network/privateDnsZones@2024-06-01' = {
  name: keyVaultZoneName
  location: 'global'
  tags: tags
}

resource cosmosZoneLink 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = {
  parent: cosmosZone
  name: 'link-${name}'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}

resource blobZoneLink 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = {
  parent: blobZone
  name: 'link-${name}'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}

resource serviceBusZoneLink 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = if (serviceBusPrivateEndpoint) {
  parent: serviceBusZone
  name: 'link-${name}'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}

resource keyVaultZoneLink 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = {
  parent: keyVaultZone
  name: 'link-${name}'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}

resource cosmosEndpoint 'Microsoft.Network/privateEndpoints@2024-05-01' = {
  name: 'pe-cosmos-${name}'
  location: location
  tags: tags
  properties: {
    subnet: {
      id: privateEndpointSubnetId
    }
    privateLinkServiceConnections: [
      {
        name: 'cosmos'
        properties: {
          privateLinkServiceId: cosmosAccountId
          groupIds: [
            'Sql'
          ]
        }
      }
    ]
  }
}

resource blobEndpoint 'Microsoft.Network/privateEndpoints@2024-05-01' = {
  name: 'pe-blob-${name}'
  location: location
  tags: tags
  properties: {
    subnet: {
      id: privateEndpointSubnetId
    }
    privateLinkServiceConnections: [
      {
        name: 'blob'
        properties: {
          privateLinkServiceId: storageAccountId
          groupIds: [
            'blob'
          ]
        }
      }
    ]
  }
}

resource serviceBusEndpoint 'Microsoft.Network/privateEndpoints@2024-05-01' = if (serviceBusPrivateEndpoint) {
  name: 'pe-servicebus-${name}'
  location: location
  tags: tags
  properties: {
    subnet: {
      id: privateEndpointSubnetId
    }
    privateLinkServiceConnections: [
      {
        name: 'servicebus'
        properties: {
          privateLinkServiceId: serviceBusNamespaceId
          groupIds: [
            'namespace'
          ]
        }
      }
    ]
  }
}

resource keyVaultEndpoint 'Microsoft.Network/privateEndpoints@2024-05-01' = {
  name: 'pe-keyvault-${name}'
  location: location
  tags: tags
  properties: {
    subnet: {
      id: privateEndpointSubnetId
    }
    privateLinkServiceConnections: [
      {
        name: 'keyvault'
        properties: {
          privateLinkServiceId: keyVaultId
          groupIds: [
            'vault'
          ]
        }
      }
    ]
  }
}

// Each endpoint registers its address in its zone, so the public host names resolve to the
// private addresses inside the VNet.
resource cosmosDnsGroup 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = {
  parent: cosmosEndpoint
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: 'cosmos'
        properties: {
          privateDnsZoneId: cosmosZone.id
        }
      }
    ]
  }
}

resource blobDnsGroup 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = {
  parent: blobEndpoint
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: 'blob'
        properties: {
          privateDnsZoneId: blobZone.id
        }
      }
    ]
  }
}

resource serviceBusDnsGroup 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = if (serviceBusPrivateEndpoint) {
  parent: serviceBusEndpoint
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: 'servicebus'
        properties: {
          privateDnsZoneId: serviceBusZone.id
        }
      }
    ]
  }
}

resource keyVaultDnsGroup 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = {
  parent: keyVaultEndpoint
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: 'keyvault'
        properties: {
          privateDnsZoneId: keyVaultZone.id
        }
      }
    ]
  }
}

output id string = vnet.id
output appSubnetId string = resourceId('Microsoft.Network/virtualNetworks/subnets', vnet.name, appSubnetName)
output privateEndpointSubnetId string = privateEndpointSubnetId
