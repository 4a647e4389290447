"""`zync pool create|ls|show|vacuum|compact|checkpoint`, `zync from-kafka`, `zync query`.

The lead's CLI adds them with :func:`register`. Run alone:
``python -m zync_tui.commands.pool from-kafka -t TOPIC -p POOL``.

Every command takes ``--lake PATH`` (default ``$ZYNC_LAKE``, else ``~/.zync/lake``).
Errors are one line on stderr (exit 1); Ctrl-C exits with 130 and no traceback.
"""

# No `from __future__ import annotations`: typer reads the annotations at import time.

import csv
import enum
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from engine.durations import format_seconds
from zync_tui.commands import standalone_app
from zync_tui.commands.kafka import Connection, with_connection
from zync_tui.durations import duration_option
from zync_tui.errors import UserError, user_errors, warn
from zync_tui.options import SparkMasterOption

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)

app = typer.Typer(
    help=(
        "Pools: the Delta tables of the lake. A raw pool holds Kafka records (and dead "
        "letters) with their topic, partition and offset; a staging pool holds ETL outputs."
    ),
    no_args_is_help=True,
)

LakeOption = Annotated[
    Path | None,
    typer.Option(
        "--lake",
        metavar="PATH",
        help="The lake directory (default: $ZYNC_LAKE, else ~/.zync/lake).",
        show_default=False,
    ),
]
NameArgument = Annotated[str, typer.Argument(help="The pool's name.", show_default=False)]


class Kind(enum.StrEnum):
    raw = "raw"
    staging = "staging"


class OnError(enum.StrEnum):
    deadletter = "deadletter"
    fail = "fail"


class InputFormat(enum.StrEnum):
    auto = "auto"
    avro = "avro"
    connect_json = "connect-json"
    json = "json"


class OutputFormat(enum.StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


# --------------------------------------------------------------------------- helpers


@contextmanager
def _errors() -> Iterator[None]:
    """user_errors(), plus the lake's own errors (PoolError, delta-rs) as one line."""
    from deltalake.exceptions import DeltaError

    from engine.lake.pools import PoolError

    with user_errors():
        try:
            yield
        except (PoolError, DeltaError) as exc:
            raise UserError(str(exc).strip().splitlines()[0]) from None


def _lake(path: Path | None) -> Any:
    from engine.lake.pools import Lake
    from engine.settings.lake import lake_path

    return Lake(path if path is not None else lake_path())


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b)?\s*$", re.I)


def parse_size(text: str) -> int:
    """``"64MiB"``/``"64MB"``/``"64m"``/``"1000"`` → bytes (binary units)."""
    match = _SIZE.match(text)
    if not match:
        raise typer.BadParameter(f"{text!r} is not a size: use e.g. 1000, 512KiB, 64MiB, 1GiB")
    unit = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[match.group(2).lower()]
    return int(float(match.group(1)) * unit)


def _when(ts: Any) -> str:
    if ts is None:
        return "-"
    if isinstance(ts, int | float):
        ts = datetime.fromtimestamp(ts / 1000 if ts > 1e11 else ts, UTC)
    return ts.strftime("%Y-%m-%d %H:%M:%S")


def _pool_summary(pool: Any) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    actions = pa.table(pool.table.get_add_actions(flatten=True))
    rows = int(pc.sum(actions.column("num_records")).as_py() or 0) if actions.num_rows else 0
    size = int(pc.sum(actions.column("size_bytes")).as_py() or 0) if actions.num_rows else 0
    return {
        "name": pool.name,
        "kind": pool.kind,
        "version": pool.version,
        "rows": rows,
        "files": actions.num_rows,
        "size_bytes": size,
        "topics": sorted(pool.meta.types),
    }


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
    with _errors():
        pool = _lake(lake).create_pool(name, kind.value, exist_ok=exist_ok)
        _out.print(f"pool {escape(pool.name)} ({pool.kind}) at {escape(str(pool.path))}")


