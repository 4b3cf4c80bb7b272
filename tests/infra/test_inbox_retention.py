"""The inbox markers' retention, from the Bicep (parsed with pycep) to the app's settings.

The window is computed in the Bicep from infra/messaging.json, the file that configures the
queue, and main.bicep's ``deadLetterReplayHorizon``; these tests evaluate those expressions (the
few operators they use, below) and compare the result with the same numbers computed here with
the project's one duration parser, with what the app's defaults are (shared/ never reads
infra/), and with what the app accepts at start-up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ops.durations import parse_iso8601_duration as iso_duration  # the one parser
from shared.config import (
    COSMOS_MAX_TTL_S,
    DEAD_LETTER_REPLAY_HORIZON_SETTING,
    DEFAULT_DEAD_LETTER_REPLAY_HORIZON_S,
    DEFAULT_INBOX_MARKER_TTL_S,
    DEFAULT_REDELIVERY_HORIZON_S,
    INBOX_MARKER_TTL_SETTING,
    QUEUE_LOCK_DURATION_S,
    QUEUE_MAX_DELIVERY_COUNT,
    QUEUE_MESSAGE_TTL_S,
    REDELIVERY_HORIZON_SETTING,
    Settings,
)
from tests.infra.infra_support import (
    REPO,
    accessor,
    body,
    decorator_argument,
    doc,
    int_literal,
    main_parameter_mapping,
    messaging,
)
from tests.test_function_app import timespan_s

SETTINGS = (
    INBOX_MARKER_TTL_SETTING,
    REDELIVERY_HORIZON_SETTING,
    DEAD_LETTER_REPLAY_HORIZON_SETTING,
)
APP = {"ORDERS_QUEUE_NAME": "orders", "COSMOS_ENDPOINT": "https://localhost:8081/"}


# ---- a small evaluator of pycep's expressions --------------------------------------------------


def _to_datetime(text: str) -> datetime:
    parsed = datetime.fromisoformat(text)
    assert parsed.tzinfo is not None, f"{text!r}: ARM date functions need an explicit zone here"
    return parsed


def evaluate(expr: Any, names: Mapping[str, Any]) -> Any:
    """The value of a Bicep expression as ARM computes it, for the operators the retention uses.

    pycep gives identifiers and string literals alike as str: a str is a name when ``names``
    has it. dateTimeAdd adds an ISO 8601 duration (ARM counts P1M as 30 days and P1Y as 365:
    the one parser refuses both, so a duration with them fails here rather than drift);
    dateTimeToEpoch gives whole seconds since 1970-01-01T00:00:00Z
    (learn.microsoft.com/azure/azure-resource-manager/bicep/bicep-functions-date).
    """
    if isinstance(expr, str):
        if expr in names:  # not names.get: Names evaluates a variable on its first read
            return names[expr]
        return expr
    if isinstance(expr, bool | int):
        return expr
    if "operator" in expr:
        operator = expr["operator"]
        operands = operator["operands"]
        kind = operator["type"]
        if kind == "property_accessor":
            return evaluate(operands["operand_1"], names)[operands["operand_2"]]
        left, right = (evaluate(operands[key], names) for key in ("operand_1", "operand_2"))
        if kind == "add":
            return left + right
        if kind == "multiply":
            return left * right
        raise AssertionError(f"operator {kind} not modelled")
    function = expr["function"]
    parameters = function["parameters"]
    kind = function["type"]
    if kind == "date_time_add":
        assert parameters["format"] is None
        base = _to_datetime(evaluate(parameters["base"], names))
        added = base + iso_duration(evaluate(parameters["duration"], names))
        return added.isoformat().replace("+00:00", "Z")
    if kind == "date_time_to_epoch":
        moment = _to_datetime(evaluate(parameters["date_time"], names))
        return int((moment - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds())
    if kind == "string":
        return str(evaluate(parameters["value_to_convert"], names))
    raise AssertionError(f"function {kind} not modelled")


class Names(dict[str, Any]):
    """A template's names: parameters as given (or their defaults), variables evaluated when
    first read."""

    def __init__(self, document: dict[str, Any], given: Mapping[str, Any]) -> None:
        super().__init__()
        self._variables = document.get("variables", {})
        for name, definition in document.get("parameters", {}).items():
            if name in given:
                self[name] = given[name]
            elif definition.get("default") is not None:
                self[name] = definition["default"]

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or name in self._variables

    def __missing__(self, name: str) -> Any:
        value = self._variables[name]["value"]
        if isinstance(value, dict) and value.get("function", {}).get("type") == "load_json_content":
            assert value["function"]["parameters"]["file_path"] == "../messaging.json"
            self[name] = messaging()
        else:
            self[name] = evaluate(value, self)
        return self[name]


def deployed_settings(replay_horizon: str | None = None) -> dict[str, str]:
    """The three app settings as a deployment of main.bicep sets them: servicebus.bicep's output,
    main.bicep's replay variable, function.bicep's window, wired as main.bicep wires them."""
    main_given = {} if replay_horizon is None else {"deadLetterReplayHorizon": replay_horizon}
    main = Names(doc("main"), main_given)
    servicebus = Names(doc("servicebus"), {})
    wiring = body(doc("main")["modules"]["functionApp"])["params"]
    given = {}
    for param in ("inboxRedeliveryHorizonSeconds", "deadLetterReplayHorizonSeconds"):
        source = accessor(wiring[param])
        if source[:2] == ("serviceBus", "outputs"):
            given[param] = evaluate(doc("servicebus")["outputs"][source[2]]["value"], servicebus)
        else:
            given[param] = main[wiring[param]]
    function = Names(doc("function"), given)
    values = body(doc("function")["resources"]["appSettings"])["properties"]["function"]
    return {name: evaluate(values["parameters"]["arg_1"][name], function) for name in SETTINGS}


# ---- the tests ----------------------------------------------------------------------------------


def _seconds(duration: str) -> int:
    return int(iso_duration(duration).total_seconds())


def test_the_redelivery_horizon_is_computed_from_the_values_the_queue_is_configured_with() -> None:
    """lockDuration x maxDeliveryCount + defaultMessageTimeToLive, from the very accessors of
    messaging.json the queue resource uses (servicebus.bicep)."""
    servicebus = doc("servicebus")
    variables = servicebus["variables"]
    queue = body(servicebus["resources"]["queue"])["properties"]
    for variable, queue_property in (
        ("lockDurationSeconds", "lockDuration"),
        ("messageTimeToLiveSeconds", "defaultMessageTimeToLive"),
    ):
        epoch = variables[variable]["value"]["function"]
        assert epoch["type"] == "date_time_to_epoch"
        added = epoch["parameters"]["date_time"]["function"]["parameters"]
        assert accessor(added["duration"]) == accessor(queue[queue_property]), variable
        assert Names(servicebus, {})[added["base"]] == "1970-01-01T00:00:00Z"
    horizon = variables["redeliveryHorizonSeconds"]["value"]
    assert accessor(
        horizon["operator"]["operands"]["operand_1"]["operator"]["operands"]["operand_2"]
    ) == accessor(queue["maxDeliveryCount"])
    output = servicebus["outputs"]["redeliveryHorizonSeconds"]
    assert (output["type"], output["value"]) == ("int", "redeliveryHorizonSeconds")

    data = messaging()
    expected = _seconds(data["lockDuration"]) * data["maxDeliveryCount"] + _seconds(
        data["defaultMessageTimeToLive"]
    )
    assert evaluate(output["value"], Names(servicebus, {})) == expected == 60 * 10 + 14 * 86_400


def test_the_consumer_subscriptions_redeliver_as_the_queue_so_one_window_serves_all() -> None:
    """The stock reservation and payment capture subscriptions take the very messaging.json
    values the redelivery horizon is computed from (lockDuration, maxDeliveryCount,
    defaultMessageTimeToLive), and the topic's default time to live is the same: what either
    subscription can still redeliver is what the queue can, so the one
    INBOX_MARKER_TTL_SECONDS covers the three consumers' markers (names.md). A subscription
    given values of its own fails here: the window would then have to be the largest of the
    three horizons."""
    servicebus = doc("servicebus")
    variables = servicebus["variables"]
    horizon_terms = {
        "lockDuration": variables["lockDurationSeconds"]["value"]["function"]["parameters"][
            "date_time"
        ]["function"]["parameters"]["duration"],
        "defaultMessageTimeToLive": variables["messageTimeToLiveSeconds"]["value"]["function"][
            "parameters"
        ]["date_time"]["function"]["parameters"]["duration"],
        "maxDeliveryCount": variables["redeliveryHorizonSeconds"]["value"]["operator"]["operands"][
            "operand_1"
        ]["operator"]["operands"]["operand_2"],
    }
    queue = body(servicebus["resources"]["queue"])["properties"]
    topic = body(servicebus["resources"]["topic"])["properties"]
    for name in ("inventorySubscription", "paymentsSubscription"):
        properties = body(servicebus["resources"][name])["properties"]
        if isinstance(properties, str):  # a shared variable of the module
            properties = variables[properties]["value"]
        for term, source in horizon_terms.items():
            assert accessor(properties[term]) == accessor(source) == accessor(queue[term]), (
                name,
                term,
            )
    assert accessor(topic["defaultMessageTimeToLive"]) == accessor(
        horizon_terms["defaultMessageTimeToLive"]
    )
    # One window for every consumer: the app gets one setting, computed from the queue's terms.
    assert set(deployed_settings()) == set(SETTINGS)


def test_the_app_settings_carry_the_window_and_both_of_its_terms() -> None:
    """INBOX_MARKER_TTL_SECONDS = lockDuration x maxDeliveryCount + defaultMessageTimeToLive +
    deadLetterReplayHorizon, each term its own setting, wired from the Service Bus module and
    main.bicep's parameter."""
    wiring = body(doc("main")["modules"]["functionApp"])["params"]
    assert accessor(wiring["inboxRedeliveryHorizonSeconds"]) == (
        "serviceBus",
        "outputs",
        "redeliveryHorizonSeconds",
    )
    assert wiring["deadLetterReplayHorizonSeconds"] == "deadLetterReplayHorizonSeconds"
    replay = doc("main")["variables"]["deadLetterReplayHorizonSeconds"]["value"]["function"]
    assert replay["type"] == "date_time_to_epoch"
    assert replay["parameters"]["date_time"]["function"]["parameters"]["duration"] == (
        "deadLetterReplayHorizon"
    )
    function = doc("function")
    for param in ("inboxRedeliveryHorizonSeconds", "deadLetterReplayHorizonSeconds"):
        assert function["parameters"][param]["type"] == "int"
        assert function["parameters"][param].get("default") is None, f"{param}: must be wired"

    data = messaging()
    redelivery = _seconds(data["lockDuration"]) * data["maxDeliveryCount"] + _seconds(
        data["defaultMessageTimeToLive"]
    )
    replay_s = _seconds(doc("main")["parameters"]["deadLetterReplayHorizon"]["default"])
    assert deployed_settings() == {
        INBOX_MARKER_TTL_SETTING: str(redelivery + replay_s),
        REDELIVERY_HORIZON_SETTING: str(redelivery),
        DEAD_LETTER_REPLAY_HORIZON_SETTING: str(replay_s),
    }
    assert deployed_settings("P30D")[INBOX_MARKER_TTL_SETTING] == str(redelivery + 30 * 86_400)


