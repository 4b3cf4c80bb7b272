"""How every scenario's tables look: its figures (name, value), its invariants (name, PASS or
FAIL, who checks it, the detail), and a ``python -m ops`` run over its data. Rendering only:
computes nothing, reads nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from local.scenarios.invariants import Row
from local.scenarios.tool_runs import ToolRun


def figures_table(
    title: str, figures: Mapping[str, int], more: Iterable[tuple[str, int]] = ()
) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in [*figures.items(), *more]:
        table.add_row(name, str(value))
    return table


def invariants_table(title: str, rows: Sequence[Row], caption: str | None = None) -> Table:
    table = Table(title=title, caption=caption)
    table.add_column("invariant")
    table.add_column("result")
    table.add_column("checked by")
    table.add_column("detail")
    for row in rows:
        check = row.invariant
        verdict = "[green]PASS[/green]" if check.passed else "[red]FAIL[/red]"
        table.add_row(check.name, verdict, row.checked_by, check.detail)
    return table


def print_tool_run(run: ToolRun, console: Console) -> None:
    """``python -m ops ...`` as the operator typed it, its exit status, what it printed."""
    console.print(
        f"[bold]$ {escape(run.command)}[/bold]  [dim](exit {run.exit_status})[/dim]",
        highlight=False,
    )
    console.out(run.output.rstrip(), highlight=False)
