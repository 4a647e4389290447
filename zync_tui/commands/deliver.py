"""`zync to-kafka`: deliver a staging pool's outputs to Kafka topics, exactly once.

The lead's CLI adds it with :func:`register`; it also runs alone
(``python -m zync_tui.commands.deliver to-kafka -t TOPIC -p POOL``).
"""

# No `from __future__ import annotations`: `with_connection` rebuilds the signature at
# import time and typer needs real annotation objects.

import functools
import threading
from collections.abc import Callable
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
from zync_tui.connection import Connection, with_connection
from zync_tui.errors import UserError
from zync_tui.long_running import (
    ENVELOPE_HELP,
    EnvelopeChoice,
    OutputFormat,
    TakeOverOption,
    staged_lake,
    status_line,
    stop_on_signals,
)
from zync_tui.shared_options import LakeOption, SparkMasterOption, spark_session

if TYPE_CHECKING:
    from engine.api import DeliveryOptions, DeliveryOutput, Lake, ServiceEvent
    from engine.api import Spark as SparkSession



def to_kafka(
    conn: Connection,
    config: Annotated[
        Path | None,
        typer.Argument(
            help="An ETL configuration (YAML): deliver each of its `outputs:`.", show_default=False
        ),
    ] = None,
    topic: Annotated[
        str | None,
        typer.Option(
            "--topic", "-t", help="The output topic (and staging topic).", show_default=False
        ),
    ] = None,
    pool: Annotated[
        str | None, typer.Option("--pool", "-p", help="The staging pool.", show_default=False)
    ] = None,
    continuous: Annotated[
        bool,
        typer.Option(
            "--continuous",
            "-c",
            help="Keep running and deliver new staging commits within a second, "
            "until Ctrl-C or SIGTERM.",
        ),
    ] = False,
    fmt: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="How keys and values are encoded.")
    ] = OutputFormat.avro,
    envelope: Annotated[
        EnvelopeChoice | None, typer.Option(help=ENVELOPE_HELP, show_default=False)
    ] = None,
    take_over: TakeOverOption = False,
    shaper: Annotated[
        Path | None,
        typer.Option(
            help="A Spark SQL SELECT over the view `records` reshaping each record; "
            "must return kafka (unchanged), key and value.",
            show_default=False,
        ),
    ] = None,
    partitions: Annotated[
        int,
        typer.Option(
            min=1, help="Partitions of a topic created here (records are partitioned by key)."
        ),
    ] = 1,
    replication: Annotated[
        int, typer.Option(min=1, help="Replication factor of a topic created here.")
    ] = 1,
    batch: Annotated[
        int, typer.Option(min=1, help="At most this many records per Kafka transaction.")
    ] = 100_000,
    lake: LakeOption = None,
    spark_master: SparkMasterOption = None,
    http: HttpOption = None,
    control_token_file: TokenFileOption = None,
    http_public_read: PublicReadOption = False,
    wedged_after: WedgedAfterOption = 300.0,
    no_api: NoApiOption = False,
    log_format: LogFormatOption = LogFormat.text,
) -> None:
    """Deliver staging outputs to Kafka, exactly once and in pool-offset order.

    Give -t TOPIC -p POOL, or an ETL configuration whose outputs to deliver (each in its configured envelope unless --envelope is given). Creates missing topics. Each transaction commits the position in Kafka with its records (group zync-to-kafka-TOPIC), so a restart (even after kill -9, or after retention emptied the topic) neither loses nor repeats a record. One to-kafka per topic at a time.
    """
    from engine.api import DeliveryOutput, deliver_outputs

    if config is not None:
        if topic or pool:
            raise UserError("give either a configuration or --topic/--pool, not both")
        # only here: the configuration's model and YAML reader take a tenth of a second
        from engine.api import config_outputs, load_config

        outputs = config_outputs(load_config(config))
    else:
        if not topic or not pool:
            raise UserError("give --topic and --pool (or an ETL configuration)")
        outputs = [DeliveryOutput(pool, topic)]
    the_lake = staged_lake(lake)
    registry = conn.registry(required=fmt is OutputFormat.avro)
    if shaper is not None and not shaper.is_file():
        raise UserError(f"{shaper}: no such shaper file")
    spark: Callable[[], SparkSession] | None = None
    if shaper is not None:
        spark = functools.partial(spark_session, spark_master)

    from engine.api import DeliveryOptions

    options = DeliveryOptions(
        kafka=conn.kafka(), registry=registry, format=fmt.value, take_over=take_over,
        shaper=shaper, partitions=partitions, replication=replication, spark=spark,
        batch_records=batch,
    )  # fmt: skip
    chosen = None if envelope is None else envelope.value
    if continuous:
        _serve_continuous(
            the_lake, outputs, options, chosen, config,
            ApiOptions(http, control_token_file, http_public_read, wedged_after, not no_api),
            log_format,
        )  # fmt: skip
        return
    stop = threading.Event()
    with stop_on_signals(stop, "the transaction"):
        statuses = deliver_outputs(
            the_lake,
            outputs,
            options,
            stop=stop,
            on_event=lambda event: status_line(event.message, event.at),
            continuous=continuous,
            envelope=chosen,
        )
    for status in statuses:
        delivered = "-" if status.delivered_offset is None else status.delivered_offset
        status_line(
            f"{status.topic}: {status.records_delivered} message(s) produced; delivered up to "
            f"pool offset {delivered}"
        )


def _serve_continuous(
    lake: "Lake",
    outputs: "list[DeliveryOutput]",
    options: "DeliveryOptions",
    envelope: str | None,
    config: Path | None,
    api: ApiOptions,
    log_format: LogFormat,
) -> None:
    """``--continuous``: the to-kafka loop in this thread, serving the API meanwhile."""
    from engine.api import ServedProcess, ToKafkaService

    name = "+".join(sorted(o.topic for o in outputs))
    if config is not None:
        from engine.api import load_config

        name = load_config(config).name
    lines = Lines(log_format, name)
    lines.fold("to-kafka", len(outputs))
    folded = lines.folds("to-kafka")
    service = ToKafkaService(
        outputs,
        lake,
        options,
        envelope=envelope,
        on_event=lines.event if lines.json or folded else _said,
    )
    process = ServedProcess(name, "to-kafka", loops=lambda: {"to-kafka": service})
    stop = threading.Event()
    with lines.engine_log(), serving(process, api, lines), stop_on_signals(stop, "the transaction"):
        try:
            service.run(stop)
        finally:
            lines.unfold()
    for status in service.status().detail or ():
        delivered = "-" if status.delivered_offset is None else status.delivered_offset
        lines.note(
            f"{status.topic}: {status.records_delivered} message(s) produced; delivered up to "
            f"pool offset {delivered}",
            loop="to-kafka",
        )


def _said(event: "ServiceEvent") -> None:
    """A delivery's event as today's line (the service's own start and stop aside)."""
    if event.kind not in ("started", "stopped") or event.fields.get("topic"):
        status_line(event.message, event.at)


def register(app: typer.Typer) -> None:
    """Add `to-kafka` to ``app`` as a top-level command."""
    app.command(name="to-kafka")(with_connection()(to_kafka))


def make_app() -> typer.Typer:
    """A typer app with just these commands (tests, ``python -m``)."""
    return standalone_app(register)


if __name__ == "__main__":
    make_app()()