def test_the_app_s_defaults_are_what_the_bicep_deploys_by_default() -> None:
    """shared/config.py cannot read infra/messaging.json (docs/architecture.md: layout): its
    constants are held to it here, so a changed queue changes the local defaults in the same
    commit."""
    data = messaging()
    assert _seconds(data["lockDuration"]) == QUEUE_LOCK_DURATION_S
    assert data["maxDeliveryCount"] == QUEUE_MAX_DELIVERY_COUNT
    assert _seconds(data["defaultMessageTimeToLive"]) == QUEUE_MESSAGE_TTL_S
    deployed = deployed_settings()
    assert deployed == {
        INBOX_MARKER_TTL_SETTING: str(DEFAULT_INBOX_MARKER_TTL_S),
        REDELIVERY_HORIZON_SETTING: str(DEFAULT_REDELIVERY_HORIZON_S),
        DEAD_LETTER_REPLAY_HORIZON_SETTING: str(DEFAULT_DEAD_LETTER_REPLAY_HORIZON_S),
    }
    assert Settings.from_env(APP).inbox_marker_ttl_s == int(deployed[INBOX_MARKER_TTL_SETTING])
    template = json.loads((REPO / "local.settings.json.template").read_text(encoding="utf-8"))
    assert {name: template["Values"][name] for name in SETTINGS} == deployed


