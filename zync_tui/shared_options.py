"""Command-line options shared by several `zync` commands, and what they mean.

Each is an ``Annotated`` type for a typer parameter, e.g.::

    def query(..., spark_master: SparkMasterOption = None) -> None:
        spark = spark_session(spark_master)
"""

# No `from __future__ import annotations`: typer reads the annotations at import time.

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from engine.api import Lake, Spark

SparkMasterOption = Annotated[
    str | None,
    typer.Option(
        "--spark-master",
        metavar="URL",
        help=(
            "Spark master URL, e.g. spark://host:7077 "
            "(default: $ZYNC_SPARK_MASTER, ~/.zync/spark.json, else local[*])"
        ),
        show_default=False,
    ),
]

LakeOption = Annotated[
    str | None,
    typer.Option(
        "--lake",
        metavar="PATH|URL",
        help="The lake: a directory or s3://BUCKET/PREFIX (default: $ZYNC_LAKE, the lake in ~/.zync/storage.json, else ~/.zync/lake).",
        show_default=False,
    ),
]


def spark_session(master: str | None = None) -> "Spark":
    """The SparkSession: ``master`` (--spark-master), else $ZYNC_SPARK_MASTER, spark.json,
    local[*]."""
    # engine.api loads pyarrow, delta-rs and Kafka: imported when a command runs, so
    # `zync --help` stays fast (likewise in every command module)
    from engine.api import get_spark, load_spark_settings

    return get_spark(load_spark_settings(master))


def open_lake(lake: str | Path | None, *, must_exist: str = "", create: bool = False) -> "Lake":
    """The lake ``lake`` (--lake: a directory or s3://BUCKET/PREFIX), else $ZYNC_LAKE,
    else the lake of ~/.zync/storage.json, else ~/.zync/lake.

    A local lake is created when ``create``; when ``must_exist`` names what is missing, a
    local lake that is not there is a one-line error saying so. Open the lake before
    starting Spark: an S3 lake gives the session its s3a settings."""
    from engine.api import Lake, resolve_lake  # deferred: see spark_session
    from zync_tui.errors import UserError

    where = resolve_lake(lake)
    if where.is_local:
        if create:
            where.path.mkdir(parents=True, exist_ok=True)
        elif must_exist and not where.path.is_dir():
            raise UserError(f"no lake at {where}: {must_exist}")
    return Lake(where)
