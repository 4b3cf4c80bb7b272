// Service Bus namespace, the `orders` queue consumed by the Function App, the `order-events`
// topic the outbox relay publishes the order events to, and the topic's subscriptions of the
// app's two downstream consumers (`inventory`: reserve_stock; `payments`: capture_payment).
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

@description('Premium only: turn public network access off (vnetEnabled: the app reaches the namespace through its private endpoint).')
param disablePublicNetworkAccess bool = false

@description('Standard (multi-tenant, credit-throttled: about 200-250 orders/s, docs/capacity.md) or Premium (dedicated messaging units, private endpoints, zone redundancy).')
@allowed([
  'Standard'
  'Premium'
])
param sku string = 'Standard'

@description('Premium only: messaging units per partition; the namespace gets this times premiumMessagingPartitions (Service Bus accepts 1, 2, 4, 8 or 16 times the partition count).')
@allowed([
  1
  2
  4
  8
  16
])
param messagingUnitsPerPartition int = 1

@description('Premium only: partitions of the namespace (1, 2 or 4), fixed at creation; every entity of a partitioned namespace is partitioned.')
@allowed([
  1
  2
  4
])
param premiumMessagingPartitions int = 1

@description('Premium only: spread the namespace over availability zones (create-time only; partitioned namespaces in zone regions get it anyway).')
param zoneRedundant bool = true

@description('Largest size of the orders queue and the order-events topic (MB): how long an outage of the consumer it absorbs is docs/capacity.md. Standard allows at most 5120.')
@allowed([
  1024
  2048
  3072
  4096
  5120
  10240
  20480
  40960
  81920
])
param maxSizeInMegabytes int = 5120

// A topic keeps messages only in its subscriptions: sent while it has none, an event is accepted
// and kept nowhere (learn.microsoft.com/azure/service-bus-messaging/service-bus-queues-topics-subscriptions).
// The default subscription `retained` keeps every OrderAccepted for this long, so that the events
// of a fresh deployment, or those sent before a downstream team subscribed, can still be read.
// P1D = the Standard tier's duplicate-detection window (infra/messaging.json): an older event can be republished from the outbox instead
// (its copy is no longer dropped by duplicate detection; docs/events.md "Joining late"). At ~1 KB
// per event (an order of ten lines), a day of events fits 1 GB of topic up to ~12 events/s
// sustained (maxSizeInMegabytes above: 5 GB by default, ~60 events/s): shorten it, or give the topic more space, above that (a full topic refuses the relay's sends: QuotaExceeded,
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
var premium = sku == 'Premium'
// Learn (duplicate detection): keep the window as small as possible on high-throughput entities.
// The consumer is idempotent; the window only trims producer retries, so Premium (the tiers
// above a few hundred orders/s) gets the short window of messaging.json.
var tierWindow = premium ? messaging.premiumDuplicateDetectionHistoryTimeWindow : messaging.duplicateDetectionHistoryTimeWindow
var duplicateDetectionHistoryTimeWindow = empty(duplicateDetectionHistoryTimeWindowOverride) ? tierWindow : duplicateDetectionHistoryTimeWindowOverride
// Standard caps an entity at 5 GB (Service Bus quotas); a larger request would fail the deployment.
var entityMaxSizeInMegabytes = premium ? maxSizeInMegabytes : min(maxSizeInMegabytes, 5120)

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: name
  location: location
  tags: tags
  sku: premium ? {
    name: 'Premium'
    tier: 'Premium'
    capacity: messagingUnitsPerPartition * premiumMessagingPartitions
  } : {
    name: 'Standard'
    tier: 'Standard'
  }
  properties: union({
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    // Private endpoints exist on Premium only: a Standard namespace stays public (Entra ID only).
    publicNetworkAccess: (premium && disablePublicNetworkAccess) ? 'Disabled' : 'Enabled'
  }, premium ? {
    premiumMessagingPartitions: premiumMessagingPartitions
    zoneRedundant: zoneRedundant
  } : {})
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
    // A partitioned Premium namespace accepts partitioned entities only.
    enablePartitioning: premium && premiumMessagingPartitions > 1
    enableBatchedOperations: true
    maxSizeInMegabytes: entityMaxSizeInMegabytes
  }
}

resource topic 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' = {
  parent: namespace
  name: messaging.topicName
  properties: {
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: duplicateDetectionHistoryTimeWindow
    defaultMessageTimeToLive: messaging.defaultMessageTimeToLive
    enablePartitioning: premium && premiumMessagingPartitions > 1
    enableBatchedOperations: true
    supportOrdering: true
    maxSizeInMegabytes: entityMaxSizeInMegabytes
  }
}

// Name shared with the local topic model (local/standins/topic.py RETAINED_SUBSCRIPTION).
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

