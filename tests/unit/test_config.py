"""App settings: an invalid one fails with its name, before any request is made."""

from __future__ import annotations

import pytest

from local.cosmos_server import EMULATOR_KEY
from shared.config import Settings
from shared.errors import ConfigurationError

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
