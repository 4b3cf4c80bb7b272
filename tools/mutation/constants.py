"""The hand-made mutants: module-level statements mutmut never mutates (it mutates function
bodies only): status tables, literals, field limits of the contract, dataclass defaults.

Each mutant is one exact text replacement in one product module; ``old`` must occur exactly once
(``tests/unit/test_mutation_tooling.py`` holds every mutant to today's code, so a refactoring
that moves a constant fails there instead of silently measuring nothing). A name reads
``<module>.const__<what the mutant does>`` so that report lines and mutmut's own sort together.

A new product module's constants go here with the module itself in ``[tool.mutmut]``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConstantMutant:
    module: str  # a path in [tool.mutmut] only_mutate, e.g. "shared/consumer/core.py"
    what: str  # what the mutant does, kebab-case: part of its name
    old: str
    new: str

    @property
    def name(self) -> str:
        return f"{module_name(self.module)}.const__{self.what}"

    def apply(self, source: str) -> str:
        count = source.count(self.old)
        if count != 1:
            raise StaleMutant(f"{self.name}: {self.old!r} occurs {count} times in {self.module}")
        return source.replace(self.old, self.new)


def module_name(path: str) -> str:
    """The dotted module a project file is imported as, which is what a mutant is named after:
    ``kit/src/idempotent_consumer/_external.py`` -> ``idempotent_consumer._external`` (a
    ``src/`` folder is an import root), ``shared/stock/effects.py`` -> ``shared.stock.effects``."""
    parts = path.removesuffix(".py").split("/")
    if "src" in parts:
        parts = parts[len(parts) - parts[::-1].index("src") :]
    return ".".join(parts).removesuffix(".__init__")


class StaleMutant(ValueError):
    """The mutant's text is no longer in its module (exactly once)."""


# The kit is a distribution of its own (kit/); its modules are private, underscore-named.
KIT_SOURCES = "kit/src/idempotent_consumer"


def _m(module: str, what: str, old: str, new: str) -> ConstantMutant:
    if module.startswith("kit/"):  # kit/src/idempotent_consumer/[<package>/]_<name>.py
        package, _, name = module.removeprefix("kit/").rpartition("/")
        folder = f"{KIT_SOURCES}/{package}" if package else KIT_SOURCES
        return ConstantMutant(f"{folder}/_{name}.py", what, old, new)
    return ConstantMutant(f"shared/{module}.py", what, old, new)


_SETTLEMENT = [
    ("processed-abandons", "PROCESSED: Settlement.COMPLETE", "PROCESSED: Settlement.ABANDON"),
    ("duplicate-abandons", "DUPLICATE: Settlement.COMPLETE", "DUPLICATE: Settlement.ABANDON"),
    ("stale-abandons", "STALE: Settlement.COMPLETE", "STALE: Settlement.ABANDON"),
    (
        "mismatch-completes",
        "MISMATCH: Settlement.DEADLETTER",
        "MISMATCH: Settlement.COMPLETE",
    ),
    ("invalid-abandons", "INVALID: Settlement.DEADLETTER", "INVALID: Settlement.ABANDON"),
    (
        "transient-dead-letters",
        "TRANSIENT: Settlement.ABANDON",
        "TRANSIENT: Settlement.DEADLETTER",
    ),
    ("systemic-dead-letters", "SYSTEMIC: Settlement.ABANDON", "SYSTEMIC: Settlement.DEADLETTER"),
    (
        "unexpected-dead-letters",
        "UNEXPECTED: Settlement.ABANDON",
        "UNEXPECTED: Settlement.DEADLETTER",
    ),
]

