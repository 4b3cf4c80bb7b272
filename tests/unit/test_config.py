"""App settings: an invalid one fails with its name, before any request is made."""

from __future__ import annotations

import pytest

from local.standins.cosmos_server import EMULATOR_KEY
from shared.config import Settings
from shared.consumer.errors import ConfigurationError

VALID = {"ORDERS_QUEUE_NAME": "orders", "COSMOS_ENDPOINT": "https://localhost:8081/"}


def test_a_base64_key_is_used_and_no_key_means_entra_id() -> None:
    assert Settings.from_env({**VALID, "COSMOS_KEY": EMULATOR_KEY}).cosmos_key == EMULATOR_KEY
    assert Settings.from_env(VALID).cosmos_key is None
    assert Settings.from_env({**VALID, "COSMOS_KEY": "  "}).cosmos_key is None


@pytest.mark.parametrize(
    "key",
    ["not-a-key", "abc", EMULATOR_KEY[:-3], EMULATOR_KEY + "!", "===="],
    ids=["not base64", "bad padding", "truncated", "trailing junk", "decodes to nothing"],
)
def test_a_malformed_key_is_a_configuration_error_naming_the_setting_not_the_key(
    key: str,
) -> None:
    # Unchecked, the SDK raises binascii.Error on the first request, and the message was
    # treated as unexpected: ten fast redeliveries dead-lettered healthy orders.
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, "COSMOS_KEY": key})

    assert raised.value.setting == "COSMOS_KEY"
    assert key not in str(raised.value)


TRUE_SPELLINGS = ["true", "1", "yes", "TRUE", "True", " yes ", "Yes"]
FALSE_SPELLINGS = ["false", "0", "no", "FALSE", "False", " no ", "No"]
FLAGS = {"OUTBOX_ENABLED": "outbox_enabled", "COSMOS_VERIFY_TLS": "cosmos_verify_tls"}


@pytest.mark.parametrize("setting", list(FLAGS))
@pytest.mark.parametrize(
    ("spelling", "meaning"),
    [(s, True) for s in TRUE_SPELLINGS] + [(s, False) for s in FALSE_SPELLINGS],
)
def test_every_spelling_of_a_flag_means_what_it_says(
    setting: str, spelling: str, meaning: bool
) -> None:
    # OUTBOX_ENABLED=no must turn the outbox off: read as true, orders would carry events no
    # relay is meant to publish; COSMOS_VERIFY_TLS=no must be honoured only as written.
    settings = Settings.from_env({**VALID, setting: spelling})

    assert getattr(settings, FLAGS[setting]) is meaning
    other = next(name for name in FLAGS if name != setting)
    assert getattr(settings, FLAGS[other]) is True  # untouched: its default


def test_unset_settings_take_their_documented_defaults() -> None:
    settings = Settings.from_env({**VALID, "OUTBOX_ENABLED": " ", "COSMOS_DATABASE": ""})

    assert settings == Settings(
        queue_name="orders",
        cosmos_endpoint="https://localhost:8081/",
        cosmos_key=None,
        cosmos_database="orders",
        cosmos_container="orders",
        cosmos_verify_tls=True,
        outbox_enabled=True,
    )


def test_names_are_read_from_their_settings() -> None:
    settings = Settings.from_env(
        {**VALID, "COSMOS_DATABASE": " sales ", "COSMOS_CONTAINER": "orders-eu"}
    )

    assert (settings.cosmos_database, settings.cosmos_container) == ("sales", "orders-eu")


@pytest.mark.parametrize("value", ["maybe", "on", "off", "2", "y", "n" * 30])
@pytest.mark.parametrize("setting", list(FLAGS))
def test_a_flag_that_is_neither_true_nor_false_names_the_setting(setting: str, value: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, setting: value})

    assert raised.value.setting == setting
    assert str(raised.value) == f"{setting}: must be true or false, got {value[:20]!r}"


@pytest.mark.parametrize("setting", ["COSMOS_DATABASE", "COSMOS_CONTAINER"])
@pytest.mark.parametrize("character", ["/", "\\", "?", "#"])
def test_a_resource_name_with_a_character_cosmos_db_refuses_names_the_setting(
    setting: str, character: str
) -> None:
    # Cosmos DB refuses these in a resource id (tests/unit/test_contract.py cites the list).
    value = f"orders{character}eu"
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, setting: value})

    assert raised.value.setting == setting
    assert str(raised.value) == f"{setting}: is not a valid Cosmos DB resource name: {value!r}"


@pytest.mark.parametrize("setting", ["COSMOS_DATABASE", "COSMOS_CONTAINER"])
def test_a_resource_name_is_at_most_255_characters_and_echoed_bounded(setting: str) -> None:
    assert getattr(Settings.from_env({**VALID, setting: "d" * 255}), setting.lower()) == "d" * 255
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, setting: "d" * 256})

    assert raised.value.setting == setting
    assert str(raised.value).endswith(f": {'d' * 80!r}")


@pytest.mark.parametrize("setting", ["ORDERS_QUEUE_NAME", "COSMOS_ENDPOINT"])
def test_a_missing_required_setting_is_named(setting: str) -> None:
    env = {name: value for name, value in VALID.items() if name != setting}
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**env, setting: "  "} if setting == "ORDERS_QUEUE_NAME" else env)

    assert str(raised.value) == f"{setting}: is required but not set"


def test_an_endpoint_that_is_not_https_is_named_and_echoed_bounded() -> None:
    endpoint = "http://" + "a" * 100
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, "COSMOS_ENDPOINT": endpoint})

    assert raised.value.setting == "COSMOS_ENDPOINT"
    assert str(raised.value) == f"COSMOS_ENDPOINT: must be an https:// URL, got {endpoint[:80]!r}"


def test_a_malformed_key_is_described_by_its_length_only() -> None:
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, "COSMOS_KEY": "not-a-key"})

    assert str(raised.value) == "COSMOS_KEY: is not a base64 account key (9 characters)"


def test_a_resource_name_may_hold_any_other_character() -> None:
    settings = Settings.from_env({**VALID, "COSMOS_DATABASE": "X-Orders_2026.eu"})
    assert settings.cosmos_database == "X-Orders_2026.eu"