@pytest.mark.parametrize(
    "replay_horizon",
    decorator_argument(doc("main")["parameters"]["deadLetterReplayHorizon"], "allowed"),
)
def test_every_allowed_replay_horizon_deploys_settings_the_app_accepts(
    replay_horizon: str,
) -> None:
    """The app refuses a window shorter than its terms or above Cosmos DB's largest ttl: no
    deployable value may be refused (the app would hold every message at start-up)."""
    deployed = deployed_settings(replay_horizon)
    assert Settings.from_env({**APP, **deployed}).inbox_marker_ttl_s == int(
        deployed[INBOX_MARKER_TTL_SETTING]
    )
    assert int(deployed[INBOX_MARKER_TTL_SETTING]) <= COSMOS_MAX_TTL_S
    assert timedelta(days=1) <= iso_duration(replay_horizon) <= timedelta(days=365)


def test_the_replay_horizon_is_a_parameter_of_14_days_set_through_azd() -> None:
    parameter = doc("main")["parameters"]["deadLetterReplayHorizon"]
    assert parameter["type"] == "string"
    assert parameter["default"] == "P14D"
    assert iso_duration(parameter["default"]) == timedelta(days=14)
    assert main_parameter_mapping()["deadLetterReplayHorizon"] == (
        "DEAD_LETTER_REPLAY_HORIZON",
        "P14D",
    )


