"""`zync produce`, `zync consume`, `zync ls`, `zync info`: the everyday Kafka commands.

The lead's CLI adds them with :func:`register`. Each command takes the connection
options (``--bootstrap-servers``, ``--registry-url``, ...) on top of ``~/.zync/kafka.json``,
``~/.zync/schema_registry.json`` and the ``ZYNC_KAFKA_*`` / ``ZYNC_REGISTRY_*`` variables.
Errors are one line on stderr (exit 1); Ctrl-C exits with 130 and no traceback.

Run alone: ``python -m zync_tui.commands.kafka consume -t TOPIC``.
"""

# No `from __future__ import annotations`: the connection options are added to each
# command's signature at import time, and typer needs real annotation objects.

import enum
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zync_tui.commands import standalone_app
from zync_tui.connection import Connection, with_connection
from zync_tui.durations import duration_option
from zync_tui.errors import UserError
from zync_tui.long_running import OutputFormat

if TYPE_CHECKING:
    from engine.api import BadRecord

T = TypeVar("T")

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)

#: What `zync produce` writes: the formats an output is delivered in.
ProduceFormat = OutputFormat


class ConsumeFormat(enum.StrEnum):
    auto = "auto"
    avro = "avro"
    connect_json = "connect-json"
    json = "json"


# --------------------------------------------------------------------------- produce

TopicOption = Annotated[str, typer.Option("--topic", "-t", help="The topic.", show_default=False)]


def produce(
    conn: Connection,
    topic: TopicOption,
    files: Annotated[
        list[str] | None,
        typer.Argument(help="JSON lines or a JSON array; '-' or nothing reads standard input.",
                       show_default=False, metavar="FILE"),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option("--key", "-k", metavar="FIELD",
                     help="Take each record's key from this field of the value (after.ID "
                          "reaches nested fields)."),
    ] = None,
    fmt: Annotated[
        ProduceFormat | None,
        typer.Option("--format", "-f",
                     help="Encoding. Default: avro when a Schema Registry is configured, "
                          "else json.", show_default=False),
    ] = None,
    value_schema: Annotated[
        Path | None,
        typer.Option(metavar="FILE.avsc",
                     help="Value schema (Avro .avsc; a Connect schema with connect-json). "
                          "Default: the subject's latest schema when the records fit it, "
                          "else inferred."),
    ] = None,
    key_schema: Annotated[
        Path | None, typer.Option(metavar="FILE.avsc", help="Key schema, likewise.")
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-N", help="Namespace of inferred Avro schemas.")
    ] = None,
    partitions: Annotated[
        int, typer.Option(min=1, help="Partitions of the topic when zync creates it.")
    ] = 1,
    bytes_fields: Annotated[
        str | None,
        typer.Option(metavar="A,B", help="Fields holding base64 text to send as bytes "
                                         "(key.X for key fields)."),
    ] = None,
    envelope: Annotated[
        bool | None,
        typer.Option("--envelope/--no-envelope", show_default=False,
                     help='Records are {"key": ..., "value": ...} envelopes (default: '
                          "detected, when every record is one)."),
    ] = None,
) -> None:
    """Send JSON records to a topic (Avro with the Schema Registry, Connect JSON, or JSON).

    Every record is checked against its schema before any is sent; a mistake names the input line and field. Registers <topic>-key / <topic>-value and creates the topic when missing.
    """
    from engine.api import (
        Format,
        ProduceOptions,
        RegistrySchemas,
        describe_produce,
        load_input_records,
        load_schema_file,
        read_input_sources,
    )
    from engine.api import produce as produce_records

    profile = conn.kafka()
    registry_profile = conn.registry(required=fmt is ProduceFormat.avro)
    if fmt is None:
        fmt = ProduceFormat.avro if registry_profile is not None else ProduceFormat.json
    if not files and sys.stdin.isatty():
        _err.print("reading JSON records from standard input (end with Ctrl-D)")
    sources = read_input_sources(files or [])
    records = load_input_records(sources, key_field=key, envelope=envelope)
    options = ProduceOptions(
        topic=topic,
        format=Format.parse(fmt.value),
        key_schema=load_schema_file(key_schema) if key_schema else None,
        value_schema=load_schema_file(value_schema) if value_schema else None,
        namespace=namespace,
        bytes_fields=tuple(f.strip() for f in (bytes_fields or "").split(",") if f.strip()),
        partitions=partitions,
        timeout=conn.timeout,
    )
    registry = (
        RegistrySchemas(registry_profile, timeout=conn.timeout)
        if fmt is ProduceFormat.avro and registry_profile is not None
        else None
    )
    report = produce_records(profile, records, options, registry)
    for line in describe_produce(report):
        _out.print(escape(line))


# --------------------------------------------------------------------------- consume