CORE = [
    *(_m("kit/decision", what, old, new) for what, old, new in _SETTLEMENT),
    _m(
        "kit/retry",
        "systemic-not-retried",
        "frozenset({Outcome.TRANSIENT, Outcome.SYSTEMIC})",
        "frozenset({Outcome.TRANSIENT})",
    ),
    _m(
        "kit/retry",
        "transient-not-retried",
        "frozenset({Outcome.TRANSIENT, Outcome.SYSTEMIC})",
        "frozenset({Outcome.SYSTEMIC})",
    ),
    _m(
        "kit/retry",
        "unexpected-not-held",
        "HELD_BEFORE_ABANDON = frozenset({Outcome.UNEXPECTED})",
        "HELD_BEFORE_ABANDON: frozenset[Outcome] = frozenset()",
    ),
    _m(
        "kit/retry",
        "first-delay-doubled",
        "first_delay_s: float = 1.0",
        "first_delay_s: float = 2.0",
    ),
    _m("kit/retry", "max-delay-raised", "max_delay_s: float = 8.0", "max_delay_s: float = 80.0"),
    _m(
        "kit/retry",
        "no-lock-margin",
        "lock_margin_s: float = 5.0",
        "lock_margin_s: float = 0.0",
    ),
    _m(
        "kit/retry",
        "budget-without-lock-raised",
        "budget_without_lock_s: float = 50.0",
        "budget_without_lock_s: float = 500.0",
    ),
    _m(
        "kit/retry",
        "unexpected-not-held-by-default",
        "unexpected_hold_s: float = 30.0",
        "unexpected_hold_s: float = 0.0",
    ),
    _m("kit/retry", "exponent-uncapped", "_MAX_EXPONENT = 64", "_MAX_EXPONENT = 100_000"),
    _m("kit/decision", "outcome-value-renamed", 'SYSTEMIC = "systemic"', 'SYSTEMIC = "system"'),
    _m(
        "kit/decision",
        "settlement-value-renamed",
        'DEADLETTER = "deadletter"',
        'DEADLETTER = "dead"',
    ),
]

_ORDER_ID = r'Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")]'

