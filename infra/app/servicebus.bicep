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

// A topic keeps messages only in its subscriptions: sent while it has none, an event is accepted
// and kept nowhere (learn.microsoft.com/azure/service-bus-messaging/service-bus-queues-topics-subscriptions).
// The default subscription `retained` keeps every OrderAccepted for this long, so that the events
// of a fresh deployment, or those sent before a downstream team subscribed, can still be read.
// P1D = the duplicate-detection window: an older event can be republished from the outbox instead
// (its copy is no longer dropped by duplicate detection; docs/events.md "Joining late"). At ~0.7 KB
// per event, a day of events fits a 1 GB topic up to ~17 events/s sustained: shorten it, or give
// the topic more space, above that (a full topic refuses the relay's sends: QuotaExceeded,
// retried, alerted, nothing lost). 'none' deploys no default subscription: only on purpose.
@description('How long the default subscription `retained` keeps each OrderAccepted event (ISO 8601), or "none" for no default subscription (events sent while no subscription exists are then lost). See docs/events.md.')
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

// Name shared with the local topic model (local/topic.py RETAINED_SUBSCRIPTION).
resource retainedSubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' = if (retainedEventsTimeToLive != 'none') {
  parent: topic
  name: 'retained'
  properties: {
    defaultMessageTimeToLive: retainedEventsTimeToLive
    // Expired events just go: they are in the outbox for a week after their dispatch.
    deadLetteringOnMessageExpiration: false
    deadLetteringOnFilterEvaluationExceptions: false
    lockDuration: messaging.lockDuration
    maxDeliveryCount: messaging.maxDeliveryCount
    requiresSession: false
    enableBatchedOperations: true
  }
}

output id string = namespace.id
output name string = namespace.name
output fullyQualifiedNamespace string = '${namespace.name}.servicebus.windows.net'
output queueId string = queue.id
output queueName string = queue.name
output topicId string = topic.id
output topicName string = topic.name