def consume(
    conn: Connection,
    topic: TopicOption,
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the oldest record.")
    ] = False,
    offset: Annotated[
        int | None, typer.Option(min=0, help="Start at this offset (in every partition read).")
    ] = None,
    group: Annotated[
        str | None,
        typer.Option("--group", "-g",
                     help="Read as this consumer group: resume at its committed offsets and "
                          "commit the records printed (new group: latest, or the oldest with "
                          "--from-beginning)."),
    ] = None,
    partition: Annotated[
        list[int] | None,
        typer.Option("--partition", "-p", help="Read only this partition (repeatable)."),
    ] = None,
    max_records: Annotated[
        int | None, typer.Option("--max", "-n", min=0, help="Stop after N records.")
    ] = None,
    exit_after: Annotated[
        float | None,
        typer.Option(parser=duration_option, metavar="DURATION",
                     help="Stop after this long without a new record (250ms, 30s, 5m), counted once "
                          "every partition has answered. Default: wait for records until Ctrl-C."),
    ] = None,
    fmt: Annotated[
        ConsumeFormat,
        typer.Option("--format", "-f",
                     help="Value format; auto: Avro (magic byte 0) with the registry, "
                          "Connect JSON ({schema, payload}), else JSON."),
    ] = ConsumeFormat.auto,
    key_format: Annotated[
        ConsumeFormat | None,
        typer.Option(help="Key format (default: auto; with auto, keys that are not JSON "
                          "print as strings).", show_default=False),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Stop with exit code 1 at the first undecodable "
                                            "record instead of reporting it and going on.")
    ] = False,
) -> None:
    """Print a topic's records, one JSON line each: {"kafka": {...}, "key", "value"}.

    Starts at the end (new records only) unless told otherwise, and waits for records until Ctrl-C, --max or --exit-after. The kafka part holds topic, partition, offset and timestamp (ms). Undecodable records are reported on stderr with topic, partition and offset, and skipped (--strict: exit 1).
    """
    from engine.api import (
        CONSUME_BEGINNING,
        CONSUME_END,
        ConsumeOptions,
        RegistrySchemas,
        consumed_json,
    )
    from engine.api import consume as consume_records

    if sum([from_beginning, offset is not None]) > 1 or (group and offset is not None):
        raise UserError("--from-beginning, --offset and --group: choose one "
                        "(--from-beginning may go with --group)")
    profile = conn.kafka()
    needs_registry = ConsumeFormat.avro in (fmt, key_format)
    registry_profile = conn.registry(required=needs_registry)
    schemas = (
        RegistrySchemas(registry_profile, timeout=conn.timeout)
        if registry_profile is not None
        else None
    )
    start: str | int = CONSUME_END
    if from_beginning:
        start = CONSUME_BEGINNING
    elif offset is not None:
        start = offset
    options = ConsumeOptions(
        topic=topic,
        start=start,
        group=group,
        partitions=tuple(partition) if partition else None,
        max_records=max_records,
        exit_after=exit_after,
        value_format=fmt.value,
        key_format=(key_format or ConsumeFormat.auto).value,
        strict=strict,
        timeout=conn.timeout,
    )

    def report(bad: "BadRecord") -> None:
        _err.print(f"[bold red]error:[/] {escape(str(bad))}")

    records = consume_records(profile, options, schemas=schemas, on_error=report)
    out = sys.stdout
    try:
        for record in records:
            out.write(consumed_json(record))
            out.write("\n")
            out.flush()
    finally:
        records.close()


# --------------------------------------------------------------------------- ls


def ls(
    conn: Connection,
    long: Annotated[bool, typer.Option("--long", "-l", help="Show each latest schema.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the Schema Registry's subjects with their latest version and schema id."""
    from engine.api import RegistrySchemas

    schemas = RegistrySchemas(conn.registry(required=True), timeout=conn.timeout)
    rows = []
    for subject in sorted(schemas.subjects()):
        latest = schemas.latest(subject)
        rows.append(
            {
                "subject": subject,
                "version": latest.version,
                "id": latest.schema_id,
                "type": latest.schema.schema_type or "AVRO",
                "schema": latest.schema.schema_str,
            }
        )
    if as_json:
        for row in rows:
            row["schema"] = _parsed(row["schema"])
            if not long:
                del row["schema"]
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        _err.print("no subjects")
        return
    if long:
        for row in rows:
            _out.print(
                f"[bold]{escape(row['subject'])}[/]  version {row['version']}  id {row['id']}"
                f"  {row['type']}"
            )
            _out.print(escape(json.dumps(_parsed(row["schema"]), indent=2)), highlight=False)
            _out.print()
        return
    table = Table(box=None, pad_edge=False)
    for column in ("subject", "version", "id", "type"):
        table.add_column(column, justify="right" if column in ("version", "id") else "left")
    for row in rows:
        table.add_row(escape(row["subject"]), str(row["version"]), str(row["id"]), row["type"])
    _out.print(table)


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


# --------------------------------------------------------------------------- info


def info(
    conn: Connection,
    topic: TopicOption,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show a topic's partitions with their low and high watermarks.

    The low watermark is the first offset the partition still holds, the high watermark the offset its next record gets (with transactions, it includes the markers that close them).
    """
    from engine.api import topic_watermarks

    marks = topic_watermarks(conn.kafka(), topic, timeout=conn.timeout)
    if as_json:
        doc = {
            "topic": topic,
            "partitions": [
                {"partition": p, "low": low, "high": high} for p, (low, high) in marks.items()
            ],
        }
        typer.echo(json.dumps(doc, indent=2))
        return
    table = Table(title=f"{escape(topic)} (watermarks as the broker reports them)",
                  title_justify="left", box=None, pad_edge=False)
    for column in ("partition", "low", "high", "high - low"):
        table.add_column(column, justify="right")
    for p, (low, high) in marks.items():
        table.add_row(str(p), str(low), str(high), str(high - low))
    _out.print(table)


# --------------------------------------------------------------------------- wiring


def register(app: typer.Typer) -> None:
    """Add `produce`, `consume`, `ls` and `info` to ``app`` as top-level commands."""
    app.command(name="produce")(with_connection()(produce))
    app.command(name="consume")(with_connection()(consume))
    app.command(name="ls")(with_connection(kafka=False)(ls))
    app.command(name="info")(with_connection(registry=False)(info))


def make_app() -> typer.Typer:
    """A typer app with just these commands (tests, ``python -m``)."""
    return standalone_app(register)


if __name__ == "__main__":
    make_app()()
