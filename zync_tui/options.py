"""Command-line options shared by several `zync` commands.

Each is an ``Annotated`` type for a typer parameter, e.g.::

    def query(..., spark_master: SparkMasterOption = None) -> None:
        spark = get_spark(load_spark_settings(spark_master))
"""

# No `from __future__ import annotations`: typer reads the annotations at import time.

from typing import Annotated

import typer

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
