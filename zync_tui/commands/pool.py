"""`zync pool create|ls|show|vacuum|compact|checkpoint`: the pools of a lake.

The lead's CLI adds the group with :func:`register`. Run alone:
``python -m zync_tui.commands.pool pool ls``.

Every command takes ``--lake PATH`` (default ``$ZYNC_LAKE``, else ``~/.zync/lake``).
Errors are one line on stderr (exit 1); Ctrl-C exits with 130 and no traceback.
"""

# No `from __future__ import annotations`: typer reads the annotations at import time.

import dataclasses
import enum
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zync_tui.commands import standalone_app
from zync_tui.errors import lake_errors, warn
from zync_tui.shared_options import LakeOption, open_lake
from zync_tui.sizes import format_size, parse_size

if TYPE_CHECKING:
    from engine.api import PoolSummary

_out = Console(highlight=False, soft_wrap=True)

app = typer.Typer(
    help=(
        "Pools: the Delta tables of the lake. A raw pool holds Kafka records (and dead "
        "letters) with their topic, partition and offset; a staging pool holds ETL outputs."
    ),
    no_args_is_help=True,
)

NameArgument = Annotated[str, typer.Argument(help="The pool's name.", show_default=False)]


class Kind(enum.StrEnum):
    raw = "raw"
    staging = "staging"



# --------------------------------------------------------------------------- helpers


def _summary_json(summary: "PoolSummary") -> dict[str, Any]:
    """A pool summary as `--json` prints it (the dataclass' fields, in order)."""
    return dataclasses.asdict(summary)


# --------------------------------------------------------------------------- pool ...


@app.command()
def create(
    name: NameArgument,
    lake: LakeOption = None,
    kind: Annotated[Kind, typer.Option(help="raw: Kafka records; staging: ETL outputs.")] = Kind.raw,
    exist_ok: Annotated[
        bool, typer.Option("--exist-ok", help="Do nothing when the pool already exists.")
    ] = False,
) -> None:
    """Create an empty pool."""
    with lake_errors():
        pool = open_lake(lake).create_pool(name, kind.value, exist_ok=exist_ok)
        _out.print(f"pool {escape(pool.name)} ({pool.kind}) at {escape(pool.uri)}")