def test_the_delivery_term_covers_a_delivery_still_running_when_the_message_expires() -> None:
    """Service Bus delivers nothing past a message's expires-at-utc, but a delivery that holds
    its lock then still runs (learn.microsoft.com/azure/service-bus-messaging/message-expiration),
    for up to functionTimeout with the host renewing the lock, and its lock may then lapse:
    lockDuration x maxDeliveryCount must be at least that long."""
    host = json.loads((REPO / "host.json").read_text(encoding="utf-8"))
    running = max(
        timespan_s(host["functionTimeout"]),
        timespan_s(host["extensions"]["serviceBus"]["maxAutoLockRenewalDuration"]),
    )
    data = messaging()
    lock = _seconds(data["lockDuration"])
    assert lock * data["maxDeliveryCount"] >= running + lock


@pytest.mark.parametrize(
    "container", ["ordersContainer", "inventoryContainer", "paymentsContainer"]
)
def test_markers_can_expire_per_item_in_every_consumer_s_container(container: str) -> None:
    """defaultTtl -1: time to live is on and nothing expires unless it carries its own ttl, which
    then counts from the item's last write (learn.microsoft.com/azure/cosmos-db/nosql/time-to-live,
    "container's TTL set to -1"): markers expire, orders, stock items and payment records
    never."""
    resource = body(doc("cosmos")["resources"][container])["properties"]["resource"]
    assert int_literal(resource["defaultTtl"]) == -1
