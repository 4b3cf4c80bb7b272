// Service Bus namespace, the `orders` queue consumed by the Function App and the `order-events`
// topic the outbox relay publishes OrderAccepted events to.
// Queue/topic semantics come from infra/messaging.json, the same file the local broker stand-in reads.
param name string
param location string
param tags object = {}

@description('Optional override of messaging.json duplicateDetectionHistoryTimeWindow (empty = use the file). Service Bus allows 20 seconds to 7 days.')
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

var messaging = loadJsonContent('../messaging.json')
var duplicateDetectionHistoryTimeWindow = empty(duplicateDetectionHistoryTimeWindowOverride) ? messaging.duplicateDetectionHistoryTimeWindow : duplicateDetectionHistoryTimeWindowOverride

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: 'Standard'
    tier: 'Standard'
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
  }
}

resource queue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: messaging.queueName
  properties: {
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: duplicateDetectionHistoryTimeWindow
    lockDuration: messaging.lockDuration
    maxDeliveryCount: messaging.maxDeliveryCount
    defaultMessageTimeToLive: messaging.defaultMessageTimeToLive
    deadLetteringOnMessageExpiration: true
    requiresSession: false
    enablePartitioning: false
    enableBatchedOperations: true
    maxSizeInMegabytes: 1024
  }
}

resource topic 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' = {
  parent: namespace
  name: messaging.topicName
  properties: {
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: duplicateDetectionHistoryTimeWindow
    defaultMessageTimeToLive: messaging.defaultMessageTimeToLive
    enablePartitioning: false
    enableBatchedOperations: true
    supportOrdering: true
    maxSizeInMegabytes: 1024
  }
}

output id string = namespace.id
output name string = namespace.name
output fullyQualifiedNamespace string = '${namespace.name}.servicebus.windows.net'
output queueId string = queue.id
output queueName string = queue.name
output topicId string = topic.id
output topicName string = topic.name
