"""The demo's and chaos's options, defined once: ``DemoOptions``'s fields are the command line.

Each field's metadata says how it is typed (``--seed``, ``--crash-rate`` ...: the field's name
with dashes, its type and default from the field; a ``bool`` that defaults to true is a
``--no-...`` switch), its help, and which command offers it (``demo``, ``chaos`` or both;
``quiet`` none: the tests' own). ``CHAOS`` is the same options at volume with every failure
mixed in. ``parse`` turns ``python -m local demo|chaos ...`` into the options.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

DEMO, CHAOS_COMMAND = "demo", "chaos"
BOTH = (DEMO, CHAOS_COMMAND)


def _option(
    default: Any,
    help: str | None = None,
    *,
    commands: tuple[str, ...] = BOTH,
    chaos_flag: str | None = None,
) -> Any:
    return field(
        default=default, metadata={"help": help, "commands": commands, "chaos_flag": chaos_flag}
    )


@dataclass
class DemoOptions:
    orders: int = _option(500, chaos_flag="--messages")
    seed: int = _option(7)
    concurrency: int = _option(16)
    duplicate_rate: float = _option(0.2)
    crash_rate: float = _option(0.05)
    lock_expiry_rate: float = _option(0.02)
    mismatch_rate: float = _option(0.02)
    poison_rate: float = _option(0.02)
    # chaos: 429/503/timeouts/resets below the Cosmos SDK
    transport_fault_rate: float = _option(0.0, commands=(CHAOS_COMMAND,))
    # of topic sends: accepted, then the worker dies before marking
    relay_crash_rate: float = _option(0.1)
    send_failure_rate: float = _option(0.1)  # of topic sends: refused with a timeout
    # Documents per relay invocation (the trigger's maxItemsPerInvocation). The real feed hands
    # over what accumulated since its last poll; the demo runs the relay after each phase, so a
    # smaller bound stands for the many small batches of a relay polling alongside the consumer.
    relay_batch: int = _option(
        20, "documents per relay invocation (the trigger's maxItemsPerInvocation)"
    )
    # Sends refused in a row by a disabled topic, in phase 1's relay.
    relay_stall: int = _option(
        0, "sends refused in a row by a disabled topic (a relay stall, retried)"
    )
    # Orders accepted while the relay's lease store is empty, its trigger then started "from
    # now": their events are left to the outbox watchdog.
    skipped_orders: int = _option(
        5,
        "orders whose events the change feed skips (lease started from now): the "
        "watchdog publishes them",
    )
    # Orders whose events the topic refuses until the operator's fix: parked, then listed and
    # republished with ``python -m ops parked``.
    parked_events: int = _option(
        1,
        "orders whose events the topic refuses until fixed: parked by the relay, then "
        "listed and republished with python -m ops parked",
    )
    outbox: bool = _option(True, "write the order alone", commands=(DEMO,))
    # chaos: bursts on one hot SKU: runs of orders next to each other in the stream, each of
    # them with a line of that SKU (local.scenarios.orders.hot_sku_bursts)
    hot_sku_bursts: int = _option(
        0, "bursts of orders sharing one hot SKU, sent together", commands=(CHAOS_COMMAND,)
    )
    hot_sku_burst: int = _option(40, "orders in each hot-SKU burst", commands=(CHAOS_COMMAND,))
    # chaos: orders that get 1-3 amendments and maybe a cancellation, mixed into the stream
    lifecycle_rate: float = _option(0.0, commands=(CHAOS_COMMAND,))
    inventory: bool = _option(
        True,
        "skip the inventory (stock seeded for the orders' SKUs, reserve_stock on the topic's "
        "inventory subscription, its table)",
    )
    payments: bool = _option(
        True,
        "skip the payments (capture_payment on the topic's payments subscription, the provider "
        "stand-in's ledger, its table)",
    )
    # python -m ops stock audit over the SKUs the inventory's table shows: one query per SKU,
    # scoped to its partition (the local server reads that partition only:
    # local/standins/cosmos_partition_index.js), so chaos runs it too.
    stock_audit: bool = _option(
        True,
        "skip python -m ops stock audit over the SKUs the inventory's table shows",
        commands=(DEMO,),
    )
    # chaos: the share of customers whose payments go to a provider that honours no
    # Idempotency-Key (local.scenarios.payments.keyless_customers); the app then treats every
    # request as unhonoured (PAYMENT_PROVIDER_IDEMPOTENCY_KEYS=ignored)
    keyless_customer_rate: float = _option(
        0.0,
        "share of customers whose provider honours no Idempotency-Key",
        commands=(CHAOS_COMMAND,),
    )
    # One customer's card declined by the provider (every order of theirs).
    declined_card: bool = _option(True, "decline no card")
    # The provider's own faults on its first requests: this many of each kind.
    provider_faults: int = _option(
        2,
        "provider faults on its first requests, this many of each: a timeout after it "
        "committed, a 503 after it committed, a 503 before",
    )
    # The orders API's phase (local.scenarios.api): orders a seeded client places, amends and
    # cancels through the HTTP host, and the share of its intents whose first attempt meets
    # trouble (a lost answer, a 409 in progress, a 503).
    api: bool = _option(
        True,
        "skip the orders API phase (a client's places, amendments and cancellations through "
        "the HTTP host, retried with the same Idempotency-Key; on a world of its own)",
    )
    api_orders: int = _option(12, "orders the API phase's client places")
    api_trouble_rate: float = _option(
        0.5, "share of the API phase's intents whose first attempt meets trouble"
    )
    lifecycle: bool = _option(
        True,
        "skip the lifecycle scenario (amendments and cancellations out of order, on a world of "
        "its own)",
    )
    cosmos_endpoint: str | None = _option(
        None,
        "a real Cosmos DB account or emulator instead of the local server",
        commands=(DEMO,),
    )
    cosmos_key: str | None = _option(
        None,
        "account key (default: $COSMOS_KEY); omit both to use DefaultAzureCredential",
        commands=(DEMO,),
    )
    verify_tls: bool = _option(
        True, "accept a self-signed certificate (the Cosmos DB emulator)", commands=(DEMO,)
    )
    quiet: bool = _option(False, commands=())
    # ``python -m ops`` arguments run over the demo's data at the end, before the audit; ""
    # skips it (and make chaos skips it: not at volume).
    dead_letters: str = _option(
        "list",
        "python -m ops arguments run over the demo's data at the end, before the audit "
        '(default "list"; e.g. "show <MessageId>", "resubmit --reason X --dry-run"; "" skips)',
        commands=(DEMO,),
    )


# 5,000 orders: with the stock reservation and the payment capture downstream (about 80 ms of
# this machine's time per order on top of the orders' own), about as long as 10,000 orders took
# without them; --messages 10000 for the old volume.
CHAOS = DemoOptions(
    orders=5_000,
    duplicate_rate=0.2,
    crash_rate=0.05,
    lock_expiry_rate=0.02,
    mismatch_rate=0.01,
    poison_rate=0.01,
    transport_fault_rate=0.05,
    relay_crash_rate=0.1,
    send_failure_rate=0.1,
    relay_stall=30,
    skipped_orders=20,
    lifecycle_rate=0.2,
    hot_sku_bursts=3,
    keyless_customer_rate=0.3,
    provider_faults=10,
    api_orders=300,
    api_trouble_rate=0.2,
    dead_letters="",
)


def add_options(parser: argparse.ArgumentParser, command: str) -> None:
    """The command's options, from ``DemoOptions``'s fields (defaults: ``CHAOS``'s for chaos)."""
    defaults = CHAOS if command == CHAOS_COMMAND else DemoOptions()
    for option in dataclasses.fields(DemoOptions):
        if command not in option.metadata["commands"]:
            continue
        name = option.name
        default = getattr(defaults, name)
        flag = (command == CHAOS_COMMAND and option.metadata["chaos_flag"]) or "--" + name.replace(
            "_", "-"
        )
        if name == "cosmos_key":
            default = os.environ.get("COSMOS_KEY") or None
        if isinstance(default, bool):
            parser.add_argument(
                f"--no-{name.replace('_', '-')}",
                dest=name,
                action="store_false",
                help=option.metadata["help"],
            )
            continue
        parser.add_argument(
            flag,
            dest=name,
            type=type(default) if default is not None else str,
            default=default,
            help=option.metadata["help"],
            metavar="ARGS" if name == "dead_letters" else None,
        )


def parse(argv: list[str], description: str | None = None) -> DemoOptions:
    """``demo ...`` or ``chaos ...`` -> the options (those a command does not offer: its
    defaults)."""
    parser = argparse.ArgumentParser(prog="python -m local", description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    add_options(commands.add_parser(DEMO, help="the whole flow offline"), DEMO)
    add_options(
        commands.add_parser(CHAOS_COMMAND, help="every failure mixed in, at volume (make chaos)"),
        CHAOS_COMMAND,
    )
    arguments = vars(parser.parse_args(argv))
    defaults = CHAOS if arguments.pop("command") == CHAOS_COMMAND else DemoOptions()
    return dataclasses.replace(defaults, **arguments)
