"""`zync apply CONFIG`: keep the configuration's `tables:` as Delta tables, exactly once.

The lead's CLI adds it with :func:`register`; it also runs alone
(``python -m zync_tui.commands.apply apply CONFIG``).
"""

# No `from __future__ import annotations`: typer reads the annotations at import time.

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from zync_tui.commands import standalone_app
from zync_tui.commands.serving import (
    ApiOptions,
    HttpOption,
    Lines,
    LogFormat,
    LogFormatOption,
    NoApiOption,
    PublicReadOption,
    TokenFileOption,
    WedgedAfterOption,
    serving,
)
from zync_tui.errors import UserError, lake_errors
from zync_tui.long_running import staged_lake, status_line, stop_on_signals
from zync_tui.shared_options import LakeOption

if TYPE_CHECKING:
    from engine.api import EtlConfig, Lake

VersionsOption = Annotated[
    int | None,
    typer.Option(
        "--versions-per-commit",
        min=1,
        metavar="N",
        help="At most N staging versions per table commit (default 1000: a catch-up "
        "commits in large batches). 1 keeps a table version for every staging version "
        "that changed it, so `zync query --as-of-staging V` can read every V.",
        show_default=False,
    ),
]


def apply(
    config: Annotated[
        Path,
        typer.Argument(
            help="An ETL configuration (YAML) with `tables:`, e.g. demo/invoices/etl.yaml.",
            show_default=False,
        ),
    ],
    continuous: Annotated[
        bool,
        typer.Option(
            "--continuous",
            "-c",
            help="Keep running and apply each new staging commit, until Ctrl-C or SIGTERM "
            "(serving the API meanwhile).",
        ),
    ] = False,
    versions_per_commit: VersionsOption = None,
    lake: LakeOption = None,
    http: HttpOption = None,
    control_token_file: TokenFileOption = None,
    http_public_read: PublicReadOption = False,
    wedged_after: WedgedAfterOption = 300.0,
    no_api: NoApiOption = False,
    log_format: LogFormatOption = LogFormat.text,
) -> None:
    """Apply the staging pool's outputs to the configuration's tables, exactly once.

    Each entry of `tables:` is a Delta table (Change Data Feed on) kept from one output: the latest value per key (`history: false`), or every version with valid_from/valid_to/is_current (`history: true`). A record updates the columns its value carries and keeps the others; a tombstone deletes its key's row. Staging commits are applied in order, whole, each table commit holding its position (the last staging version applied) as a Delta txn action, so a restart, even after kill -9, applies nothing twice.

    Examples:
      zync apply demo/invoices/etl.yaml
      zync apply demo/invoices/etl.yaml -c --versions-per-commit 1
      zync query "SELECT * FROM invoices"
    """
    with lake_errors():
        api = ApiOptions(http, control_token_file, http_public_read, wedged_after, not no_api)
        _apply(config, continuous, versions_per_commit, lake, api, log_format)


def _apply(
    config: Path,
    continuous: bool,
    versions_per_commit: int | None,
    lake: str | None,
    api: ApiOptions,
    log_format: LogFormat,
) -> None:
    # deferred: engine.api loads pyarrow, delta-rs and polars
    from engine.api import ApplyService, Observer, ServedProcess, load_config

    if not config.is_file():
        raise UserError(f"{config}: no such ETL configuration file")
    etl = load_config(config)
    if not etl.tables:
        raise UserError(f"{config}: no `tables:` to apply")
    the_lake = staged_lake(lake)
    if not continuous:
        _apply_once(etl, the_lake, versions_per_commit)
        return
    lines = Lines(log_format, etl.name)
    service = ApplyService(
        etl, the_lake, versions_per_commit=versions_per_commit, on_event=lines.event
    )
    observer = Observer(the_lake, etls=[etl])  # the tables, for an attached console
    process = ServedProcess(
        etl.name, "apply", loops=lambda: {"apply": service}, observer=lambda: observer
    )
    names = ", ".join(t.name for t in etl.tables)
    stop = threading.Event()
    with lines.engine_log(), serving(process, api, lines), stop_on_signals(stop, "the commit"):
        lines.note(
            f"applying {etl.staging_pool} to {names}: lake {the_lake.location}; Ctrl-C or "
            "SIGTERM stops",
            loop="apply",
        )
        service.run(stop)


def _apply_once(etl: "EtlConfig", lake: "Lake", versions_per_commit: int | None) -> None:
    """Apply what is staged now, then say where each table is."""
    from engine.api import VERSIONS_PER_COMMIT, Applier

    applier = Applier(etl, lake, versions_per_commit=versions_per_commit or VERSIONS_PER_COMMIT)
    for result in applier.run_once():
        if result.table_version is not None:
            status_line(result.line())
    for table in applier.status():
        state = "nothing staged yet" if table.table_version is None else (
            f"table version {table.table_version}, {table.rows} row(s), reflects staging "
            f"version {table.applied} of {table.staged}"
        )
        status_line(f"{table.name}: {state}")


def register(app: typer.Typer) -> None:
    """Add `apply` to ``app`` as a top-level command."""
    app.command(name="apply")(apply)


def make_app() -> typer.Typer:
    """A typer app with just these commands (tests, ``python -m``)."""
    return standalone_app(register)


if __name__ == "__main__":
    make_app()()
