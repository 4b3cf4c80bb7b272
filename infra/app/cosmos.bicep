// Cosmos DB for NoSQL: account, `orders` database, the `orders` container (orders + outbox documents,
// partitioned by /orderId), the `leases` container of the change-feed outbox relay, and the
// containers of the two downstream consumers: `inventory` (stock items, order-SKU records and
// the stock reservation's inbox markers, partitioned by /sku) and `payments` (the payment
// capture's records and inbox markers, partitioned by /orderId), and the public orders API's
// `requests` container (each order's head and its Idempotency-Key records, partitioned by
// /orderId: shared/edge/requests.py).
// Keys are disabled (disableLocalAuth): the app uses Entra ID + a data-plane role assignment (rbac.bicep).
param accountName string
param location string
param tags object = {}
param databaseName string = 'orders'
param containerName string = 'orders'
param leasesContainerName string = 'leases'
param inventoryContainerName string = 'inventory'
param paymentsContainerName string = 'payments'
param requestsContainerName string = 'requests'

@description('Serverless (pay per request, default). Set to false for provisioned autoscale throughput, per container.')
param serverless bool = true

@description('Maximum autoscale RU/s of the orders container, and of each of the inventory, payments and requests containers, when serverless = false (it scales between 10% and 100% of it; a multiple of 1000).')
@minValue(1000)
@maxValue(1000000)
param autoscaleMaxThroughput int = 1000

@description('Maximum autoscale RU/s of the leases container when serverless = false (the relay trigger\'s checkpoints: a few requests per second).')
@minValue(1000)
param leasesAutoscaleMaxThroughput int = 1000

@description('Turn public network access off (vnetEnabled: the app reaches the account through its private endpoint).')
param disablePublicNetworkAccess bool = false

// Throughput is per container (dedicated), not shared by the database: the orders container
// gets all of its own RU/s, and the leases container (the change-feed relay's checkpoints) can
// neither starve it nor be starved by it (Learn: provisioned throughput, container-level vs
// database-level). Serverless accounts take no throughput settings at all.
var ordersOptions = serverless ? {} : {
  autoscaleSettings: {
    maxThroughput: autoscaleMaxThroughput
  }
}
var leasesOptions = serverless ? {} : {
  autoscaleSettings: {
    maxThroughput: leasesAutoscaleMaxThroughput
  }
}

resource account 'Microsoft.DocumentDB/databaseAccounts@2024-11-15' = {
  //checkov:skip=CKV_AZURE_99: IP rules do not fit Flex Consumption (no fixed egress IP); with vnetEnabled public access is off and the app uses the private endpoint; without it access is Entra-only
  //checkov:skip=CKV_AZURE_101: public access is off when vnetEnabled (private endpoint in network.bicep); the default deployment is public with keys disabled (Entra-only)
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
    publicNetworkAccess: disablePublicNetworkAccess ? 'Disabled' : 'Enabled'
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
  }
}

// Orders and outbox documents. Only the paths that queries filter or order on are indexed: writes
// are the hot path (one create or transactional batch per message) and every indexed path costs
// RU on write. The outbox watchdog's query (shared/adapters/cosmos_outbox.py) filters on type,
// status (equalities: every event type and no marker) and createdAt (a range), and orders by the three: the
// composite index serves the filter and the order, so it loads only the documents it returns
// ("Queries with a filter and ORDER BY", learn.microsoft.com/azure/cosmos-db/index-policy);
// /createdAt/? is the range index of the same filter. The policy is infra/orders-indexing.json,
// which the emulator's and the local server's containers get too (ops/init_cosmos.py).
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
      indexingPolicy: loadJsonContent('../orders-indexing.json')
    }
    options: ordersOptions
  }
}

// The stock reservation's container (names.md: consumer `stock-reservation`): one stock item per
// SKU and the order-SKU reservations in the SKU's partition, so that a reservation and its stock
// item are one transactional batch (a batch is one logical partition: learn.microsoft.com/azure/
// cosmos-db/nosql/transactional-batch); each order's index and its inbox markers in the order's own
// partition. defaultTtl -1 as the orders container: nothing expires but what carries its own ttl,
// the markers and the reservations that hold nothing (Learn: time to live, "container's TTL set to
// -1"; docs/capacity.md, Storage per logical partition). Throughput as the orders container: each
// order event is one message for each consumer, so each container gets the orders container's RU/s
// of its own (ordersOptions), and neither consumer can starve the other or the orders.
resource inventoryContainer 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = {
  parent: database
  name: inventoryContainerName
  properties: {
    resource: {
      id: inventoryContainerName
      partitionKey: {
        paths: [
          '/sku'
        ]
        kind: 'Hash'
        version: 2
      }
      defaultTtl: -1
    }
    options: ordersOptions
  }
}

// The payment capture's container (consumer `payment-capture`): its in-progress and completed
// records and its inbox markers, partitioned by order as the orders container. Same ttl and
// throughput as the inventory container above.
resource paymentsContainer 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = {
  parent: database
  name: paymentsContainerName
  properties: {
    resource: {
      id: paymentsContainerName
      partitionKey: {
        paths: [
          '/orderId'
        ]
        kind: 'Hash'
        version: 2
      }
      defaultTtl: -1
    }
    options: ordersOptions
  }
}

// The public orders API's container (shared/edge/requests.py owns its documents): in each order's
// partition the order's head (no ttl: it lives as long as the order may change) and one record per
// (client, Idempotency-Key), which carries its own ttl (-1 until its message is sent, then the
// key's published expiry). defaultTtl -1 so that those per-item ttls count and nothing else
// expires (Learn: time to live, "container's TTL set to -1"). Throughput as the other containers
// (ordersOptions): every accepted request is one write here and one message on the orders queue,
// so the container gets the orders container's RU/s of its own.
// Indexing: the request completer's three fields only. The edge only point-reads (id + partition
// key) and writes (create, batch, patch): a point read needs no secondary index (Learn:
// index-policy, indexing mode None, "a pure key-value store without the need for secondary
// indexes"), and every indexed path costs RU on each write. So every path is excluded ("/*")
// but type, sent and startedAt, with their composite index: the completer's one query for
// unsent records, oldest first (shared/adapters/cosmos_requests.py), as the orders container
// does for its watchdog. Adding them to an existing container starts an index transformation,
// during which the completer's ordered query is refused (docs/operations.md, "Orders API:
// request completer silent").
// The policy is infra/requests-indexing.json, so that the local containers can get it too.
resource requestsContainer 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-11-15' = {
  parent: database
  name: requestsContainerName
  properties: {
    resource: {
      id: requestsContainerName
      partitionKey: {
        paths: [
          '/orderId'
        ]
        kind: 'Hash'
        version: 2
      }
      defaultTtl: -1
      indexingPolicy: loadJsonContent('../requests-indexing.json')
    }
    options: ordersOptions
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
    options: leasesOptions
  }
}

output accountId string = account.id
output accountName string = account.name
output endpoint string = account.properties.documentEndpoint
output databaseName string = database.name
output containerName string = ordersContainer.name
output leasesContainerName string = leasesContainer.name
output inventoryContainerName string = inventoryContainer.name
output paymentsContainerName string = paymentsContainer.name
output requestsContainerName string = requestsContainer.name
