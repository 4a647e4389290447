"""`zync init --from-topics PATTERN`: a starter ETL configuration for every table a
connector captures — one pass-through rule per topic — written to a file to edit.
The lead's CLI adds it with :func:`register`."""

# No `from __future__ import annotations`: `with_connection` rebuilds the signature at
# import time and typer needs real annotation objects.

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from zync_tui.connection import Connection, with_connection
from zync_tui.errors import UserError

notes = Console(stderr=True, highlight=False, soft_wrap=True)


def init(
    conn: Connection,
    from_topics: Annotated[
        str,
        typer.Option(
            "--from-topics",
            metavar="GLOB",
            help="The topics to read: a shell glob, e.g. 'dbserver1.inventory.*' (several "
            "separated by commas). Kafka's own topics are left out.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Where to write the configuration (YAML)."),
    ] = Path("etl.yaml"),
    name: Annotated[
        str | None,
        typer.Option(
            help="The ETL's name (its markers and positions are kept under it); default: "
            "the file's name without .yaml.",
            show_default=False,
        ),
    ] = None,
    raw_pool: Annotated[str, typer.Option(help="The raw pool every topic goes to.")] = "Raw",
    staging_pool: Annotated[str, typer.Option(help="The staging pool of the outputs.")] = "Staging",
    output: Annotated[
        str,
        typer.Option(
            "--output",
            metavar="TEMPLATE",
            help="Each output topic's name: {table} is the input topic's last dot-separated "
            "part (a Debezium topic's table), {topic} the whole input topic.",
        ),
    ] = "clean.{table}",
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
) -> None:
    """Write a starter ETL configuration for every table a connector captures.

    Finds the topics the glob names, reads each one's newest records to see whether they
    are Debezium change events, and writes one raw pool of them all and one pass-through
    rule per topic into its own output topic: each change's key and the row after it (a
    delete: a tombstone, which a JDBC sink applies as a delete). Edit it, check it with
    `zync etl CONFIG --explain`, run it with `zync run CONFIG`.
    """
    from engine.api import (
        RegistrySchemas,
        check_reachable,
        dump_starter_config,
        matching_topics,
        sample_topics,
        starter_config,
        starter_header,
    )

    if out.exists() and not force:
        raise UserError(f"{out} exists: choose another --out, or --force to overwrite it")
    kafka = conn.kafka()
    partitions = check_reachable(kafka, conn.timeout)
    topics = matching_topics(partitions, from_topics)
    registry = conn.registry(required=False)
    schemas = RegistrySchemas(registry) if registry is not None else None
    notes.print(f"sampling {len(topics)} topic(s)")
    samples = sample_topics(kafka, {t: partitions[t] for t in topics}, schemas)
    config = starter_config(
        samples,
        name=name or out.stem,
        raw=raw_pool,
        staging=staging_pool,
        output=output,
    )
    text = starter_header(from_topics, samples) + dump_starter_config(config)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    debezium = sum(1 for s in samples.values() if s.debezium is not False)
    notes.print(
        f"wrote {out}: {len(topics)} rule(s) ({debezium} Debezium, "
        f"{len(topics) - debezium} copied as they are) from pool {raw_pool!r} to "
        f"{staging_pool!r}; next: `zync etl {out} --explain`"
    )


def register(app: typer.Typer) -> None:
    app.command(name="init", no_args_is_help=True)(with_connection()(init))
