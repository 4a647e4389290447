"""`zync run CONFIG`: from-kafka, ETL, to-kafka and apply loops in one process, headless.

One status line per event (a commit, a pass, a delivery, an error); SIGINT or SIGTERM
stops the loops cleanly, each finishing its commit in flight. The lead's CLI adds it
with :func:`register`; it also runs alone (``python -m zync_tui.commands.run run CONFIG``).
"""

# No `from __future__ import annotations`: `with_connection` rebuilds the signature at
# import time and typer needs real annotation objects.

import enum
import functools
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from zync_tui.commands import standalone_app
from zync_tui.commands.apply import VersionsOption
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
from zync_tui.errors import UserError
from zync_tui.long_running import (
    ENVELOPE_HELP,
    EnvelopeChoice,
    OutputFormat,
    TakeOverOption,
    staged_lake,
    stop_on_signals,
)
from zync_tui.shared_options import LakeOption, open_lake, spark_session

if TYPE_CHECKING:
    from engine.api import KafkaProfile


class Loop(enum.StrEnum):
    from_kafka = "from-kafka"
    etl = "etl"
    to_kafka = "to-kafka"
    apply = "apply"


def run(
    conn: Connection,
    config: Annotated[
        Path,
        typer.Argument(
            help="The ETL configuration (YAML), e.g. demo/invoices/etl.yaml.", show_default=False
        ),
    ],
    etl_interval: Annotated[
        float,
        typer.Option(
            parser=duration_option,
            metavar="DURATION",
            help="At most one ETL pass per interval (a pass runs as soon as a raw "
            "pool gets a new commit, and no sooner than this after the last pass).",
        ),
    ] = 0.25,  # engine.api.ETL_INTERVAL (loaded late): tests/unit/test_cli_defaults.py
    fmt: Annotated[
        OutputFormat | None,
        typer.Option(
            "--format",
            "-f",
            help="Output topics' format (default: avro when a "
            "Schema Registry is configured, else json).",
            show_default=False,
        ),
    ] = None,
    envelope: Annotated[
        EnvelopeChoice | None, typer.Option(help=ENVELOPE_HELP, show_default=False)
    ] = None,
    take_over: TakeOverOption = False,
    partitions: Annotated[
        int, typer.Option(min=1, help="Partitions of output topics created here.")
    ] = 1,
    replication: Annotated[
        int, typer.Option(min=1, help="Replication factor of output topics created here.")
    ] = 1,
    output: Annotated[
        list[str] | None,
        typer.Option(
            "--output",
            metavar="TOPIC",
            help="to-kafka delivers only this output of CONFIG (repeatable), so the outputs "
            "can be spread over several processes, each topic in one of them. Default: every "
            "output.",
            show_default=False,
        ),
    ] = None,
    workers_group: Annotated[
        str | None,
        typer.Option(
            "--workers-group",
            metavar="GROUP",
            help="from-kafka shares the input partitions with the other processes of this "
            "consumer group (`zync from-kafka --workers-group`): start one `--only from-kafka` "
            "per host or replica. Default: this process reads every partition.",
            show_default=False,
        ),
    ] = None,
    only: Annotated[
        list[Loop] | None,
        typer.Option(
            "--only",
            help="Run only this loop (repeatable), e.g. to place the loops on different "
            "hosts. A second to-kafka for the same topic is refused; a second ETL is harmless.",
            show_default=False,
        ),
    ] = None,
    spark_master: Annotated[
        str | None,
        typer.Option(help="Spark master (default: spark.json, else local[*]).", show_default=False),
    ] = None,
    versions_per_commit: VersionsOption = None,
    lake: LakeOption = None,
    http: HttpOption = None,
    control_token_file: TokenFileOption = None,
    http_public_read: PublicReadOption = False,
    wedged_after: WedgedAfterOption = 300.0,
    no_api: NoApiOption = False,
    log_format: LogFormatOption = LogFormat.text,
) -> None:
    """Run from-kafka, ETL, to-kafka and (with `tables:`) apply for CONFIG until Ctrl-C or SIGTERM.

    Creates the configuration's pools when missing. Prints one line per event. Serves
    the API (/healthz, /readyz, /metrics, /v1/status, control) on a Unix socket under the
    zync home, and on TCP with --http.
    """
    # engine.api loads pyarrow, delta-rs and Kafka: imported when a command runs, so
    # `zync --help` stays fast (likewise in every command module)
    from engine.api import (
        FAILED,
        IngestOptions,
        Observer,
        Pipeline,
        ServedProcess,
        ToKafkaService,
    )

    if not config.is_file():
        raise UserError(f"{config}: no such ETL configuration file")
    if workers_group is not None and not workers_group.strip():
        raise UserError("--workers-group: give a consumer group name")
    # the lake before Spark: an S3 lake gives the session its s3a settings
    the_lake = staged_lake(lake) if lake is not None else open_lake(None, create=True)
    registry = conn.registry(required=fmt is OutputFormat.avro)
    lines = Lines(log_format)

    kafka = conn.kafka()
    if only is None or not set(only) <= {Loop.etl, Loop.apply}:
        _refuse_early(kafka)
    pipeline = Pipeline(
        config,
        the_lake,
        kafka=kafka,
        registry=registry,
        spark=functools.partial(spark_session, spark_master),
        etl_interval=etl_interval,
        format=None if fmt is None else fmt.value,
        envelope=None if envelope is None else envelope.value,
        take_over=take_over,
        partitions=partitions,
        replication=replication,
        outputs=output,
        ingest_options=(
            None
            if workers_group is None
            else IngestOptions(create_pools=True, workers_group=workers_group.strip())
        ),
        versions_per_commit=versions_per_commit,
        on_event=lines.event,
    )
    lines.pipeline = pipeline.config.name
    delivery = pipeline.services.get("to-kafka")
    if isinstance(delivery, ToKafkaService):  # a whole database: its routine lines folded
        lines.fold("to-kafka", len(delivery.outputs))
    for note in pipeline.prepare():
        lines.note(note)
    names = list(pipeline.services) if not only else [n for n in pipeline.services if Loop(n) in only]
    if only and Loop.apply in only and "apply" not in pipeline.services:
        raise UserError(f"{config} has no `tables:`, so there is no apply loop to run")
    loops = ", ".join(names)
    # what an attached console shows besides the loops (taken only when asked)
    observer = Observer(
        the_lake,
        kafka=kafka,
        registry=registry,
        etls=[pipeline.config],
        spark=functools.partial(spark_session, spark_master) if "etl" in names else None,
    )
    process = ServedProcess(
        pipeline.config.name,
        "run" if len(names) == len(pipeline.services) else "+".join(names),
        loops=lambda: {n: pipeline.services[n] for n in names},
        observer=lambda: observer,
        listings="etl" in names,  # the pending records are listed with Spark
    )
    api = ApiOptions(http, control_token_file, http_public_read, wedged_after, not no_api)
    stop = threading.Event()
    with lines.engine_log(), serving(process, api, lines), stop_on_signals(stop, "the commits"):
        lines.note(
            f"running {pipeline.config.name} ({loops}): lake {the_lake.location}, Kafka at "
            f"{pipeline.kafka.bootstrap_servers}; Ctrl-C or SIGTERM stops"
        )
        pipeline.start(names)
        try:
            while not stop.wait(0.2):
                if any(pipeline.services[n].status().state == FAILED for n in names):
                    break
        finally:
            pipeline.stop()
            observer.close()
            lines.unfold()
    failed = pipeline.failed()
    if failed:
        name, error = next(iter(failed.items()))
        raise UserError(f"{name} failed: {error}")
    lines.note("stopped")


#: how long `zync run` waits for the brokers before starting its loops anyway
_PREFLIGHT: Final = 5.0


def _refuse_early(kafka: "KafkaProfile") -> None:
    """Fail before starting any loop (and Spark) when the brokers refuse our settings (a
    wrong password, an untrusted certificate); brokers merely not up yet are waited for
    by the loops themselves."""
    from engine.api import KafkaRefused, KafkaUnavailable, check_reachable

    try:
        check_reachable(kafka, timeout=_PREFLIGHT)
    except KafkaRefused as exc:
        raise UserError(str(exc)) from None
    except KafkaUnavailable:
        pass


def register(app: typer.Typer) -> None:
    """Add `run` to ``app`` as a top-level command."""
    app.command(name="run")(with_connection()(run))


def make_app() -> typer.Typer:
    """A typer app with just these commands (tests, ``python -m``)."""
    return standalone_app(register)


if __name__ == "__main__":
    make_app()()
