"""App settings: an invalid one fails with its name, before any request is made."""

from __future__ import annotations

import pytest
from idempotent_consumer import ConfigurationError

from local.standins.cosmos_server import EMULATOR_KEY
from shared.config import Settings

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


# A key of the Keys blade's shape (base64 of 64 bytes), made up here.
PASTED_KEY = "Zm9yZ2VkLWtleS1tYXRlcmlhbC1ub3QtYS1yZWFsLWFjY291bnQta2V5LTAxMjM0NTY3ODk="


@pytest.mark.parametrize(
    "pasted",
    [
        f"AccountEndpoint=https://acct.documents.azure.com:443/;AccountKey={PASTED_KEY};",
        f"accountkey={PASTED_KEY};AccountEndpoint=https://acct.documents.azure.com:443/",
        f"https://acct.documents.azure.com:443/;AccountKey={PASTED_KEY}",
    ],
    ids=["as-copied", "key-first", "url-then-key"],
)
def test_a_connection_string_in_the_endpoint_is_named_as_such_and_shown_not_at_all(
    pasted: str,
) -> None:
    """The portal's connection string pasted for the URL: with the 80 characters echoed before,
    8 to 17 characters of the account key reached the critical log (issue 36, finding 8)."""
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, "COSMOS_ENDPOINT": pasted})

    assert raised.value.setting == "COSMOS_ENDPOINT"
    assert "looks like a connection string" in str(raised.value)
    shown = str(raised.value)
    assert [part for part in ("acct", PASTED_KEY[:4], "AccountKey=") if part in shown] == []


@pytest.mark.parametrize(
    ("endpoint", "shown"),
    [
        ("http://" + "a" * 100, "'http://" + "a" * 100 + "'"),
        ("http://acct.example:8081/?sig=S3cr3t", "'http://acct.example'"),
        ("https://admin:S3cr3t@acct.example:8081/path", "'https://acct.example'"),
        ("https://S3cr3t@[::1]:8081/", "'https://::1'"),
        ("ftp://acct.example/S3cr3t", "'ftp://acct.example'"),
        ("acct.documents.azure.com/S3cr3t", "a value that is not a URL (31 characters)"),
        ("https://[S3cr3t/", "a value that is not a URL (16 characters)"),
        ("https://acct.example:99999/S3cr3t", "a value that is not a URL (33 characters)"),
        ("https://acct example/S3cr3t", "a https:// URL whose host is not a host name"),
        ("https:///S3cr3t", "a value that is not a URL (15 characters)"),
    ],
    ids=[
        "not-https",
        "query",
        "userinfo",
        "userinfo-ipv6",
        "other-scheme",
        "no-scheme",
        "bad-ipv6",
        "bad-port",
        "bad-host",
        "no-host",
    ],
)
def test_a_bad_endpoint_is_named_and_shown_by_its_scheme_and_host_only(
    endpoint: str, shown: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, "COSMOS_ENDPOINT": endpoint})

    assert raised.value.setting == "COSMOS_ENDPOINT"
    assert str(raised.value) == (
        f"COSMOS_ENDPOINT: must be an https:// URL with a host and no user information, got {shown}"
    )
    assert "S3cr3t" not in str(raised.value)


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://localhost:8081/",
        "https://LOCALHOST:8081/",
        "https://127.0.0.1:8081/",
        "https://127.10.20.30:8081/",
        "https://[::1]:8081/",
    ],
)
def test_tls_verification_may_be_off_for_a_loopback_endpoint(endpoint: str) -> None:
    """The local server's and the emulator's self-signed certificates, on this machine."""
    settings = Settings.from_env(
        {**VALID, "COSMOS_ENDPOINT": endpoint, "COSMOS_VERIFY_TLS": "false"}
    )

    assert settings.cosmos_verify_tls is False


@pytest.mark.parametrize(
    ("endpoint", "host"),
    [
        ("https://acct.documents.azure.com:443/", "acct.documents.azure.com"),
        ("https://10.0.0.4:8081/", "10.0.0.4"),
        ("https://localhost.evil.example/", "localhost.evil.example"),
        ("https://[::2]:8081/", "::2"),
    ],
)
def test_tls_verification_off_for_any_other_endpoint_is_a_configuration_error(
    endpoint: str, host: str
) -> None:
    """Unverified, the account key or a managed identity's token goes to whoever answers for
    the host (issue 36, finding 9)."""
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, "COSMOS_ENDPOINT": endpoint, "COSMOS_VERIFY_TLS": "no"})

    assert raised.value.setting == "COSMOS_VERIFY_TLS"
    assert str(raised.value) == (
        "COSMOS_VERIFY_TLS: may be false only for a loopback endpoint (localhost, 127.0.0.0/8, "
        f"::1), and COSMOS_ENDPOINT's host {host!r} is not one"
    )
    verified = Settings.from_env({**VALID, "COSMOS_ENDPOINT": endpoint})
    assert verified.cosmos_verify_tls is True


def test_a_malformed_key_is_described_by_its_length_only() -> None:
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, "COSMOS_KEY": "not-a-key"})

    assert str(raised.value) == "COSMOS_KEY: is not a base64 account key (9 characters)"


def test_a_resource_name_may_hold_any_other_character() -> None:
    settings = Settings.from_env({**VALID, "COSMOS_DATABASE": "X-Orders_2026.eu"})
    assert settings.cosmos_database == "X-Orders_2026.eu"


# ---- inbox markers' retention ------------------------------------------------------------------

