"""``python -m local``: the local stand-ins' command line.

- ``demo``: the whole flow offline (``make demo``): the orders, the relay, the inventory and the
  payments downstream, the order lifecycle, each with its table (``local/scenarios/``);
- ``chaos``: the same with every failure mixed in, 5,000 messages by default (``make chaos``).

``send`` (sample orders to a REAL Service Bus namespace or the Service Bus emulator) and
``init-cosmos`` (the database, the orders and the leases containers) work against real
services: they are the operator tool's, ``python -m ops send`` and ``python -m ops
init-cosmos``; ``python -m local send`` and ``python -m local init-cosmos`` run them, with the
same options, for the scripts that call them so.
"""

from __future__ import annotations

import os
import sys

# gRPC core's own info lines (the settlement channel's GOAWAY when the demo's host stops) are
# noise on the demo's console; gRPC reads this when it is first imported: errors only, unless
# the user sets it.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from local.scenarios import demo, options  # after the line above

OPERATOR_COMMANDS = ("send", "init-cosmos")  # python -m ops's, reachable here too


def main(argv: list[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in OPERATOR_COMMANDS:
        from ops.cli import main as operator_tool

        return operator_tool(arguments)
    return demo.main(options.parse(arguments, __doc__))


if __name__ == "__main__":
    sys.exit(main())