@app.command("ls")
def list_pools(
    lake: LakeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the pools: name, kind, version, rows, topics, size."""
    with _errors():
        the_lake = _lake(lake)
        pools, problems = [], {}
        for name in the_lake.pool_names():
            try:
                pools.append(_pool_summary(the_lake.open_pool(name)))
            except Exception as exc:  # noqa: BLE001 - a non-pool table is listed as such
                problems[name] = str(exc).strip().splitlines()[0]
        if as_json:
            typer.echo(json.dumps({"lake": str(the_lake.root), "pools": pools,
                                   "not_pools": problems}, indent=2))
            return
        if not pools and not problems:
            _out.print(f"no pools in {escape(str(the_lake.root))} (create one: zync pool create NAME)")
            return
        table = Table(title=f"pools in {escape(str(the_lake.root))}", title_justify="left")
        for column in ("pool", "kind", "version", "rows", "topics", "size"):
            table.add_column(column, justify="right" if column in ("version", "rows", "size") else "left")
        for p in pools:
            table.add_row(
                escape(p["name"]), p["kind"], str(p["version"]), f"{p['rows']:,}",
                escape(", ".join(p["topics"])) or "-", _size(p["size_bytes"]),
            )
        _out.print(table)
        for name, problem in problems.items():
            warn(f"{escape(name)}: {escape(problem)}")


def _topic_rows(pool: Any) -> list[dict[str, Any]]:
    """Per topic/partition: records, dead letters, min/max offset and the stored position."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    dataset = pool.table.to_pyarrow_dataset()
    scan = dataset.to_table(
        columns={
            "t": ds.field("kafka", "topic"),
            "p": ds.field("kafka", "partition"),
            "o": ds.field("kafka", "offset"),
            "dead": pc.is_valid(ds.field("deadletter")),
        }
    )
    scan = scan.filter(pc.is_valid(scan.column("t")))
    if scan.num_rows == 0:
        return []
    scan = scan.append_column("dl", pc.cast(scan.column("dead"), pa.int64()))
    agg = scan.group_by(["t", "p"]).aggregate(
        [("o", "min"), ("o", "max"), ("o", "count"), ("dl", "sum")]
    )
    out = []
    for row in sorted(agg.to_pylist(), key=lambda r: (r["t"], r["p"])):
        out.append(
            {
                "topic": row["t"],
                "partition": row["p"],
                "rows": row["o_count"],
                "dead_letters": row["dl_sum"] or 0,
                "min_offset": row["o_min"],
                "max_offset": row["o_max"],
                "position": pool.position(row["t"], row["p"]),
            }
        )
    return out


def _dead_letter_stages(pool: Any) -> dict[str, int]:
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    scan = pool.table.to_pyarrow_dataset().to_table(
        columns={"stage": ds.field("deadletter", "stage")}, filter=pc.is_valid(ds.field("deadletter"))
    )
    if scan.num_rows == 0:
        return {}
    agg = scan.group_by("stage").aggregate([("stage", "count")])
    return {r["stage"]: r["stage_count"] for r in agg.to_pylist()}


def _history(pool: Any, limit: int) -> list[dict[str, Any]]:
    out = []
    for entry in pool.table.history(limit):
        metrics = entry.get("operationMetrics") or {}
        out.append(
            {
                "version": entry.get("version"),
                "timestamp": _when(entry.get("timestamp")),
                "operation": entry.get("operation"),
                "app": entry.get("zync.app") or entry.get("zync.op") or "",
                "rows": metrics.get("num_added_rows"),
            }
        )
    return out


def _type_text(text: str | None) -> str:
    if not text:
        return "-"
    try:
        from pyspark.sql.types import _parse_datatype_json_string

        return _parse_datatype_json_string(text).simpleString()
    except Exception:  # noqa: BLE001
        return text


@app.command()
def show(
    name: NameArgument,
    lake: LakeOption = None,
    commits: Annotated[int, typer.Option(min=0, help="How many recent commits to list.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Show a pool: its types, per topic/partition offsets and dead letters, last commits."""
    from engine.lake.maintenance import last_checkpoint

    with _errors():
        pool = _lake(lake).open_pool(name)
        summary = _pool_summary(pool)
        topics = _topic_rows(pool)
        stages = _dead_letter_stages(pool)
        history = _history(pool, commits)
        types = {t: tt.to_json() for t, tt in sorted(pool.meta.types.items())}
        dead_total = sum(stages.values())
        if as_json:
            doc = {
                **summary,
                "path": str(pool.path),
                "last_checkpoint": last_checkpoint(pool),
                "last_seqno": pool.last_seqno(),
                "dead_letters": dead_total,
                "dead_letters_by_stage": stages,
                "types": types,
                "partitions": topics,
                "commits": history,
            }
            typer.echo(json.dumps(doc, indent=2, default=str))
            return
        _out.print(
            f"[bold]{escape(pool.name)}[/] ({pool.kind}) at {escape(str(pool.path))}\n"
            f"version {pool.version} · {summary['rows']:,} rows in {summary['files']} files "
            f"({_size(summary['size_bytes'])}) · last seqno {pool.last_seqno()} · "
            f"dead letters {dead_total:,}"
            + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(stages.items()))})" if stages else "")
            + f" · last checkpoint {last_checkpoint(pool) if last_checkpoint(pool) is not None else '-'}"
        )
        if types:
            table = Table(title="types (SQL sees key and value as these)", title_justify="left")
            table.add_column("topic")
            table.add_column("key")
            table.add_column("value", overflow="fold")
            for topic, tt in types.items():
                table.add_row(escape(topic), escape(_type_text(tt["key"])), escape(_type_text(tt["value"])))
            _out.print(table)
        table = Table(title="topics and partitions", title_justify="left")
        for column in ("topic", "partition", "rows", "dead letters", "min offset", "max offset", "position"):
            table.add_column(column, justify="left" if column == "topic" else "right")
        for row in topics:
            table.add_row(
                escape(row["topic"]), str(row["partition"]), f"{row['rows']:,}",
                f"{row['dead_letters']:,}", str(row["min_offset"]), str(row["max_offset"]),
                str(row["position"]) if row["position"] is not None else "-",
            )
        if topics:
            _out.print(table)
        if history:
            table = Table(title="last commits", title_justify="left")
            for column in ("version", "time (UTC)", "operation", "by", "rows"):
                table.add_column(column, justify="right" if column in ("version", "rows") else "left")
            for h in history:
                table.add_row(
                    str(h["version"]), h["timestamp"], escape(str(h["operation"])),
                    escape(str(h["app"])), str(h["rows"]) if h["rows"] is not None else "-",
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
    from engine.lake.maintenance import vacuum as do_vacuum

    with _errors():
        pool = _lake(lake).open_pool(name)
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
    from engine.lake.maintenance import checkpoint
    from engine.lake.maintenance import compact as do_compact

    with _errors():
        pool = _lake(lake).open_pool(name)
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
    from engine.lake.maintenance import checkpoint

    with _errors():
        version = checkpoint(_lake(lake).open_pool(name))
        _out.print(f"{escape(name)}: checkpoint at version {version}")


# --------------------------------------------------------------------------- from-kafka


def _lag_text(lags: dict[str, int | None]) -> str:
    return " ".join(f"{t}={lag:,}" if lag is not None else f"{t}=?" for t, lag in sorted(lags.items()))


class _Reporter:
    """One stats line per commit; a progress bar per pool on a terminal while catching up."""

    def __init__(self, quiet: bool, progress: bool) -> None:
        self.quiet = quiet
        self.progress = None
        self.tasks: dict[str, Any] = {}
        self.lock = threading.Lock()
        if progress and _out.is_terminal and not quiet:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=_out,
                transient=True,
            )

    def __enter__(self) -> "_Reporter":
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.progress is not None:
            self.progress.stop()

    def note(self, kind: str, text: str) -> None:
        """An outage of Kafka or the registry began or ended: said even with --quiet."""
        if kind in ("unreachable", "back"):
            with self.lock:
                stamp = time.strftime("%H:%M:%S")
                _err.print(f"[dim]{stamp}[/] {escape(text)}")

    def __call__(self, info: Any) -> None:
        lags = info.topic_lag()
        pool = info.stats.pool(info.pool)
        with self.lock:
            if not self.quiet:
                dead = f" {info.dead_letters:,} dead letter(s)" if info.dead_letters else ""
                skipped = f" ({info.skipped:,} already there)" if info.skipped else ""
                upkeep = f" · {'; '.join(info.upkeep)}" if info.upkeep else ""
                _out.print(
                    f"{escape(info.pool)} v{info.version}: +{info.records:,} records{dead}{skipped}"
                    f" · lag {escape(_lag_text(lags))} · {info.seconds:.2f}s{escape(upkeep)}"
                )
            if self.progress is None or pool is None:
                return
            lag = pool.lag
            task = self.tasks.get(info.pool)
            if task is None:
                if not lag:
                    return  # caught up: no bar
                task = self.progress.add_task(info.pool, total=pool.records + lag, rate="")
                self.tasks[info.pool] = task
            total = pool.records + (lag or 0)
            self.progress.update(
                task, completed=pool.records, total=max(total, 1), rate=f"{pool.rate:,.0f} rec/s",
                visible=bool(lag),
            )


def from_kafka(
    conn: Connection,
    config: Annotated[
        Path | None,
        typer.Argument(help="An ETL configuration: its `inputs:` list ({topic, pool}) says what to read.",
                       show_default=False, metavar="[CONFIG.yaml]"),
    ] = None,
    topics: Annotated[
        list[str] | None,
        typer.Option("--topic", "-t", help="A topic to read (repeatable).", show_default=False),
    ] = None,
    pool: Annotated[
        str | None,
        typer.Option("--pool", "-p", help="The raw pool the --topic records go to.", show_default=False),
    ] = None,
    lake: LakeOption = None,
    create_pool: Annotated[
        bool, typer.Option("--create-pool", help="Create missing pools.")
    ] = False,
    max_records: Annotated[
        int, typer.Option(min=1, help="Commit when a batch holds this many records.")
    ] = 100_000,
    max_bytes: Annotated[
        str, typer.Option(metavar="SIZE", help="... or this many bytes of values (e.g. 64MiB).")
    ] = "64MiB",
    interval: Annotated[
        float | None,
        typer.Option(parser=duration_option, metavar="DURATION", show_default=False,
                     help="... or when its oldest record has waited this long (default 1s)."),
    ] = None,
    exit_after: Annotated[
        float | None,
        typer.Option(parser=duration_option, metavar="DURATION",
                     help="Exit after this long without a new record (for scripts).", show_default=False),
    ] = None,
    fmt: Annotated[
        InputFormat, typer.Option("--format", "-f", help="Value format (auto: decided from the first records).")
    ] = InputFormat.auto,
    key_format: Annotated[InputFormat, typer.Option(help="Key format.")] = InputFormat.auto,
    on_error: Annotated[
        OnError,
        typer.Option(help="A record that cannot be decoded or shaped: keep it as a dead letter, "
                          "or fail before committing its batch."),
    ] = OnError.deadletter,
    workers_group: Annotated[
        str | None,
        typer.Option("--workers-group", metavar="GROUP",
                     help="Share the partitions with the other from-kafka processes of this "
                          "consumer group (each takes its share; the survivors take over from a "
                          "worker that stops or dies). Partitions still start where the pool's "
                          "Delta log says, never at the group's offsets. Default: this process "
                          "reads every partition.", show_default=False),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(metavar="GROUP",
                     help="Consumer group the committed positions are mirrored to, for lag "
                          "tools only (default: zync-<pool>; with --workers-group, that group, "
                          "committed by its members themselves, as an active group refuses "
                          "commits from outside it; '' for none). Another name than "
                          "--workers-group must be a group no consumer subscribes to.",
                     show_default=False),
    ] = None,
    shaper: Annotated[
        Path | None,
        typer.Option(metavar="FILE.sql", help="A Spark SQL SELECT over the view `batch` applied "
                                              "before each commit.", show_default=False),
    ] = None,
    spark_master: SparkMasterOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No stats lines.")] = False,
    progress: Annotated[
        bool, typer.Option(help="A progress bar on a terminal while catching up.")
    ] = True,
) -> None:
    """Copy Kafka topics into raw pools, exactly once.

    Every partition (or, with --workers-group, this worker's share); resumes where the pool's Delta log says, after a crash too. One line per commit: pool, Delta version, records, dead letters and lag per topic. Spark runs only with --shaper.
    """
    from engine.ingest.loop import Ingest
    from engine.ingest.options import IngestInput, IngestOptions, load_inputs
    from engine.lake.shaper import Shaper

    with _errors():
        if config is not None and (topics or pool):
            raise UserError("give either CONFIG.yaml or --topic/--pool, not both")
        if config is not None:
            inputs = load_inputs(config)
        else:
            if not topics or not pool:
                raise UserError("say what to read: --topic TOPIC --pool POOL (or a CONFIG.yaml)")
            inputs = [IngestInput(t, pool) for t in topics]
        shaper_sql = None
        if shaper is not None:
            shaper_sql = Shaper.from_file(shaper).sql
        options = IngestOptions(
            max_records=max_records,
            max_bytes=parse_size(max_bytes),
            interval=interval if interval is not None else 1.0,
            exit_after=exit_after,
            value_format=fmt.value,
            key_format=key_format.value,
            on_error=on_error.value,
            group=group,
            workers_group=workers_group,
            shaper=shaper_sql,
            shaper_source=str(shaper) if shaper else "<shaper>",
            create_pools=create_pool,
        )
        registry = conn.registry(required=False)
        ingest = Ingest(
            inputs,
            lake=_lake(lake),
            kafka=conn.kafka(),
            registry=registry,
            options=options,
            spark=lambda: _spark(spark_master),  # started only with a shaper
        )
        started = time.monotonic()
        with _Reporter(quiet, progress) as reporter:
            stats = ingest.run(on_commit=reporter, on_note=reporter.note)
        elapsed = time.monotonic() - started
        if not quiet:
            why = f" (idle for {format_seconds(exit_after)})" if exit_after else ""
            _err.print(
                f"from-kafka stopped{why}: {stats.records:,} records, "
                f"{stats.dead_letters:,} dead letters in {elapsed:.1f}s"
            )


# --------------------------------------------------------------------------- query


def _spark(master: str | None = None) -> Any:
    """The SparkSession: ``master`` (--spark-master), else $ZYNC_SPARK_MASTER, spark.json,
    local[*]."""
    from engine.settings.spark import load_spark_settings
    from engine.spark import get_spark

    return get_spark(load_spark_settings(master))


def _as_text(df: Any) -> Any:
    """Every column as text: nested values as JSON, NULL stays NULL."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    cols = []
    for field in df.schema.fields:
        col = F.col(f"`{field.name}`")
        if isinstance(field.dataType, StructType | ArrayType | MapType):
            col = F.to_json(col)
        elif isinstance(field.dataType, BinaryType):
            col = F.base64(col)
        cols.append(col.cast("string").alias(field.name))
    return df.select(*cols)


def query(
    sql: Annotated[str, typer.Argument(help="Spark SQL; every pool is a view (see below).",
                                       show_default=False)],
    lake: LakeOption = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")] = OutputFormat.table,
    as_of: Annotated[
        int | None,
        typer.Option("--as-of", metavar="VERSION", min=0, help="Read every pool at this Delta version (for one pool: P VERSION AS OF n).",
                     show_default=False),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=0, help="Print at most this many rows.", show_default=False)
    ] = None,
    spark_master: SparkMasterOption = None,
) -> None:
    """Run Spark SQL over the pools of the lake.

    Each pool P is the view P: its records (seqno, kafka, key, value), typed, so value.after.ID works; with P_deadletters (seqno, kafka, stage, error, key_bytes, value_bytes) and, for staging pools, P_markers. A '-' in a pool name becomes '_' (raw-2024 is raw_2024).

    Time travel, per reference: P VERSION AS OF n, or P TIMESTAMP AS OF 'YYYY-MM-DD HH:MM:SS' (the newest version committed by then; UTC unless spark.json sets the session time zone); several versions of one pool may meet in a query. --as-of n reads every pool at version n. Delta's DESCRIBE HISTORY P \\[LIMIT n] and DESCRIBE DETAIL P take the pool names you see.

    Examples:
      zync query "SELECT value.after.ID FROM Raw WHERE value.op = 'c'"
      zync query "SELECT count(*) FROM Staging VERSION AS OF 3"
      zync query "SELECT * FROM Raw TIMESTAMP AS OF '2026-11-23 10:00:00'"
      zync query "SELECT n.* FROM Staging VERSION AS OF 5 n
                  LEFT ANTI JOIN Staging VERSION AS OF 3 o USING (seqno)"
      zync query "DESCRIBE HISTORY Raw LIMIT 5"
      zync query "DESCRIBE DETAIL `raw-2024`"
    """
    from engine.lake.query import query as run_query

    with _errors():
        spark = _spark(spark_master)
        df, catalog = run_query(spark, _lake(lake), sql, as_of=as_of)
        for name, reason in catalog.skipped.items():
            if as_of is None:
                warn(f"{escape(name)} skipped: {escape(reason)}")
        if limit is not None:
            df = df.limit(limit)
        try:
            if fmt is OutputFormat.json:
                from pyspark.sql import functions as F

                lines = df.select(
                    F.to_json(F.struct("*"), {"ignoreNullFields": "false"}).alias("j")
                ).collect()
                for row in lines:
                    sys.stdout.write(row["j"] + "\n")
                return
            text = _as_text(df)
            names = text.columns
            rows = [[r[i] for i in range(len(names))] for r in text.collect()]
        except Exception as exc:
            from pyspark.errors import PySparkException

            if isinstance(exc, PySparkException):
                raise UserError(str(exc).strip().splitlines()[0]) from None
            raise
        if fmt is OutputFormat.csv:
            writer = csv.writer(sys.stdout, lineterminator="\n")
            writer.writerow(names)
            writer.writerows([["" if v is None else v for v in row] for row in rows])
            return
        table = Table(box=None, header_style="bold", pad_edge=False)
        for name in names:
            table.add_column(escape(name), overflow="fold")
        for row in rows:
            table.add_row(*[escape(v) if v is not None else "[dim]NULL[/]" for v in row])
        _out.print(table)
        _err.print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


# --------------------------------------------------------------------------- wiring


def register(root: typer.Typer) -> None:
    """Add the `pool` group and the top-level `from-kafka` and `query` commands."""
    root.add_typer(app, name="pool")
    root.command(name="from-kafka")(with_connection()(from_kafka))
    root.command(name="query")(query)


def make_app() -> typer.Typer:
    """A typer app with just these commands (tests, ``python -m``)."""
    return standalone_app(register)


if __name__ == "__main__":
    make_app()()