CONTRACT = [
    _m(
        "consumer/contract",
        "event-type-renamed",
        'ORDER_ACCEPTED_EVENT_TYPE = "OrderAccepted"',
        'ORDER_ACCEPTED_EVENT_TYPE = "Order"',
    ),
    _m("consumer/contract", "schema-version-2", "\nSCHEMA_VERSION = 1\n", "\nSCHEMA_VERSION = 2\n"),
    _m(
        "kit/message",
        "body-limit-raised",
        "MAX_BODY_BYTES = 256 * 1024",
        "MAX_BODY_BYTES = 1024 * 1024",
    ),
    _m(
        "kit/message",
        "body-limit-off-by-one",
        "MAX_BODY_BYTES = 256 * 1024",
        "MAX_BODY_BYTES = 256 * 1024 - 1",
    ),
    _m(
        "kit/errors",
        "description-limit-raised",
        "MAX_DESCRIPTION_CHARS = 1024",
        "MAX_DESCRIPTION_CHARS = 4096",
    ),
    _m(
        "consumer/contract",
        "hash-algorithm-renamed",
        'HASH_ALGORITHM = "sha256/canonical-v1"',
        'HASH_ALGORITHM = "sha256/canonical-v2"',
    ),
    _m(
        "consumer/contract",
        "currency-not-hashed",
        '"customerId", "currency", "placedAt", "lines")',
        '"customerId", "placedAt", "lines")',
    ),
    _m(
        "kit/message",
        "reason-invalid-payload-renamed",
        'INVALID_PAYLOAD = "InvalidPayload"',
        'INVALID_PAYLOAD = "Invalid"',
    ),
    _m(
        "kit/inbox",
        "reason-hash-mismatch-renamed",
        'HASH_MISMATCH = "HashMismatch"',
        'HASH_MISMATCH = "Mismatch"',
    ),
    _m(
        "kit/message",
        "reason-missing-message-id-renamed",
        'MISSING_MESSAGE_ID = "MissingMessageId"',
        'MISSING_MESSAGE_ID = "NoMessageId"',
    ),
    _m(
        "consumer/contract",
        "reason-message-id-mismatch-renamed",
        'MESSAGE_ID_MISMATCH = "MessageIdMismatch"',
        'MESSAGE_ID_MISMATCH = "IdMismatch"',
    ),
    _m(
        "consumer/contract",
        "reason-unsupported-schema-renamed",
        'UNSUPPORTED_SCHEMA_VERSION = "UnsupportedSchemaVersion"',
        'UNSUPPORTED_SCHEMA_VERSION = "UnsupportedSchema"',
    ),
    _m(
        "kit/message",
        "reason-too-large-renamed",
        'PAYLOAD_TOO_LARGE = "PayloadTooLarge"',
        'PAYLOAD_TOO_LARGE = "TooLarge"',
    ),
    _m("consumer/contract", "fraction-to-microseconds", r"(?:\.(\d{1,9}))?", r"(?:\.(\d{1,6}))?"),
    _m("consumer/contract", "lowercase-t-refused", "[Tt](\\d{2}", "T(\\d{2}"),
    _m("consumer/contract", "lowercase-z-refused", "([Zz]|[+-]", "(Z|[+-]"),
    _m(
        "consumer/contract",
        "sku-too-long-admitted",
        "Sku = Annotated[str, StringConstraints(min_length=1, max_length=64)]",
        "Sku = Annotated[str, StringConstraints(min_length=1, max_length=65)]",
    ),
    _m(
        "consumer/contract",
        "empty-sku-admitted",
        "Sku = Annotated[str, StringConstraints(min_length=1, max_length=64)]",
        "Sku = Annotated[str, StringConstraints(min_length=0, max_length=64)]",
    ),
    _m(
        "consumer/contract",
        "calendar-edge-admitted",
        "_EARLIEST = datetime.min + timedelta(days=1)",
        "_EARLIEST = datetime.min",
    ),
    _m(
        "consumer/contract",
        "quantity-zero-admitted",
        "Field(ge=1, le=10_000)",
        "Field(ge=0, le=10_000)",
    ),
    _m(
        "consumer/contract",
        "quantity-limit-raised",
        "Field(ge=1, le=10_000)",
        "Field(ge=1, le=10_001)",
    ),
    _m(
        "consumer/contract",
        "negative-price-admitted",
        "Field(ge=0, le=1_000_000_000)",
        "Field(ge=-1, le=1_000_000_000)",
    ),
    _m(
        "consumer/contract",
        "price-limit-raised",
        "Field(ge=0, le=1_000_000_000)",
        "Field(ge=0, le=1_000_000_001)",
    ),
    _m(
        "consumer/contract",
        "line-not-strict",
        '@with_config(ConfigDict(strict=True, extra="ignore"))\nclass OrderLine',
        '@with_config(ConfigDict(strict=False, extra="ignore"))\nclass OrderLine',
    ),
    _m(
        "consumer/contract",
        "order-not-strict",
        '@with_config(ConfigDict(strict=True, extra="ignore"))\nclass OrderPlaced',
        '@with_config(ConfigDict(strict=False, extra="ignore"))\nclass OrderPlaced',
    ),
    _m(
        "consumer/contract",
        "order-unknown-fields-forbidden",
        '@with_config(ConfigDict(strict=True, extra="ignore"))\nclass OrderPlaced',
        '@with_config(ConfigDict(strict=True, extra="forbid"))\nclass OrderPlaced',
    ),
    _m(
        "consumer/contract",
        "order-id-admits-slash",
        f"OrderId = {_ORDER_ID}",
        f"OrderId = {_ORDER_ID.replace('._:-', '._:/-')}",
    ),
    _m(
        "consumer/contract",
        "order-id-length-65",
        f"OrderId = {_ORDER_ID}",
        f"OrderId = {_ORDER_ID.replace('{0,63}', '{0,64}')}",
    ),
    _m(
        "consumer/contract",
        "empty-line-list-admitted",
        "Field(min_length=1, max_length=100)]",
        "Field(min_length=0, max_length=100)]",
    ),
    _m(
        "consumer/contract",
        "line-count-limit-raised",
        "Field(min_length=1, max_length=100)]",
        "Field(min_length=1, max_length=101)]",
    ),
    _m(
        "consumer/contract",
        "payload-extra-ignored",
        '@with_config(ConfigDict(strict=True, extra="forbid"))\nclass OrderAcceptedPayload',
        '@with_config(ConfigDict(strict=True, extra="ignore"))\nclass OrderAcceptedPayload',
    ),
    _m(
        "consumer/contract",
        "payload-not-strict",
        '@with_config(ConfigDict(strict=True, extra="forbid"))\nclass OrderAcceptedPayload',
        '@with_config(ConfigDict(strict=False, extra="forbid"))\nclass OrderAcceptedPayload',
    ),
    _m(
        "consumer/contract",
        "event-extra-ignored",
        '@with_config(ConfigDict(strict=True, extra="forbid", defer_build=True))\n'
        "class OrderAcceptedV1",
        '@with_config(ConfigDict(strict=True, extra="ignore", defer_build=True))\n'
        "class OrderAcceptedV1",
    ),
    _m(
        "consumer/contract",
        "negative-total-admitted",
        "TotalMinor = Annotated[int, Field(ge=0)]",
        "TotalMinor = int",
    ),
    _m(
        "consumer/contract",
        "zero-line-count-admitted",
        "LineCount = Annotated[int, Field(ge=1, le=100)]",
        "LineCount = Annotated[int, Field(ge=0, le=100)]",
    ),
    _m(
        "consumer/contract",
        "line-count-101-admitted",
        "LineCount = Annotated[int, Field(ge=1, le=100)]",
        "LineCount = Annotated[int, Field(ge=1, le=101)]",
    ),
    _m(
        "consumer/contract",
        "event-schema-2-admitted",
        "EventSchemaVersion = Literal[1]",
        "EventSchemaVersion = Literal[1, 2]",
    ),
    _m(
        "consumer/contract",
        "event-id-any-hex",
        r'pattern=r"^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$"',
        r'pattern=r"^[0-9a-fA-F-]{36}$"',
    ),
]

