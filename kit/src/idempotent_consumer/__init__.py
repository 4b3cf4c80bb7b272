"""Idempotent consumers for Azure Functions: a consumer is its contract, its effect and its
partitions (``ConsumerDefinition``); the kit decides each delivery exactly once over a document
store, retries it within its lock, settles it once and reports it (``Consumer``).

This module's ``__all__`` is the public surface; every underscore module is private and may
change in any release. Importing this package imports no Azure library and no OpenTelemetry:
the adapters are subpackages their users import (``idempotent_consumer.cosmos``,
``idempotent_consumer.servicebus``, ``idempotent_consumer.telemetry``,
``idempotent_consumer.functions``), and the contract suite is ``idempotent_consumer.testing``.

What the private modules own:

- ``_decision``: the delivery as a consumer sees it (``IncomingMessage``), the outcome and its
  settlement (one total table), the ``Decision``, and the ``DocumentStore`` port (atomic commits
  in one partition, point reads);
- ``_writes``: what a consumer asks the store for, as data (create; patch on a condition);
- ``_inbox``: the marker of a handled message, keyed by (consumer name, MessageId);
- ``_errors``: every failure, classified by what a redelivery can fix;
- ``_retry``: how one delivery rides out a failure while it holds its lock;
- ``_message``: the checks every JSON message shares, the canonical fingerprint, ``ValidEvent``;
- ``_apply``: an effect in one partition committed once with its marker, or behind a gate with
  its version alone (``apply_once``);
- ``_consumer``: a consumer as a user writes one (``ConsumerDefinition``) and ``decide`` over
  its partitions, behind a gate within its write window;
- ``_external``: an effect outside the transaction (a payment): the in-progress record, the call
  with its idempotency key, the completed record (``CallingConsumerDefinition``,
  ``decide_call``);
- ``_service``: the delivery decided, retried, settled once and reported (``Consumer``);
- ``_clock``: time for everything that waits or stamps, and the stored form of a time;
- ``_ids``: name-based identities (the text of a UUIDv5).

The core (this module and the underscore modules) imports only the standard library and pydantic;
never Azure, OpenTelemetry or an app built on it.
"""

from __future__ import annotations

from idempotent_consumer._apply import (
    Again,
    Effect,
    Read,
    Reject,
    Resolution,
    Retry,
    Stale,
    apply_once,
)
from idempotent_consumer._clock import SYSTEM_CLOCK, Clock, SystemClock, document_timestamp
from idempotent_consumer._consumer import (
    LANDING_S,
    OUTLIVES_DELIVERIES_S,
    WRITE_WINDOW_S,
    Blind,
    ConsumerDefinition,
    Gate,
    Measured,
    Monotonic,
    classified,
    decide,
)
from idempotent_consumer._decision import (
    SETTLEMENT_BY_OUTCOME,
    AboutMessage,
    Decision,
    DocumentStore,
    IncomingMessage,
    Outcome,
    Settlement,
    decided,
    failed,
    refused,
)
from idempotent_consumer._errors import (
    MAX_DESCRIPTION_CHARS,
    ConditionFailed,
    ConfigurationError,
    ConsumerError,
    DocumentExists,
    DocumentMissing,
    InvalidMessage,
    PartitionFull,
    StoreError,
    SystemicStoreError,
    TransientStoreError,
    WriteRefused,
    bound,
)
from idempotent_consumer._external import (
    NEEDS_RECONCILIATION,
    Call,
    CallField,
    CallingConsumerDefinition,
    Escalation,
    ExternalEffect,
    Found,
    InProgress,
    Looked,
    NotFound,
    NotMade,
    StateField,
    call_key,
    complete_call,
    decide_call,
    release_call,
)
from idempotent_consumer._ids import uuid5_text
from idempotent_consumer._inbox import (
    HASH_MISMATCH,
    INBOX_TYPE,
    PROCESSED,
    Handled,
    Inbox,
    InboxField,
    is_marker,
    keyed_id,
    marker_id,
)
from idempotent_consumer._message import (
    HASH_ALGORITHM,
    MAX_BODY_BYTES,
    KitReason,
    ValidEvent,
    fingerprint,
    read_event,
    read_json_object,
    schema_violations,
    unsupported_type,
)
from idempotent_consumer._retry import HELD_BEFORE_ABANDON, RETRIED_IN_DELIVERY, RetryPolicy
from idempotent_consumer._service import (
    Consumer,
    ConsumerObserver,
    Decide,
    Settle,
    hold_then_abandon,
)
from idempotent_consumer._writes import (
    Condition,
    Create,
    Patch,
    PatchOperation,
    Room,
    Write,
    increment,
    set_field,
)

__version__ = "0.1.0"

# An exception's public address is its name here: telemetry records ``error.type`` as the
# class's module and name, and a private module's path would change with any refactoring.
for _exported in (
    ConditionFailed,
    ConfigurationError,
    ConsumerError,
    DocumentExists,
    DocumentMissing,
    InvalidMessage,
    NotMade,
    PartitionFull,
    StoreError,
    SystemicStoreError,
    TransientStoreError,
    WriteRefused,
):
    _exported.__module__ = __name__
del _exported

__all__ = [
    "HASH_ALGORITHM",
    "HASH_MISMATCH",
    "HELD_BEFORE_ABANDON",
    "INBOX_TYPE",
    "LANDING_S",
    "MAX_BODY_BYTES",
    "MAX_DESCRIPTION_CHARS",
    "NEEDS_RECONCILIATION",
    "OUTLIVES_DELIVERIES_S",
    "PROCESSED",
    "RETRIED_IN_DELIVERY",
    "SETTLEMENT_BY_OUTCOME",
    "SYSTEM_CLOCK",
    "WRITE_WINDOW_S",
    "AboutMessage",
    "Again",
    "Blind",
    "Call",
    "CallField",
    "CallingConsumerDefinition",
    "Clock",
    "Condition",
    "ConditionFailed",
    "ConfigurationError",
    "Consumer",
    "ConsumerDefinition",
    "ConsumerError",
    "ConsumerObserver",
    "Create",
    "Decide",
    "Decision",
    "DocumentExists",
    "DocumentMissing",
    "DocumentStore",
    "Effect",
    "Escalation",
    "ExternalEffect",
    "Found",
    "Gate",
    "Handled",
    "InProgress",
    "Inbox",
    "InboxField",
    "IncomingMessage",
    "InvalidMessage",
    "KitReason",
    "Looked",
    "Measured",
    "Monotonic",
    "NotFound",
    "NotMade",
    "Outcome",
    "PartitionFull",
    "Patch",
    "PatchOperation",
    "Read",
    "Reject",
    "Resolution",
    "Retry",
    "RetryPolicy",
    "Room",
    "Settle",
    "Settlement",
    "Stale",
    "StateField",
    "StoreError",
    "SystemClock",
    "SystemicStoreError",
    "TransientStoreError",
    "ValidEvent",
    "Write",
    "WriteRefused",
    "__version__",
    "apply_once",
    "bound",
    "call_key",
    "classified",
    "complete_call",
    "decide",
    "decide_call",
    "decided",
    "document_timestamp",
    "failed",
    "fingerprint",
    "hold_then_abandon",
    "increment",
    "is_marker",
    "keyed_id",
    "marker_id",
    "read_event",
    "read_json_object",
    "refused",
    "release_call",
    "schema_violations",
    "set_field",
    "unsupported_type",
    "uuid5_text",
]
