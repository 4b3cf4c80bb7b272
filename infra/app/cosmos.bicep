// Cosmos DB for NoSQL: account, `orders` database, the `orders` container (orders + outbox documents,
// partitioned by /orderId) and the `leases` container of the change-feed outbox relay.
// Keys are disabled (disableLocalAuth): the app uses Entra ID + a data-plane role assignment (rbac.bicep).
param accountName string
param location string
param tags object = {}
param databaseName string = 'orders'
param containerName string = 'orders'
param leasesContainerName string = 'leases'

@description('Serverless (pay per request, default). Set to false for provisioned autoscale throughput shared by the database.')
param serverless bool = true

@description('Maximum autoscale RU/s of the database when serverless = false.')
@minValue(1000)
param autoscaleMaxThroughput int = 1000

var databaseOptions = serverless ? {} : {
  autoscaleSettings: {
    maxThroughput: autoscaleMaxThroughput
  }
}

resource account 'Microsoft.DocumentDB/databaseAccounts@2024-11-15' = {
  //checkov:skip=CKV_AZURE_99: reference deployment without VNet integration (Flex Consumption egress is not a fixed IP); access is Entra-only
  //checkov:skip=CKV_AZURE_101: reference deployment without private endpoints; access is Entra-only (keys disabled)
  name: accountName
  location: location
  tags: tags
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    consistencyPolicy: {
      defaultConsistencyLevel: 'Session'
    }
    locations: [
      {
        locationName: location
        failoverPriority: 0
        isZoneRedundant: false
      }
    ]
    capabilities: serverless ? [
      {
        name: 'EnableServerless'
      }
    ] : []
    disableLocalAuth: true
    disableKeyBasedMetadataWriteAccess: true
    minimalTlsVersion: 'Tls12'
    publicNetworkAccess: 'Enabled'
    enableAutomaticFailover: false
    enableMultipleWriteLocations: false
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2024-11-15' = {
  parent: account
  name: databaseName
  properties: {
    resource: {
      id: databaseName
    }
    options: databaseOptions
  }
}

// Orders and outbox documents. Only the paths that queries filter on are indexed: writes are the hot
// path (one create or transactional batch per message) and every indexed path costs RU on write.
resource ordersContainer 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = {
  parent: database
  name: containerName
  properties: {
    resource: {
      id: containerName
      partitionKey: {
        paths: [
          '/orderId'
        ]
        kind: 'Hash'
        version: 2
      }
      defaultTtl: -1
      indexingPolicy: {
        indexingMode: 'consistent'
        automatic: true
        includedPaths: [
          {
            path: '/type/?'
          }
          {
            path: '/status/?'
          }
          {
            path: '/eventType/?'
          }
        ]
        excludedPaths: [
          {
            path: '/*'
          }
        ]
      }
    }
  }
}

// Lease documents of the change-feed processor that relays outbox entries to the topic.
resource leasesContainer 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = {
  parent: database
  name: leasesContainerName
  properties: {
    resource: {
      id: leasesContainerName
      partitionKey: {
        paths: [
          '/id'
        ]
        kind: 'Hash'
        version: 2
      }
    }
  }
}

output accountId string = account.id
output accountName string = account.name
output endpoint string = account.properties.documentEndpoint
output databaseName string = database.name
output containerName string = ordersContainer.name
output leasesContainerName string = leasesContainer.name