COSMOS_STORE = [
    _m(
        "kit/cosmos/store",
        "operation-timeout-90",
        "OPERATION_TIMEOUT_S = 20",
        "OPERATION_TIMEOUT_S = 90",
    ),
    _m(
        "kit/cosmos/store",
        "connect-timeout-60",
        '"connection_timeout": 5,',
        '"connection_timeout": 60,',
    ),
    _m("kit/cosmos/store", "read-timeout-150", '"read_timeout": 15,', '"read_timeout": 150,'),
    _m("kit/cosmos/store", "retry-total-0", '"retry_total": 4,', '"retry_total": 0,'),
    _m(
        "kit/cosmos/store",
        "backoff-cap-100",
        '"retry_backoff_max": 10,',
        '"retry_backoff_max": 100,',
    ),
    _m(
        "kit/cosmos/store",
        "response-on-write",
        '"no_response_on_write": True,',
        '"no_response_on_write": False,',
    ),
    *(
        _m(
            "kit/cosmos/store",
            f"{status}-not-transient",
            "_TRANSIENT_STATUS = {408, 410, 429, 449, 500, 502, 503, 504}",
            "_TRANSIENT_STATUS = {"
            + ", ".join(str(s) for s in (408, 410, 429, 449, 500, 502, 503, 504) if s != status)
            + "}",
        )
        for status in (408, 410, 429, 449, 500, 502, 503, 504)
    ),
    _m(
        "kit/cosmos/store",
        "401-not-systemic",
        "_SYSTEMIC_STATUS = {401, 403}",
        "_SYSTEMIC_STATUS = {403}",
    ),
    _m(
        "kit/cosmos/store",
        "403-not-systemic",
        "_SYSTEMIC_STATUS = {401, 403}",
        "_SYSTEMIC_STATUS = {401}",
    ),
    *(
        _m("kit/cosmos/store", f"{what}-not-authentication", f'    "{module}",\n', "")
        for what, module in (
            ("cosmos-signing", "azure.cosmos.auth"),
            ("cosmos-policy", "azure.cosmos._auth_policy"),
            ("cosmos-aio-policy", "azure.cosmos.aio._auth_policy_async"),
            ("core-policy", "azure.core.pipeline.policies._authentication"),
            ("identity", "azure.identity"),
        )
    ),
]

CONFIG = [
    _m(
        "config",
        "true-admits-no",
        '_TRUE = {"true", "1", "yes"}',
        '_TRUE = {"true", "1", "yes", "no"}',
    ),
    _m("config", "yes-not-true", '_TRUE = {"true", "1", "yes"}', '_TRUE = {"true", "1"}'),
    _m("config", "1-not-true", '_TRUE = {"true", "1", "yes"}', '_TRUE = {"true", "yes"}'),
    _m("config", "no-not-false", '_FALSE = {"false", "0", "no"}', '_FALSE = {"false", "0"}'),
    _m("config", "0-not-false", '_FALSE = {"false", "0", "no"}', '_FALSE = {"false", "no"}'),
    _m("config", "false-not-false", '_FALSE = {"false", "0", "no"}', '_FALSE = {"0", "no"}'),
    _m(
        "config",
        "default-outbox-off",
        "    outbox_enabled: bool = True\n",
        "    outbox_enabled: bool = False\n",
    ),
    _m(
        "config",
        "default-database-renamed",
        '    cosmos_database: str = "orders"\n',
        '    cosmos_database: str = "order"\n',
    ),
    _m(
        "config",
        "topic-setting-renamed",
        'TOPIC_SETTING = "ORDER_EVENTS_TOPIC_NAME"',
        'TOPIC_SETTING = "ORDER_EVENTS_TOPIC"',
    ),
    _m(
        "config",
        "namespace-setting-renamed",
        'NAMESPACE_SETTING = "ServiceBusConnection__fullyQualifiedNamespace"',
        'NAMESPACE_SETTING = "ServiceBusConnection__namespace"',
    ),
]

