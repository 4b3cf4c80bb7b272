"""``python -m ops payments ...``: the payment capture's parked calls (``ops.payments``), their
arguments, the adapters they run on and what they print. The payments container is
``--payments-container`` (the app setting ``PAYMENTS_CONTAINER``, default ``payments``) in the
account and database of the global ``--cosmos-*`` options; the provider is the app's own
adapter (``shared.adapters.payment_provider``) on the app's settings
``PAYMENT_PROVIDER_BASE_URL``, ``PAYMENT_PROVIDER_API_KEY`` (in Azure a Key Vault secret, never a
command-line argument: docs/operations.md says how to read it) and
``PAYMENT_PROVIDER_IDEMPOTENCY_KEYS``.

- ``payments parked``: every parked call (order, message, operation, amount, key, startedAt)
  with what the provider's lookup says now; one cross-partition query, its charge printed;
- ``payments resolve ORDER_ID --happened | --did-not-happen [--force] [--provider-id ID]``:
  record the operator's word (``ops.payments.resolve``); exit 1 when it is refused (the
  provider disagrees), when the order has no parked call, or when its state moved meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from idempotent_consumer import StoreError
from rich.console import Console
from rich.table import Table

from ops.payments import ParkedPayment, Resolution, parked_payments, resolve
from shared.config import DEFAULT_INBOX_MARKER_TTL_S, INBOX_MARKER_TTL_SETTING

BASE_URL_SETTING = "PAYMENT_PROVIDER_BASE_URL"
API_KEY_SETTING = "PAYMENT_PROVIDER_API_KEY"
KEYS_SETTING = "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS"
KEY_MODES = {"honoured": True, "ignored": False}


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = os.environ.get
    payments = commands.add_parser(
        "payments", help="payment calls parked for reconciliation: parked, resolve"
    )
    payments.add_argument("--payments-container", default=env("PAYMENTS_CONTAINER", "payments"))
    payments.add_argument(
        "--provider-url", default=env(BASE_URL_SETTING), help=f"default: ${BASE_URL_SETTING}"
    )
    actions = payments.add_subparsers(dest="payments_command", required=True)
    listing = actions.add_parser(
        "parked", help="every parked call, with what the provider's lookup says now"
    )
    listing.add_argument("--json", action="store_true")
    resolving = actions.add_parser(
        "resolve", help="record what happened to one order's parked call at the provider"
    )
    resolving.add_argument("order_id", metavar="ORDER_ID")
    word = resolving.add_mutually_exclusive_group(required=True)
    word.add_argument(
        "--happened", action="store_true", help="the money moved: complete the call as recorded"
    )
    word.add_argument(
        "--did-not-happen",
        action="store_true",
        help="no money moved, and none will: clear it, the resubmitted event calls again",
    )
    resolving.add_argument(
        "--force", action="store_true", help="record your word although the provider disagrees"
    )
    resolving.add_argument(
        "--provider-id",
        help="--happened, when the lookup cannot find it: the provider's operation id",
    )
    resolving.add_argument("--json", action="store_true")


@dataclass(frozen=True)
class ProviderSettings:
    base_url: str
    api_key: str
    honours_keys: bool


def provider_settings(args: argparse.Namespace) -> ProviderSettings:
    """The provider as the app reaches it; a usage error (``ValueError``) naming what is unset."""
    api_key = os.environ.get(API_KEY_SETTING, "")
    mode = os.environ.get(KEYS_SETTING, "honoured").strip().lower()
    if not args.provider_url or not api_key:
        raise ValueError(
            f"payments needs the provider: set {BASE_URL_SETTING} (or --provider-url) and "
            f"{API_KEY_SETTING} (docs/operations.md, Payment capture)"
        )
    if mode not in KEY_MODES:
        raise ValueError(f"{KEYS_SETTING} must be honoured or ignored, not {mode!r}")
    return ProviderSettings(args.provider_url, api_key, KEY_MODES[mode])


def marker_ttl_s() -> int:
    """The inbox markers' ttl, as the app sets it (the consumer's markers and the tool's alike)."""
    value = os.environ.get(INBOX_MARKER_TTL_SETTING)
    try:
        return int(value) if value else DEFAULT_INBOX_MARKER_TTL_S
    except ValueError:
        raise ValueError(f"{INBOX_MARKER_TTL_SETTING} is not an integer: {value!r}") from None


