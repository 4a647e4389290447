"""`zync from-kafka`: copy Kafka topics into raw pools, exactly once.

The lead's CLI adds it with :func:`register`. Run alone:
``python -m zync_tui.commands.ingest from-kafka -t TOPIC -p POOL``.

Takes ``--lake PATH`` (default ``$ZYNC_LAKE``, else ``~/.zync/lake``) and the connection
options. Errors are one line on stderr (exit 1); Ctrl-C exits with 130 and no traceback.
"""

# No `from __future__ import annotations`: typer reads the annotations at import time.

import enum
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

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
from zync_tui.connection import Connection, with_connection
from zync_tui.durations import duration_option
from zync_tui.errors import UserError, lake_errors
from zync_tui.shared_options import LakeOption, SparkMasterOption, open_lake, spark_session
from zync_tui.sizes import parse_size

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from engine.api import CommitInfo, ServiceEvent

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)


class OnError(enum.StrEnum):
    deadletter = "deadletter"
    fail = "fail"


class InputFormat(enum.StrEnum):
    auto = "auto"
    avro = "avro"
    connect_json = "connect-json"
    json = "json"


class _Reporter:
    """One stats line per commit; a progress bar per pool on a terminal while catching up."""

    def __init__(self, quiet: bool, progress: bool) -> None:
        self.quiet = quiet
        self.progress: Progress | None = None
        self.tasks: dict[str, TaskID] = {}
        self.lock = threading.Lock()
        if progress and _out.is_terminal and not quiet:
            import rich.progress as bars  # deferred: a tenth of a second, for terminals only

            self.progress = bars.Progress(
                bars.TextColumn("[bold]{task.description}"),
                bars.BarColumn(),
                bars.MofNCompleteColumn(),
                bars.TextColumn("{task.fields[rate]}"),
                bars.TimeRemainingColumn(),
                console=_out,
                transient=True,
            )

    def __enter__(self) -> "_Reporter":
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def event(self, event: "ServiceEvent") -> None:
        """The loop's events: an outage is said (even with --quiet), a failure too."""
        self.note(event.kind, event.message)

    def note(self, kind: str, text: str) -> None:
        """An outage of Kafka or the registry began or ended: said even with --quiet."""
        if kind in ("unreachable", "back"):
            with self.lock:
                stamp = time.strftime("%H:%M:%S")
                _err.print(f"[dim]{stamp}[/] {escape(text)}")

    def __call__(self, info: "CommitInfo") -> None:
        pool = info.stats.pool(info.pool)
        with self.lock:
            if not self.quiet:
                dead = f" {info.dead_letters:,} dead letter(s)" if info.dead_letters else ""
                skipped = f" ({info.skipped:,} already there)" if info.skipped else ""
                upkeep = f" · {'; '.join(info.upkeep)}" if info.upkeep else ""
                _out.print(
                    f"{escape(info.pool)} v{info.version}: +{info.records:,} records{dead}{skipped}"
                    f" · lag {escape(info.lag_text())} · {info.seconds:.2f}s{escape(upkeep)}"
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
    linger: Annotated[
        float,
        typer.Option(parser=duration_option, metavar="DURATION",
                     help="Once caught up (a poll brought fewer records than it asked for), "
                     "commit when the oldest record has waited this long: 0 commits a "
                     "trickle at once, a backlog still makes large batches."),
    ] = 0.0,
    exit_after: Annotated[
        float | None,
        typer.Option(parser=duration_option, metavar="DURATION",
                     help="Exit after this long without a new record (for scripts); counted once "
                          "every partition read has answered, so records already waiting are read "
                          "however short it is.", show_default=False),
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
    http: HttpOption = None,
    control_token_file: TokenFileOption = None,
    http_public_read: PublicReadOption = False,
    wedged_after: WedgedAfterOption = 300.0,
    no_api: NoApiOption = False,
    log_format: LogFormatOption = LogFormat.text,
) -> None:
    """Copy Kafka topics into raw pools, exactly once.

    Every partition (or, with --workers-group, this worker's share); resumes where the pool's Delta log says, after a crash too. One line per commit: pool, Delta version, records, dead letters and lag per topic. Spark runs only with --shaper. Without --exit-after it serves the API (probes, metrics, status, control) on a Unix socket under the zync home, and on TCP with --http.
    """
    from engine.api import keep_freed_pages

    keep_freed_pages()  # before the lake's and the decoders' libraries load
    from engine.api import (
        FromKafkaService,
        IngestInput,
        IngestOptions,
        ServedProcess,
        Shaper,
        format_seconds,
        load_inputs,
    )

    with lake_errors():
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
            linger=linger,
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
        lines = Lines(log_format, _name(config, inputs))
        # text: where the API listens goes to stderr (stdout has a line per commit), and
        # only when asked for with --http: the socket's place is known (docs), and a run
        # that fails at once says one line, its error
        notes = Lines(LogFormat.text, notes=None if quiet or http is None else "stderr")
        json_lines = log_format is LogFormat.json
        with _Reporter(quiet or json_lines, progress and not json_lines) as reporter:
            service = FromKafkaService(
                [(i.topic, i.pool) for i in inputs],
                open_lake(lake),
                kafka=conn.kafka(),
                registry=registry,
                options=options,
                spark=lambda: spark_session(spark_master),  # started only with a shaper
                on_commit=None if json_lines else reporter,
                on_event=lines.event if json_lines else reporter.event,
                wait_for_topics=False,
            )
            process = ServedProcess(lines.pipeline or "from-kafka", "from-kafka", loops=lambda: {"from-kafka": service})
            api = ApiOptions(
                http, control_token_file, http_public_read, wedged_after,
                enabled=not no_api and (exit_after is None or http is not None),
            )  # fmt: skip
            started = time.monotonic()
            with lines.engine_log(), serving(process, api, lines if json_lines else notes):
                service.run()
        stats = service.status().detail
        elapsed = time.monotonic() - started
        if stats is None:
            return
        if json_lines:
            lines.note("from-kafka stopped", records=stats.records, dead_letters=stats.dead_letters)
        elif not quiet:
            why = f" (idle for {format_seconds(exit_after)})" if exit_after else ""
            _err.print(
                f"from-kafka stopped{why}: {stats.records:,} records, "
                f"{stats.dead_letters:,} dead letters in {elapsed:.1f}s"
            )


def _name(config: Path | None, inputs: "list[Any]") -> str:
    """The pipeline's name: the configuration's, else the pools'."""
    if config is not None:
        from engine.api import load_config

        try:
            return load_config(config).name
        except Exception:  # noqa: BLE001 - an inputs-only file: named after its pools
            pass
    return "+".join(sorted({i.pool for i in inputs}))


def register(root: typer.Typer) -> None:
    """Add the top-level `from-kafka` command."""
    root.command(name="from-kafka")(with_connection()(from_kafka))


def make_app() -> typer.Typer:
    """A typer app with just this command (tests, ``python -m``)."""
    return standalone_app(register)


if __name__ == "__main__":
    make_app()()