TTL = "INBOX_MARKER_TTL_SECONDS"
REDELIVERY = "INBOX_REDELIVERY_HORIZON_SECONDS"
REPLAY = "DEAD_LETTER_REPLAY_HORIZON_SECONDS"
DAY = 86_400
# PT1M x 10 deliveries + P14D time-to-live (infra/messaging.json), + P14D of dead-letter replay.
DEFAULT_WINDOW = 60 * 10 + 14 * DAY + 14 * DAY


def test_unset_the_marker_window_is_what_the_bicep_deploys_by_default() -> None:
    assert Settings.from_env(VALID).inbox_marker_ttl_s == DEFAULT_WINDOW == 2_419_800
    assert Settings.from_env(
        {**VALID, TTL: " ", REDELIVERY: "", REPLAY: ""}
    ).inbox_marker_ttl_s == (DEFAULT_WINDOW)


def test_a_window_at_or_above_the_two_horizons_is_used_as_set() -> None:
    assert Settings.from_env({**VALID, TTL: str(DEFAULT_WINDOW)}).inbox_marker_ttl_s == (
        DEFAULT_WINDOW
    )
    assert Settings.from_env({**VALID, TTL: " 3000000 "}).inbox_marker_ttl_s == 3_000_000
    # Cosmos DB's largest ttl (learn.microsoft.com/azure/cosmos-db/nosql/time-to-live).
    assert Settings.from_env({**VALID, TTL: str(2**31 - 1)}).inbox_marker_ttl_s == 2**31 - 1


def test_unset_the_window_is_the_sum_of_the_horizons_as_set() -> None:
    env = {**VALID, REDELIVERY: "1000", REPLAY: str(30 * DAY)}
    assert Settings.from_env(env).inbox_marker_ttl_s == 1000 + 30 * DAY
    # No replay at all: the markers outlive what the queue can redeliver, no more.
    assert Settings.from_env({**VALID, REPLAY: "0"}).inbox_marker_ttl_s == 60 * 10 + 14 * DAY


@pytest.mark.parametrize(
    ("env", "floor"),
    [
        ({TTL: str(DEFAULT_WINDOW - 1)}, DEFAULT_WINDOW),
        ({TTL: str(14 * DAY)}, DEFAULT_WINDOW),  # the message's time-to-live alone
        ({TTL: str(DEFAULT_WINDOW), REPLAY: str(30 * DAY)}, 60 * 10 + 14 * DAY + 30 * DAY),
        ({TTL: "1000", REDELIVERY: "1000", REPLAY: "1"}, 1001),
    ],
    ids=["a second short", "queue ttl only", "replay lengthened", "own horizons"],
)
def test_a_window_shorter_than_the_two_horizons_names_the_window_setting(
    env: dict[str, str], floor: int
) -> None:
    # A marker that expires while the queue or an operator can still bring its message back
    # turns that redelivery into a first delivery: refused at start-up, not found in production.
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, **env})

    assert raised.value.setting == TTL
    assert str(raised.value).startswith(f"{TTL}: must be at least {REDELIVERY} + {REPLAY} = ")
    assert str(raised.value).endswith(f" = {floor}, got {env[TTL]}")


@pytest.mark.parametrize("setting", [TTL, REDELIVERY, REPLAY])
@pytest.mark.parametrize("value", ["28d", "P28D", "2.4e6", "1 000", "ten"])
def test_a_retention_setting_that_is_not_an_integer_names_the_setting(
    setting: str, value: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, setting: value})

    assert raised.value.setting == setting
    assert str(raised.value) == f"{setting}: must be an integer, got {value!r}"


@pytest.mark.parametrize(
    ("env", "named", "value"),
    [
        ({TTL: str(2**31)}, TTL, 2**31),
        ({REDELIVERY: str(2**31)}, REDELIVERY, 2**31),
        ({REPLAY: str(2**31)}, REPLAY, 2**31),
        # Each horizon fits, their sum does not: the unset window would be refused by Cosmos DB.
        ({REDELIVERY: str(2**30), REPLAY: str(2**30)}, TTL, 2**31),
    ],
    ids=["window", "redelivery", "replay", "sum of the horizons"],
)
def test_a_retention_above_cosmos_db_s_largest_ttl_names_the_setting(
    env: dict[str, str], named: str, value: int
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, **env})

    assert raised.value.setting == named
    assert str(raised.value) == f"{named}: must be at most {2**31 - 1}, got {value}"


@pytest.mark.parametrize(
    ("setting", "value", "minimum"),
    [(TTL, "0", 1), (TTL, "-1", 1), (REDELIVERY, "0", 1), (REPLAY, "-1", 0)],
)
def test_a_retention_below_its_minimum_names_the_setting(
    setting: str, value: str, minimum: int
) -> None:
    # ttl -1 would mean "never expires" to Cosmos DB, 0 is refused by it.
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**VALID, setting: value})

    assert raised.value.setting == setting
    assert str(raised.value) == f"{setting}: must be at least {minimum}, got {value}"


def test_the_cores_default_marker_window_is_the_apps_default_setting() -> None:
    """The core's default (tests, benchmarks) may not drift from the app's (the Bicep's)."""
    from shared.config import DEFAULT_INBOX_MARKER_TTL_S
    from shared.consumer.core import DEFAULT_MARKER_TTL_S

    assert DEFAULT_MARKER_TTL_S == DEFAULT_INBOX_MARKER_TTL_S