// The subscriptions of the two downstream consumers: peek-lock, settled by the function, with
// the queue's lockDuration, maxDeliveryCount and defaultMessageTimeToLive (the same
// messaging.json accessors): what a subscription can redeliver is then what the queue can, and
// one INBOX_MARKER_TTL_SECONDS serves the three consumers (redeliveryHorizonSeconds below;
// tests/infra/test_inbox_retention.py fails if they diverge). A message's effective time to live
// is the smaller of its own and its subscription's (Learn: Service Bus message expiration), and
// the topic's default is the same value. Duplicate detection is the topic's (above): a
// subscription has none of its own. Dead-lettering on filter evaluation errors: a message the
// rule cannot evaluate is kept, not dropped (Learn: topic filters and actions).
var consumerSubscriptionProperties = {
  lockDuration: messaging.lockDuration
  maxDeliveryCount: messaging.maxDeliveryCount
  defaultMessageTimeToLive: messaging.defaultMessageTimeToLive
  deadLetteringOnMessageExpiration: true
  deadLetteringOnFilterEvaluationExceptions: true
  requiresSession: false
  enableBatchedOperations: true
}

// The event types both consumers read, selected by the Service Bus Subject (sys.Label), which
// the relay sets to the event's eventType (shared/relay/core.py). SQL filter grammar: IN over a
// list of constants (learn.microsoft.com/azure/service-bus-messaging/service-bus-messaging-sql-filter).
var orderEventsFilter = '''sys.Label IN ('OrderAccepted', 'OrderAmended', 'OrderCancelled')'''

resource inventorySubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' = {
  parent: topic
  name: messaging.inventorySubscriptionName
  properties: consumerSubscriptionProperties
}

resource paymentsSubscription 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' = {
  parent: topic
  name: messaging.paymentsSubscriptionName
  properties: consumerSubscriptionProperties
}

// Every new subscription gets a rule `$Default` with the true filter (Learn: topic filters and
// actions, "Each newly created topic subscription has an initial default subscription rule"),
// and a subscription's rules are OR-ed: a second rule beside it would select every event.
// A rule is its own resource, namespaces/topics/subscriptions/rules (Learn: Bicep resource
// reference, Microsoft.ServiceBus namespaces/topics/subscriptions/rules), and a PUT of an
// existing rule replaces it ("Creates a new rule and updates an existing rule", Rules_CreateOrUpdate
// of the 2024-01-01 REST spec): declaring `$Default` itself with the filter replaces the true
// filter instead of adding to it. Between the subscription's creation and the rule's, on the
// first deployment only, the subscription may take any event sent meanwhile (the consumer
// refuses a type it does not read).
resource inventoryRule 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules@2024-01-01' = {
  parent: inventorySubscription
  name: '$Default'
  properties: {
    filterType: 'SqlFilter'
    sqlFilter: {
      sqlExpression: orderEventsFilter
    }
  }
}

resource paymentsRule 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules@2024-01-01' = {
  parent: paymentsSubscription
  name: '$Default'
  properties: {
    filterType: 'SqlFilter'
    sqlFilter: {
      sqlExpression: orderEventsFilter
    }
  }
}

// How long after a message's first delivery the queue, or either consumer subscription (the same
// values, above), may still deliver it (the floor of the consumers' inbox-marker window,
// INBOX_REDELIVERY_HORIZON_SECONDS): its time-to-live, after
// which the broker dead-letters it instead of delivering it again, plus maxDeliveryCount locks of
// lockDuration, the deliveries' own time (covering the one still running when the time-to-live
// ends). From the same messaging.json values as the queue above. Bicep has no duration
// arithmetic: an ISO 8601 duration added to the epoch and read back as epoch seconds is its
// length in seconds (dateTimeAdd, dateTimeToEpoch:
// learn.microsoft.com/azure/azure-resource-manager/bicep/bicep-functions-date).
var epoch = '1970-01-01T00:00:00Z'
var lockDurationSeconds = dateTimeToEpoch(dateTimeAdd(epoch, messaging.lockDuration))
var messageTimeToLiveSeconds = dateTimeToEpoch(dateTimeAdd(epoch, messaging.defaultMessageTimeToLive))
var redeliveryHorizonSeconds = (lockDurationSeconds * messaging.maxDeliveryCount) + messageTimeToLiveSeconds

output id string = namespace.id
output name string = namespace.name
output fullyQualifiedNamespace string = '${namespace.name}.servicebus.windows.net'
output queueId string = queue.id
output queueName string = queue.name
output topicId string = topic.id
output topicName string = topic.name
output inventorySubscriptionName string = inventorySubscription.name
output paymentsSubscriptionName string = paymentsSubscription.name
output sku string = sku
output duplicateDetectionHistoryTimeWindow string = duplicateDetectionHistoryTimeWindow
output entityMaxSizeInMegabytes int = entityMaxSizeInMegabytes
output redeliveryHorizonSeconds int = redeliveryHorizonSeconds
