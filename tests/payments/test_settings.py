"""The payment capture's app settings (``shared.config.PaymentSettings``): what each one accepts,
and that a bad one is a ``ConfigurationError`` naming the setting, never showing the credential."""

from __future__ import annotations

import pytest
from idempotent_consumer import ConfigurationError

from shared.config import PaymentSettings

KEY = "sk-live-4f1c9a7e-never-shown"
ENV = {
    "ORDER_EVENTS_TOPIC_NAME": "order-events",
    "PAYMENTS_SUBSCRIPTION_NAME": "payments",
    "PAYMENT_PROVIDER_BASE_URL": "https://api.provider.example",
    "PAYMENT_PROVIDER_API_KEY": KEY,
}


def test_the_defaults_are_the_deployed_names_honoured_keys_and_ten_seconds() -> None:
    settings = PaymentSettings.from_env(ENV)

    assert settings == PaymentSettings(
        topic_name="order-events",
        subscription_name="payments",
        provider_base_url="https://api.provider.example",
        provider_api_key=KEY,
        container="payments",
        provider_honours_keys=True,
        provider_timeout_s=10.0,
    )
    assert KEY not in repr(settings)


@pytest.mark.parametrize(
    ("setting", "value", "honours", "timeout"),
    [
        ("PAYMENT_PROVIDER_IDEMPOTENCY_KEYS", "Ignored", False, 10.0),
        ("PAYMENT_PROVIDER_IDEMPOTENCY_KEYS", "honoured", True, 10.0),
        ("PAYMENT_PROVIDER_TIMEOUT_SECONDS", "2.5", True, 2.5),
    ],
)
def test_the_key_mode_and_the_timeout_are_read(
    setting: str, value: str, honours: bool, timeout: float
) -> None:
    settings = PaymentSettings.from_env({**ENV, setting: value})

    assert (settings.provider_honours_keys, settings.provider_timeout_s) == (honours, timeout)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:7081", "http://localhost:7081/", "http://[::1]:7081", "http://127.0.0.2"],
)
def test_plain_http_is_accepted_to_a_loopback_host_only(url: str) -> None:
    # The local stand-in serves no TLS; a loopback request never leaves the machine.
    assert PaymentSettings.from_env({**ENV, "PAYMENT_PROVIDER_BASE_URL": url}).provider_base_url


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("PAYMENT_PROVIDER_BASE_URL", "http://api.provider.example"),
        ("PAYMENT_PROVIDER_BASE_URL", "http://10.0.0.7:8080"),
        ("PAYMENT_PROVIDER_BASE_URL", f"https://merchant:{KEY}@api.provider.example"),
        ("PAYMENT_PROVIDER_BASE_URL", "ftp://api.provider.example"),
        ("PAYMENT_PROVIDER_BASE_URL", "api.provider.example"),
        ("PAYMENT_PROVIDER_BASE_URL", "https://api.provider.example:99999"),
        ("PAYMENT_PROVIDER_BASE_URL", "https://api.provider.example/v1"),  # joined: /v1/v1/...
        ("PAYMENT_PROVIDER_BASE_URL", "https://api.provider.example/?version=1"),
        ("PAYMENT_PROVIDER_BASE_URL", None),
        ("PAYMENT_PROVIDER_API_KEY", None),
        ("PAYMENT_PROVIDER_API_KEY", f"{KEY}\r\nX-Injected: 1"),
        (
            "PAYMENT_PROVIDER_API_KEY",
            "@Microsoft.KeyVault(SecretUri=https://kv.vault.azure.net/secrets/payment-provider-api-key/)",
        ),
        ("PAYMENT_PROVIDER_IDEMPOTENCY_KEYS", "sometimes"),
        ("PAYMENT_PROVIDER_TIMEOUT_SECONDS", "0"),
        ("PAYMENT_PROVIDER_TIMEOUT_SECONDS", "nan"),
        ("PAYMENT_PROVIDER_TIMEOUT_SECONDS", "45"),
        ("PAYMENT_PROVIDER_TIMEOUT_SECONDS", "ten"),
        ("PAYMENT_PROVIDER_PROCESSING_BOUND_SECONDS", "-1"),
        ("PAYMENT_PROVIDER_PROCESSING_BOUND_SECONDS", "301"),  # past what redeliveries wait out
        ("PAYMENT_PROVIDER_PROCESSING_BOUND_SECONDS", "inf"),
        ("PAYMENT_PROVIDER_PROCESSING_BOUND_SECONDS", "soon"),
        ("PAYMENTS_SUBSCRIPTION_NAME", None),
        ("PAYMENTS_SUBSCRIPTION_NAME", "order-events/subscriptions/payments"),
        ("PAYMENTS_CONTAINER", "not/a/container"),
        ("ORDER_EVENTS_TOPIC_NAME", None),
    ],
)
def test_a_bad_setting_is_a_configuration_error_naming_it_and_never_showing_the_key(
    setting: str, value: str | None
) -> None:
    env = {name: v for name, v in ENV.items() if name != setting}
    if value is not None:
        env[setting] = value

    with pytest.raises(ConfigurationError) as raised:
        PaymentSettings.from_env(env)

    assert raised.value.setting == setting
    assert str(raised.value).startswith(f"{setting}: ")
    assert KEY not in str(raised.value)


@pytest.mark.parametrize(("raw", "bound"), [(None, None), ("0", 0.0), ("2.5", 2.5), ("300", 300.0)])
def test_the_processing_bound_is_unset_or_within_what_redeliveries_wait_out(
    raw: str | None, bound: float | None
) -> None:
    env = dict(ENV) if raw is None else {**ENV, "PAYMENT_PROVIDER_PROCESSING_BOUND_SECONDS": raw}

    assert PaymentSettings.from_env(env).provider_processing_bound_s == bound
