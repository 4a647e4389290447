"""`zync etl`, `zync pending` and `zync expired`: one ETL pass, and the records it waits
for or gave up on. The lead wires :func:`register` into the `zync` app; the module also
runs on its own (``python -m zync_tui.commands.etl etl CONFIG``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from zync_tui.errors import user_errors
from zync_tui.shared_options import LakeOption, SparkMasterOption, open_lake

if TYPE_CHECKING:
    from engine.api import EtlRunner, ExpiredRecord, PendingRecord

console = Console(highlight=False, soft_wrap=True)

ConfigArg = Annotated[
    Path,
    typer.Argument(help="The ETL configuration (YAML), e.g. demo/invoices/etl.yaml.", show_default=False),
]
LakeOpt = LakeOption
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
LimitOpt = Annotated[
    int, typer.Option("--limit", min=0, help="Show at most this many records (0: all).")
]


def _runner(
    config: Path, lake: str | None, spark_master: str | None = None, *, spark_now: bool = True
) -> EtlRunner:
    """The ETL of ``config`` over the lake. ``spark_now``: start Spark before anything
    else (a pass needs it: a missing Java or an unreachable master is said first);
    otherwise only when needed (`pending` and `expired` answer without a JVM when there
    is nothing to list)."""
    # engine.api loads pyarrow, delta-rs and Kafka: imported when a command runs, so
    # `zync --help` stays fast (likewise in every command module)
    from engine.api import (
        EtlRunner,
        get_spark,
        load_config,
        load_spark_settings,
    )

    etl_config = load_config(config)
    the_lake = open_lake(lake, must_exist="create pools with `zync pool create`, or pass --lake")
    settings = load_spark_settings(spark_master)
    if spark_now:
        return EtlRunner(etl_config, the_lake, get_spark(settings))  # a missing Java is a ZyncError
    return EtlRunner(etl_config, the_lake, lambda: get_spark(settings))


def _short(text: str | None, limit: int = 60) -> str:
    if text is None:
        return "null"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _echo_json(data: object) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False))

#: Where a pass's input came from, in words (PassResult.read_from).
_READ_FROM = {
    "spark": "by delta-spark",
    "log": "by delta-rs from the Delta log (a small input)",
    "window": "from the window kept since the last pass",
}


def etl(
    config: ConfigArg,
    lake: LakeOpt = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Print the Spark SQL and plans of a pass, without running it.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Compute and show the outputs without committing them.")
    ] = False,
    as_json: JsonOpt = False,
    profile: Annotated[
        bool,
        typer.Option("--profile", help="Also print where the pass spent its time: seconds per "
                     "phase (refresh, check, read, evaluate, decide, write, commit, window), "
                     "the Spark jobs it ran and where its input came from."),
    ] = False,
    spark_master: SparkMasterOption = None,
) -> None:
    """Run one ETL pass: outputs, completion markers and cursors in one staging commit.

    The JSON form (--json) carries the same profile (`phases`, `spark_jobs`, `read_from`).
    """
    with user_errors():
        runner = _runner(config, lake, spark_master)
        if explain:
            typer.echo(runner.explain())
            return
        result = runner.run_pass(dry_run=dry_run)
        if as_json:
            _echo_json(result.to_json())
            return
        typer.echo(result.summary())
        if profile:
            source = _READ_FROM.get(result.read_from, result.read_from)
            typer.echo(f"profile: {result.seconds:.3f} s; input read {source}")
            for line in result.timings.lines():
                typer.echo(line)
        if dry_run and result.rows is not None and result.rows.num_rows:
            table = Table("topic", "offset", "key", "value", title="outputs (not committed)")
            for row in result.rows.to_pylist():
                table.add_row(row["topic"], str(row["offset"]), _short(row["key"]), _short(row["value"]))
            console.print(table)


def _print_records(
    kind: str,
    records: Sequence[PendingRecord] | Sequence[ExpiredRecord],
    limit: int,
    *,
    as_json: bool,
    with_value: bool,
) -> None:
    """The `pending`/`expired` listing: JSON, or a table (topic, partition, offset, key, rule,
    age[, value: expired records])."""
    from engine.api import ExpiredRecord, format_age

    if as_json:
        _echo_json([r.to_json() for r in records])
        return
    if not records:
        typer.echo(f"no {kind} records")
        return
    title = f"{kind} (first {limit})" if limit and len(records) == limit else kind
    columns = ["topic", "partition", "offset", "key", "rule", "age"] + (["value"] if with_value else [])
    table = Table(*columns, title=title)
    for r in records:
        cells = [r.topic, str(r.partition), str(r.offset), _short(r.key), r.rule or "(none)", format_age(r.age)]
        value = [_short(r.value)] if with_value and isinstance(r, ExpiredRecord) else []
        table.add_row(*cells, *value)
    console.print(table)


def pending(
    config: ConfigArg,
    lake: LakeOpt = None,
    as_json: JsonOpt = False,
    limit: LimitOpt = 1000,
    spark_master: SparkMasterOption = None,
) -> None:
    """List input records after the cursors that no rule has consumed yet."""
    with user_errors():
        records = _runner(config, lake, spark_master, spark_now=False).pending(limit=limit or None)
        _print_records("pending", records, limit, as_json=as_json, with_value=False)


def expired(
    config: ConfigArg,
    lake: LakeOpt = None,
    as_json: JsonOpt = False,
    limit: LimitOpt = 1000,
    spark_master: SparkMasterOption = None,
) -> None:
    """List input records the ETL gave up on (expire-after), with their full record."""
    with user_errors():
        records = _runner(config, lake, spark_master, spark_now=False).expired(limit=limit or None)
        _print_records("expired", records, limit, as_json=as_json, with_value=True)


def register(app: typer.Typer) -> None:
    """Add the top-level commands `etl`, `pending` and `expired` to ``app``."""
    app.command("etl")(etl)
    app.command("pending")(pending)
    app.command("expired")(expired)


def main() -> None:
    app = typer.Typer(no_args_is_help=True, pretty_exceptions_show_locals=False)
    register(app)
    app()


if __name__ == "__main__":
    main()