RELAY = [
    _m(
        "relay/core",
        "parked-invalid-renamed",
        'PARKED_INVALID_EVENT = "InvalidOutboxEvent"',
        'PARKED_INVALID_EVENT = "Invalid"',
    ),
    _m(
        "relay/core",
        "parked-rejected-renamed",
        'PARKED_REJECTED = "RejectedByBroker"',
        'PARKED_REJECTED = "Rejected"',
    ),
    _m(
        "relay/core",
        "parked-exhausted-renamed",
        'PARKED_RETRIES_EXHAUSTED = "RetriesExhausted"',
        'PARKED_RETRIES_EXHAUSTED = "Exhausted"',
    ),
    _m(
        "triggers",
        "runtime-retry-bounded",
        "max_retry_count: int = -1",
        "max_retry_count: int = 5",
    ),
    _m(
        "triggers",
        "runtime-retry-fixed",
        'strategy: str = "exponential_backoff"',
        'strategy: str = "fixed_delay"',
    ),
    _m(
        "relay/core",
        "park-after-1",
        "park_after_attempts: int = 10",
        "park_after_attempts: int = 1",
    ),
]

OUTBOX = [
    _m(
        "relay/outbox",
        "event-id-namespace-changed",
        'uuid.UUID("6f3a9f0e-2d3c-4f6a-9a51-2a0f3c1b7e11")',
        'uuid.UUID("6f3a9f0e-2d3c-4f6a-9a51-2a0f3c1b7e12")',
    ),
    _m(
        "relay/outbox",
        "dispatched-ttl-1-minute",
        "DISPATCHED_TTL_S = 7 * 24 * 3600",
        "DISPATCHED_TTL_S = 60",
    ),
    _m(
        "relay/outbox",
        "status-dispatched-renamed",
        'STATUS_DISPATCHED = "dispatched"',
        'STATUS_DISPATCHED = "sent"',
    ),
    _m(
        "relay/outbox",
        "status-parked-renamed",
        'STATUS_PARKED = "parked"',
        'STATUS_PARKED = "held"',
    ),
    _m(
        "relay/outbox",
        "status-pending-renamed",
        'STATUS_PENDING = "pending"',
        'STATUS_PENDING = "new"',
    ),
]

WATCHDOG = [
    _m(
        "triggers",
        "schedule-hourly",
        'WATCHDOG_SCHEDULE = "0 */5 * * * *"',
        'WATCHDOG_SCHEDULE = "0 0 * * * *"',
    ),
    _m("relay/watchdog", "one-page-per-run", "MAX_PAGES_PER_RUN = 20", "MAX_PAGES_PER_RUN = 1"),
    _m(
        "relay/watchdog",
        "default-age-zero",
        "    min_age_s: float = 300.0\n",
        "    min_age_s: float = 0.0\n",
    ),
    _m(
        "relay/watchdog",
        "default-page-of-one",
        "    max_documents: int = 500  # per page",
        "    max_documents: int = 1  # per page",
    ),
]

OUTBOX_STORE = [
    _m(
        "adapters/cosmos_outbox",
        "stuck-cutoff-exclusive",
        "{OutboxField.CREATED_AT} <= @cutoff",
        "{OutboxField.CREATED_AT} < @cutoff",
    ),
    _m(
        "adapters/cosmos_outbox",
        "stuck-any-document-type",
        "WHERE c.{OutboxField.TYPE} = @type AND ",
        "WHERE ",
    ),
]

EVENT_PUBLISHER = [
    _m(
        "adapters/servicebus_out",
        "send-timeout-300",
        "SEND_TIMEOUT_S = 30.0",
        "SEND_TIMEOUT_S = 300.0",
    ),
    _m("adapters/servicebus_out", "no-grace", "_GRACE_S = 1.0", "_GRACE_S = 0.0"),
]


def _ops(module: str, what: str, old: str, new: str) -> ConstantMutant:
    return ConstantMutant(f"ops/{module}.py", what, old, new)


AUDIT = [
    _ops(
        "audit",
        "max-delivery-count-unknown",
        '        "MaxDeliveryCountExceeded",\n',
        "",
    ),
    _ops("audit", "ttl-expired-unknown", '        "TTLExpiredException",\n', ""),
    _ops(
        "audit",
        "orphaned-document-unknown",
        ") | {ORPHANED_DOCUMENT}  #",
        ")  #",
    ),
    _ops("audit", "shown-ids-50", "SHOWN_IDS = 5  #", "SHOWN_IDS = 50  #"),
    _ops(
        "audit",
        "nothing-pending-renamed",
        'NOTHING_PENDING = "no outbox event left pending or parked"',
        'NOTHING_PENDING = "no outbox event left pending"',
    ),
]