def run(args: argparse.Namespace, console: Console, now: datetime) -> int:
    """Exit 0: done; 1: refused, not parked or moved; 2 (``ValueError`` or a connection error,
    by the caller): a usage or connection error."""
    if not args.cosmos_endpoint:
        raise ValueError("payments needs the payments container (--cosmos-endpoint)")
    settings = provider_settings(args)
    ttl = marker_ttl_s()
    try:
        return asyncio.run(_run(args, settings, ttl, console, now))
    except StoreError as error:  # the store adapter's, classified: nothing to report
        console.print(f"error: the payments container: {type(error).__name__}: {error}")
        return 2


async def _run(
    args: argparse.Namespace,
    settings: ProviderSettings,
    ttl: int,
    console: Console,
    now: datetime,
) -> int:
    from azure.cosmos.aio import CosmosClient
    from idempotent_consumer.cosmos import CosmosDocumentStore

    from ops.cosmos_payments import CosmosParkedStates
    from shared.adapters.payment_provider import HttpPaymentProvider

    credential: Any = args.cosmos_key
    if not credential:
        from azure.identity.aio import DefaultAzureCredential

        credential = DefaultAzureCredential()
    try:
        async with (
            CosmosClient(
                args.cosmos_endpoint,
                credential=credential,
                connection_verify=not args.no_verify_tls,
            ) as client,
            HttpPaymentProvider(
                settings.base_url, settings.api_key, honours_idempotency_keys=settings.honours_keys
            ) as provider,
        ):
            container = client.get_database_client(args.cosmos_database).get_container_client(
                args.payments_container
            )
            if args.payments_command == "parked":
                listed, charge = await parked_payments(CosmosParkedStates(container), provider)
                return _print_parked(listed, charge, console, as_json=args.json)
            resolution = await resolve(
                CosmosDocumentStore(container),
                provider,
                args.order_id,
                happened=args.happened,
                force=args.force,
                provider_id=args.provider_id,
                marker_ttl_s=ttl,
                now=now,
            )
            return _print_resolution(resolution, console, as_json=args.json)
    finally:
        if credential is not args.cosmos_key:
            await credential.close()


def _row(parked: ParkedPayment) -> dict[str, Any]:
    return {
        "orderId": parked.order_id,
        "messageId": parked.message_id,
        "messageType": parked.message_type,
        "version": parked.version,
        "operation": parked.operation,
        "amountMinor": parked.amount_minor,
        "currency": parked.currency,
        "key": parked.key,
        "startedAt": parked.started_at,
        "capturedMinor": parked.captured_minor,
        "provider": parked.provider.said.value,
        "providerDetail": parked.provider.detail,
    }


def _print_parked(
    listed: list[ParkedPayment], charge: float, console: Console, *, as_json: bool
) -> int:
    if as_json:
        console.print_json(
            json.dumps({"parked": [_row(p) for p in listed], "requestCharge": charge})
        )
        return 0
    table = Table(
        "orderId", "message", "operation", "amount", "key", "startedAt", "captured", "provider"
    )
    for parked in listed:
        table.add_row(
            parked.order_id,
            f"{parked.message_type} v{parked.version} {parked.message_id}",
            parked.operation,
            f"{parked.amount_minor} {parked.currency}",
            parked.key,
            parked.started_at,
            str(parked.captured_minor),
            f"{parked.provider.said}: {parked.provider.detail}",
        )
    console.print(table)
    console.print(
        f"{len(listed)} parked payment call(s); one cross-partition query: {charge:.2f} RU"
    )
    if listed:
        console.print(
            "establish what happened at the provider, then: python -m ops payments resolve "
            "ORDER_ID --happened | --did-not-happen (docs/operations.md)"
        )
    return 0


def _print_resolution(resolution: Resolution, console: Console, *, as_json: bool) -> int:
    code = 0 if resolution.done else 1
    if as_json:
        row = {
            "orderId": resolution.order_id,
            "verdict": resolution.verdict.value,
            "detail": resolution.detail,
            "parked": _row(resolution.parked) if resolution.parked else None,
        }
        console.print_json(json.dumps(row))
        return code
    if resolution.parked is not None:
        parked = resolution.parked
        console.print(
            f"order {parked.order_id}: {parked.operation} {parked.amount_minor} "
            f"{parked.currency} of {parked.message_type} v{parked.version} "
            f"{parked.message_id} (key {parked.key}, started {parked.started_at}); provider: "
            f"{parked.provider.said}: {parked.provider.detail}"
        )
    console.print(f"{resolution.verdict}: {resolution.detail}")
    return code
