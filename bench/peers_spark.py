"""The Spark programs bench/peers.py times, each in its own process.

    python bench/peers_spark.py ingest --bootstrap HOST:PORT --registry URL --topic TOPIC \\
        --table DIR --checkpoint DIR
    python bench/peers_spark.py floor --table DIR --runs R

``ingest`` is a Kafka-to-Delta job as a Spark user writes it: a Structured Streaming
query with the Kafka source (spark-sql-kafka-0-10, the topic from the earliest offset),
``from_avro`` on ``substring(key|value, 6)`` (the Avro body after the 5-byte Confluent
header) with the subject's latest schema read from the Schema Registry, and a Delta
sink (delta-spark) with a checkpoint, ``trigger(availableNow=True)``: it reads what the
topic holds, writes it and stops.

``floor`` is the cost of a warm Spark job over N rows: the table ``ingest`` wrote is
read, cached and counted once (warm-up), then one job (``sum(offset)`` over the cached
frame) is timed ``--runs`` times.

Both take the SparkSession from :func:`engine.spark.get_spark`, so the jars (delta-spark,
the Kafka source, spark-avro) and the configuration are zync's own; the master is
``$ZYNC_SPARK_MASTER``, else ``local[2]``. Each prints one JSON line with its timings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _spark() -> Any:
    from engine.settings.spark import SparkSettings
    from engine.spark import get_spark

    return get_spark(SparkSettings(master=os.environ.get("ZYNC_SPARK_MASTER") or "local[2]"))


def latest_schema(registry: str, subject: str) -> str:
    """The Avro schema (JSON text) of the subject's latest version."""
    with urllib.request.urlopen(f"{registry}/subjects/{subject}/versions/latest") as response:
        return str(json.load(response)["schema"])


def ingest(args: argparse.Namespace) -> dict[str, float]:
    started = time.monotonic()
    spark = _spark()
    session = time.monotonic() - started

    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    key_schema = latest_schema(args.registry, f"{args.topic}-key")
    value_schema = latest_schema(args.registry, f"{args.topic}-value")
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    decoded = records.select(
        "topic",
        "partition",
        "offset",
        "timestamp",
        from_avro(F.expr("substring(key, 6)"), key_schema).alias("key"),
        from_avro(F.expr("substring(value, 6)"), value_schema).alias("value"),
    )
    begun = time.monotonic()
    query = (
        decoded.writeStream.format("delta")
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start(args.table)
    )
    query.awaitTermination()
    return {"session_s": session, "query_s": time.monotonic() - begun}


def floor(args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import functions as F

    spark = _spark()
    frame = spark.read.format("delta").load(args.table).cache()
    rows = frame.count()  # materializes the cache and warms the JVM up
    frame.agg(F.sum("offset")).collect()
    seconds = []
    for _ in range(args.runs):
        started = time.monotonic()
        frame.agg(F.sum("offset")).collect()
        seconds.append(time.monotonic() - started)
    frame.unpersist()
    return {"rows": rows, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("ingest")
    run.add_argument("--bootstrap", required=True)
    run.add_argument("--registry", required=True)
    run.add_argument("--topic", required=True)
    run.add_argument("--table", required=True)
    run.add_argument("--checkpoint", required=True)
    warm = sub.add_parser("floor")
    warm.add_argument("--table", required=True)
    warm.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    report = ingest(args) if args.command == "ingest" else floor(args)
    from engine.spark import stop_spark

    stop_spark()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