RESUBMIT = [
    _ops(
        "resubmit",
        "held-is-done",
        "        Verdict.RESUBMITTED,\n        Verdict.ALREADY_STORED,\n",
        "        Verdict.RESUBMITTED,\n        Verdict.HELD,\n        Verdict.ALREADY_STORED,\n",
    ),
    _ops(
        "resubmit",
        "resubmitted-not-done",
        "        Verdict.RESUBMITTED,\n        Verdict.ALREADY_STORED,\n",
        "        Verdict.ALREADY_STORED,\n",
    ),
    _ops(
        "resubmit",
        "dry-run-not-done",
        "        Verdict.WOULD_RESUBMIT,\n        Verdict.WOULD_REMOVE,\n",
        "        Verdict.WOULD_REMOVE,\n",
    ),
    _ops(
        "resubmit",
        "dropped-renamed",
        'DROPPED = "dropped"',
        'DROPPED = "lost"',
    ),
]

SERVICEBUS = [
    _ops(
        "servicebus",
        "dead-letter-reason-travels",
        '_BROKER_PROPERTIES = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})',
        '_BROKER_PROPERTIES = frozenset({"DeadLetterErrorDescription"})',
    ),
    _ops(
        "servicebus",
        "dead-letter-description-travels",
        '_BROKER_PROPERTIES = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})',
        '_BROKER_PROPERTIES = frozenset({"DeadLetterReason"})',
    ),
    _ops("servicebus", "peek-page-of-one", "PEEK_PAGE = 250  #", "PEEK_PAGE = 1  #"),
    _ops("servicebus", "receive-one", "RECEIVE_BATCH = 100  #", "RECEIVE_BATCH = 1  #"),
]

# The provider adapter's module-level values (mutation run 5, the tenth session). The stand-in
# provider imports the header name and the problem media type from the adapter, so a test that
# can tell them must spell them out (tests/unit/test_provider_constants.py).
PAYMENT_PROVIDER = [
    _m(
        "adapters/payment_provider",
        "answer-limit-raised",
        "MAX_ANSWER_BYTES = 64 * 1024",
        "MAX_ANSWER_BYTES = 1024 * 1024",
    ),
    _m(
        "adapters/payment_provider",
        "answer-limit-off-by-one",
        "MAX_ANSWER_BYTES = 64 * 1024",
        "MAX_ANSWER_BYTES = 64 * 1024 - 1",
    ),
    _m(
        "adapters/payment_provider",
        "default-timeout-raised",
        "DEFAULT_TIMEOUT_S = 10.0",
        "DEFAULT_TIMEOUT_S = 100.0",
    ),
    _m(
        "adapters/payment_provider",
        "idempotency-key-header-renamed",
        'IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"',
        'IDEMPOTENCY_KEY_HEADER = "Idempotency-Id"',
    ),
    _m(
        "adapters/payment_provider",
        "problem-media-type-renamed",
        'PROBLEM_JSON = "application/problem+json"',
        'PROBLEM_JSON = "application/json"',
    ),
]

# The rounds a kit consumer's decision may take against writers that overtake it, and the stock
# reservation's business measure (mutation run 5, the thirteenth session).
ROUNDS_AND_MEASURES = [
    *(
        _m(module, f"rounds-{name}", "MAX_ROUNDS = 4", f"MAX_ROUNDS = {rounds}")
        for module in ("kit/apply", "kit/external")
        for name, rounds in (("three", 3), ("five", 5))
    ),
    _m(
        "stock/effects",
        "shortfall-measure-renamed",
        'SHORTFALL = "stock.shortfall"',
        'SHORTFALL = "stock.short"',
    ),
]

MUTANTS: tuple[ConstantMutant, ...] = (
    *CORE,
    *CONTRACT,
    *COSMOS_STORE,
    *CONFIG,
    *RELAY,
    *OUTBOX,
    *WATCHDOG,
    *OUTBOX_STORE,
    *EVENT_PUBLISHER,
    *AUDIT,
    *RESUBMIT,
    *SERVICEBUS,
    *PAYMENT_PROVIDER,
    *ROUNDS_AND_MEASURES,
)