@app.command("ls")
def list_pools(
    lake: LakeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the pools: name, kind, version, rows, topics, size (and the lake's tables)."""
    from engine.api import lake_tables, pool_summary  # deferred: see open_lake

    with lake_errors():
        the_lake = open_lake(lake)
        pools, problems = [], {}
        names = the_lake.pool_names()
        tables = sorted(lake_tables(the_lake, names))
        for name in names:
            if name in tables:
                continue  # a table the apply loop keeps: not a pool
            try:
                pools.append(_summary_json(pool_summary(the_lake.open_pool(name))))
            except Exception as exc:  # noqa: BLE001 - a non-pool table is listed as such
                problems[name] = str(exc).strip().splitlines()[0]
        if as_json:
            typer.echo(json.dumps({"lake": str(the_lake.location), "pools": pools,
                                   "not_pools": problems, "tables": tables}, indent=2))
            return
        if not pools and not problems:
            _out.print(f"no pools in {escape(str(the_lake.location))} (create one: zync pool create NAME)")
            return
        table = Table(title=f"pools in {escape(str(the_lake.location))}", title_justify="left")
        for column in ("pool", "kind", "version", "rows", "topics", "size"):
            table.add_column(column, justify="right" if column in ("version", "rows", "size") else "left")
        for p in pools:
            table.add_row(
                escape(p["name"]), p["kind"], str(p["version"]), f"{p['rows']:,}",
                escape(", ".join(p["topics"])) or "-", format_size(p["size_bytes"]),
            )
        _out.print(table)
        if tables:
            _out.print(f"tables (zync apply; zync query reads them by name): {escape(', '.join(tables))}")
        for name, problem in problems.items():
            warn(f"{escape(name)}: {escape(problem)}")


@app.command()
def show(
    name: NameArgument,
    lake: LakeOption = None,
    commits: Annotated[int, typer.Option(min=0, help="How many recent commits to list.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Show a pool: its types, per topic/partition offsets and dead letters, last commits."""
    from engine.api import pool_report  # deferred: keeps `zync --help` fast

    with lake_errors():
        report = pool_report(open_lake(lake).open_pool(name), commits)
        summary = report.summary
        stages = report.dead_letters_by_stage
        dead_total = report.dead_letters
        if as_json:
            doc = {
                **_summary_json(summary),
                "path": report.uri,
                "last_checkpoint": report.last_checkpoint,
                "last_seqno": report.last_seqno,
                "dead_letters": dead_total,
                "dead_letters_by_stage": stages,
                "types": {t: {"key": tt.key, "value": tt.value} for t, tt in report.types.items()},
                "partitions": [dataclasses.asdict(row) for row in report.partitions],
                "commits": [dataclasses.asdict(row) for row in report.commits],
            }
            typer.echo(json.dumps(doc, indent=2, default=str))
            return
        checkpoint_at = report.last_checkpoint
        _out.print(
            f"[bold]{escape(summary.name)}[/] ({summary.kind}) at {escape(report.uri)}\n"
            f"version {summary.version} · {summary.rows:,} rows in {summary.files} files "
            f"({format_size(summary.size_bytes)}) · last seqno {report.last_seqno} · "
            f"dead letters {dead_total:,}"
            + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(stages.items()))})" if stages else "")
            + f" · last checkpoint {checkpoint_at if checkpoint_at is not None else '-'}"
        )
        if report.types:
            table = Table(title="types (SQL sees key and value as these)", title_justify="left")
            table.add_column("topic")
            table.add_column("key")
            table.add_column("value", overflow="fold")
            for topic, tt in report.types.items():
                table.add_row(escape(topic), escape(tt.key_text), escape(tt.value_text))
            _out.print(table)
        table = Table(title="topics and partitions", title_justify="left")
        for column in ("topic", "partition", "rows", "dead letters", "min offset", "max offset", "position"):
            table.add_column(column, justify="left" if column == "topic" else "right")
        for row in report.partitions:
            table.add_row(
                escape(row.topic), str(row.partition), f"{row.rows:,}",
                f"{row.dead_letters:,}", str(row.min_offset), str(row.max_offset),
                str(row.position) if row.position is not None else "-",
            )
        if report.partitions:
            _out.print(table)
        if report.commits:
            table = Table(title="last commits", title_justify="left")
            for column in ("version", "time (UTC)", "operation", "by", "rows"):
                table.add_column(column, justify="right" if column in ("version", "rows") else "left")
            for h in report.commits:
                table.add_row(
                    str(h.version), h.timestamp, escape(str(h.operation)),
                    escape(str(h.app)), str(h.rows) if h.rows is not None else "-",
                )
            _out.print(table)


@app.command()
def vacuum(
    name: NameArgument,
    lake: LakeOption = None,
    retention: Annotated[
        int, typer.Option(min=0, metavar="HOURS", help="Keep files younger than this.")
    ] = 168,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List, delete nothing.")] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Allow a retention under 168 hours (unsafe while "
                                     "other readers or writers use older snapshots)."),
    ] = False,
) -> None:
    """Delete files no snapshot within the retention needs (e.g. those compaction replaced)."""
    from engine.api import vacuum as do_vacuum  # deferred: keeps `zync --help` fast

    with lake_errors():
        pool = open_lake(lake).open_pool(name)
        result = do_vacuum(pool, retention_hours=retention, dry_run=dry_run, enforce_retention=not force)
        verb = "would delete" if dry_run else "deleted"
        _out.print(f"{escape(name)}: {verb} {len(result.files)} file(s) older than {retention}h")
        if dry_run:
            for f in result.files:
                _out.print(f"  {escape(f)}")


@app.command()
def compact(
    name: NameArgument,
    lake: LakeOption = None,
    target_size: Annotated[
        str, typer.Option(metavar="SIZE", help="Target file size (e.g. 128MiB).")
    ] = "128MiB",
) -> None:
    """Rewrite small files into large ones (rows, seqnos and positions unchanged), then
    write a checkpoint."""
    from engine.api import checkpoint  # deferred: keeps `zync --help` fast
    from engine.api import compact as do_compact

    with lake_errors():
        pool = open_lake(lake).open_pool(name)
        result = do_compact(pool, target_size=parse_size(target_size))
        if result.version is None:
            _out.print(f"{escape(name)}: nothing to compact")
            return
        version = checkpoint(pool)
        _out.print(
            f"{escape(name)}: {result.files_removed} files → {result.files_added} "
            f"(version {result.version}, {result.seconds:.1f}s); checkpoint at version {version}"
        )


@app.command("checkpoint")
def checkpoint_command(name: NameArgument, lake: LakeOption = None) -> None:
    """Write a Delta checkpoint (keeps opening and committing to the pool fast)."""
    from engine.api import checkpoint  # deferred: keeps `zync --help` fast

    with lake_errors():
        version = checkpoint(open_lake(lake).open_pool(name))
        _out.print(f"{escape(name)}: checkpoint at version {version}")


def register(root: typer.Typer) -> None:
    """Add the `pool` group."""
    root.add_typer(app, name="pool")


def make_app() -> typer.Typer:
    """A typer app with just this group (tests, ``python -m``)."""
    return standalone_app(register)


if __name__ == "__main__":
    make_app()()
