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
    from pyspark.sql import SparkSession

    from engine.api import Lake

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
    Path | None,
    typer.Option(
        "--lake",
        metavar="PATH",
        help="The lake directory (default: $ZYNC_LAKE, else ~/.zync/lake).",
        show_default=False,
    ),
]


def spark_session(master: str | None = None) -> "SparkSession":
    """The SparkSession: ``master`` (--spark-master), else $ZYNC_SPARK_MASTER, spark.json,
    local[*]."""
    # engine.api loads pyarrow, delta-rs and Kafka: imported when a command runs, so
    # `zync --help` stays fast (likewise in every command module)
    from engine.api import get_spark, load_spark_settings

    return get_spark(load_spark_settings(master))


def open_lake(path: Path | None) -> "Lake":
    """The lake at ``path`` (--lake), else $ZYNC_LAKE, else ~/.zync/lake."""
    from engine.api import Lake, lake_path  # deferred: see spark_session

    return Lake(path if path is not None else lake_path())
