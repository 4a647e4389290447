"""`zync dev up|down|status`: the embedded Kafka broker and Schema Registry."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from engine.api import ComponentStatus

#: engine.api.DEV_READY_TIMEOUT and DEV_STOP_TIMEOUT, written out so that `zync --help`
#: need not import the engine (a unit test checks they agree)
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0

app = typer.Typer(
    help=(
        "Run an Apache Kafka broker (KRaft) and a Schema Registry on 127.0.0.1 for "
        "development. State, logs, the broker's topics and the registry database live in "
        "~/.zync/dev ($ZYNC_HOME/dev) and survive `zync dev down`."
    ),
    no_args_is_help=True,
)

_out = Console(highlight=False)
_err = Console(stderr=True, highlight=False)


def _fail(exc: Exception) -> typer.Exit:
    _err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
    return typer.Exit(1)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**20:.0f} MiB" if n < 2**30 else f"{n / 2**30:.1f} GiB"


def _table(components: tuple[ComponentStatus, ...] | list[ComponentStatus]) -> Table:
    table = Table(title="zync dev stack", title_justify="left")
    for column in ("component", "address", "pid", "healthy", "memory", "detail"):
        table.add_column(column)
    for c in components:
        table.add_row(
            c.component,
            c.address or "-",
            str(c.pid) if c.pid is not None else "-",
            "[green]yes[/]" if c.healthy else "[red]no[/]",
            _size(c.memory_bytes),
            escape(c.detail),
        )
    return table


def _notes(notes: tuple[str, ...]) -> None:
    for note in notes:
        _out.print(f"• {escape(note)}", soft_wrap=True)


@app.command()
def up(
    broker_port: Annotated[
        int | None,
        typer.Option(help="Broker port (default 9092, or a free port when 9092 is taken)."),
    ] = None,
    registry_port: Annotated[
        int | None,
        typer.Option(help="Registry port (default 8081, or a free port when 8081 is taken)."),
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for each component to answer.")
    ] = READY_TIMEOUT,
) -> None:
    """Start the broker and the registry (nothing happens for parts already running).

    Writes ~/.zync/kafka.json and ~/.zync/schema_registry.json unless they point at another cluster, which is kept as it is.
    """
    # engine.api loads pyarrow, delta-rs and Kafka: imported when a command runs, so
    # `zync --help` stays fast (likewise in every command module)
    from engine.api import ZyncError, dev_up

    try:
        report = dev_up(broker_port, registry_port, timeout=timeout)
    except ZyncError as exc:
        raise _fail(exc) from None
    _notes(report.notes)
    _out.print(_table(report.components))


@app.command()
def down(
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait after SIGTERM before SIGKILL.")
    ] = STOP_TIMEOUT,
) -> None:
    """Stop the broker and the registry started by `zync dev up` (their data is kept).

    Removes the profiles `zync dev up` wrote, unless they were changed since.
    """
    from engine.api import ZyncError, dev_down

    try:
        report = dev_down(timeout=timeout)
    except ZyncError as exc:
        raise _fail(exc) from None
    _notes(report.notes)


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Show each component's address, PID, health and memory.

    Exits with 1 when a component is not running or not healthy.
    """
    from engine.api import ZyncError, dev_status

    try:
        components = dev_status()
    except ZyncError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps([c.to_json() for c in components], indent=2))
    else:
        _out.print(_table(components))
    if not all(c.healthy for c in components):
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
