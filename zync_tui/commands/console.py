"""`zync tui` and `zync demo`: the operations console and the invoice demo."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from zync_tui.errors import user_errors
from zync_tui.shared_options import SparkMasterOption

if TYPE_CHECKING:
    from zync_tui.console.app import ZyncConsole


def tui(
    config: Annotated[
        Path | None,
        typer.Argument(help="An ETL configuration (YAML): its topics, pools and loops are shown."),
    ] = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Inspect only: no start, stop or ETL pass (for on-call).")
    ] = False,
    lake: Annotated[
        str | None,
        typer.Option("--lake", help="The lake: a directory or s3://BUCKET/PREFIX (default $ZYNC_LAKE or ~/.zync/lake)."),
    ] = None,
    paused: Annotated[
        bool, typer.Option("--paused", help="Do not start the loops when the console opens.")
    ] = False,
    spark_master: SparkMasterOption = None,
    attach: Annotated[
        list[str] | None,
        typer.Option(
            "--attach",
            metavar="SOCKET|URL",
            help="Show running zync processes instead of starting loops: a Unix socket "
            "(~/.zync/run/*.sock) or an API URL (http://host:9464); repeatable — the "
            "`zync run --only ...` processes of one pipeline show as one. Over TCP, control "
            "needs the token ($ZYNC_CONTROL_TOKEN or --control-token-file).",
            show_default=False,
        ),
    ] = None,
    control_token_file: Annotated[
        Path | None,
        typer.Option("--control-token-file", metavar="FILE", help="The API token for --attach URLs.", show_default=False),
    ] = None,
) -> None:
    """Open the operations console: offsets, lag, cursors, pending/expired, loops.

    Shows the pipeline live and lets you start and stop the loops (from-kafka, ETL,
    to-kafka) and run an ETL pass. `?` lists the keys. With CONFIG whose pipeline already
    runs on this machine (`zync run`), the console attaches to it instead of starting
    loops of its own.
    """
    from engine.api import ZyncError, load_token
    from zync_tui.console.app import make_app
    from zync_tui.errors import fail

    if config is not None and not config.exists():
        raise fail(f"{config}: no such ETL configuration file")
    targets = list(attach or [])
    if not targets and config is not None:
        targets = _running(config)
        if targets:
            typer.echo(f"attaching to the running {config}: {', '.join(targets)}", err=True)
    try:
        token = load_token(control_token_file) if targets else None
    except ZyncError as exc:
        raise fail(str(exc)) from None
    with _engine_output_to_log() as log:
        app = make_app(
            config, lake=lake, read_only=read_only, autostart=not paused, spark_master=spark_master,
            attach=targets or None, token=token,
        )  # fmt: skip
        _run(app)
    if log is not None:
        typer.echo(f"Spark's own output went to {log}.")


def _running(config: Path) -> list[str]:
    """The sockets of this machine's processes running ``config``'s pipeline."""
    from engine.api import (
        ApiClient,
        ApiError,
        api_run_dir,
        listening_sockets,
        load_config,
        zync_home,
    )

    try:
        name = load_config(config).name
    except Exception:  # noqa: BLE001 - the console says what is wrong with it
        return []
    found = []
    for path in listening_sockets(api_run_dir(zync_home())):
        client = ApiClient(str(path), timeout=2)
        try:
            process = client.status("process")["process"]
        except ApiError:
            continue
        finally:
            client.close()
        if process["pipeline"] == name and process["role"] != "console":
            found.append(str(path))
    return found


def demo(
    no_tui: Annotated[
        bool, typer.Option("--no-tui", help="Run the whole scenario headless and print the final tables.")
    ] = False,
    lake: Annotated[
        str | None,
        typer.Option("--lake", help="The demo's lake: a directory or s3://BUCKET/PREFIX (default ~/.zync/demo/lake)."),
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for each step of the headless run.")
    ] = 300.0,
    spark_master: SparkMasterOption = None,
) -> None:
    """Watch zync work: the invoice scenario on the embedded stack, in the console.

    Starts the embedded broker and registry, creates the Raw and Staging pools, loads
    the invoice scenario and opens the console; `n` publishes the next batch of Debezium
    events. `--no-tui` runs all four batches headless and prints the final tables.
    """
    if no_tui:
        _headless(lake, timeout, spark_master)
        return
    from zync_tui.console.app import make_app

    with _engine_output_to_log() as log:
        _run(make_app(demo=True, lake=lake, spark_master=spark_master))
    typer.echo("The embedded broker and registry keep running (the demo resumes where it was); `zync dev down` stops them.")
    if log is not None:
        typer.echo(f"Spark's own output went to {log}.")


@contextlib.contextmanager
def _engine_output_to_log() -> Iterator[Path | None]:
    """Keep the screen for the console: what the JVM (Spark) and other child processes
    write to stderr goes to ``<zync home>/console.log`` instead of over the panels.

    Textual draws on ``sys.__stderr__``: it gets a duplicate of the terminal's descriptor,
    and descriptor 2, which child processes inherit, is pointed at the log file.
    """
    # engine.api loads pyarrow, delta-rs and Kafka: imported when a command runs, so
    # `zync --help` stays fast (likewise in every command module)
    from engine.api import zync_home

    if not sys.stderr.isatty():
        yield None
        return
    path = zync_home() / "console.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log = open(path, "ab")  # noqa: SIM115 - closed below
    except OSError:
        yield None
        return
    saved = os.dup(2)
    terminal = os.fdopen(os.dup(2), "w", buffering=1, encoding=sys.stderr.encoding or "utf-8", errors="replace")
    old = (sys.stderr, sys.__stderr__)
    os.dup2(log.fileno(), 2)
    sys.stderr = sys.__stderr__ = terminal  # type: ignore[misc]  # Final in typeshed; redirected on purpose
    try:
        yield path
    finally:
        terminal.flush()
        os.dup2(saved, 2)
        os.close(saved)
        sys.stderr, sys.__stderr__ = old  # type: ignore[misc]  # Final in typeshed; restored
        terminal.close()
        log.close()


def _run(app: ZyncConsole) -> None:
    try:
        app.run()
    finally:
        with contextlib.suppress(Exception):  # the engine may be gone: nothing to say then
            if any(view.state not in ("not run", "unavailable") for view in app.backend.loops()):
                typer.echo("zync: stopping the loops (each finishes its commit in flight)…", err=True)
        app.backend.close()


def _headless(lake: str | None, timeout: float, spark_master: str | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from demo.scenario import Demo, run_demo

    out = Console(highlight=False)
    with user_errors():
        result = run_demo(
            Demo(lake_root=lake),
            timeout=timeout,
            progress=lambda text: out.print(f"• {escape(text)}"),
            spark_master=spark_master,
        )
    for title, rows in (("Staging: NewInvoices outputs", result.staging), ("Kafka topic NewInvoices", result.topic)):
        table = Table(title=title, title_justify="left")
        for column in ("offset", "key", "value"):
            table.add_column(column)
        for row in rows:
            table.add_row(str(row["offset"]), escape(_json(row["key"])), escape(_json(row["value"])))
        out.print(table)
    in_table = "no" if result.table is None else result.table.rows
    out.print(
        f"done in {result.seconds:.1f}s: {len(result.staging)} outputs in Staging, "
        f"{len(result.topic)} on NewInvoices, {in_table} rows in the invoices table "
        '(zync query "SELECT * FROM invoices")'
    )


def _json(value: Any) -> str:
    import json

    return "null (tombstone)" if value is None else json.dumps(value, separators=(", ", ": "))


def register(app: typer.Typer) -> None:
    """Add `zync tui` and `zync demo` to the CLI."""
    app.command("tui")(tui)
    app.command("demo")(demo)


def _main() -> None:
    standalone = typer.Typer(no_args_is_help=True, pretty_exceptions_show_locals=False)
    register(standalone)
    standalone()


if __name__ == "__main__":
    _main()
