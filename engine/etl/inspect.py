"""Looking at an ETL without running it: the records still pending, the records it
expired (with their full_records joined back from the raw pools), and what a pass would
read and run (``explain``: positions, reads, each rule's SQL and Spark's plans).

Each function reads the pools' newest snapshots; :class:`engine.etl.run.EtlRunner`
calls them under its lock. pyspark is imported inside the functions (deferred:
importing the engine does not load Spark).
"""

from __future__ import annotations

import contextlib
import io
import uuid
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from engine.etl import markers as mk
from engine.etl import read
from engine.etl.cursors import cursor_filter
from engine.etl.etl_pools import EtlPools
from engine.etl.expiry import age, newest_timestamps
from engine.etl.plan_context import NO_RULE, PassQuery
from engine.etl.result import NOTHING_NEW, ExpiredRecord, PendingRecord
from engine.etl.rules import assign_sql, plan_rules
from engine.etl.spark_errors import quiet_spark_errors

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def pending(pools: EtlPools, *, limit: int | None = None) -> list[PendingRecord]:
    """Input records after the cursors that are not processed yet, in
    (topic, partition, offset) order, with the rule that will take them (the first
    ``limit`` of them, when given)."""
    config = pools.config
    pools.refresh()
    positions = pools.positions()
    if not read.above_floors(pools, positions):
        return []  # no raw file at or above the floors: nothing pending, no Spark started
    pools.check()
    fresh = read.fresh_records(pools, positions)
    if fresh is None:
        return []
    done = read.done_markers(pools, positions)
    spark = pools.spark
    token = uuid.uuid4().hex[:10]
    names = (f"__z{token}_fresh", f"__z{token}_done")
    with read.input_views(spark, fresh, done, names) as (fresh_view, done_view), \
            quiet_spark_errors():  # fmt: skip
        cand = f"__z{token}_cand"
        candidates = read.candidates_sql(fresh_view, done_view, small=True)
        assigned = assign_sql(config, cand, pools.types())
        selected = spark.sql(
            f"WITH {cand} AS ({candidates}) SELECT kafka.topic AS topic, "
            "kafka.partition AS partition, kafka.offset AS offset, kafka.timestamp AS ts, "
            f"key, seqno, __rule FROM ({assigned})"
        )
        if limit is not None:
            selected = selected.orderBy("topic", "partition", "offset").limit(limit)
        rows = selected.toArrow()
    rows = rows.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
    newest = newest_timestamps(rows.select(["topic", "ts"]), positions.newest)
    found = []
    for row in rows.to_pylist():
        index = row["__rule"]
        found.append(
            PendingRecord(
                topic=row["topic"],
                partition=row["partition"],
                offset=row["offset"],
                key=row["key"],
                rule=None if index == NO_RULE else config.rule_label(index),
                timestamp=row["ts"],
                age=age(newest.get(row["topic"]), row["ts"]),
                seqno=row["seqno"],
            )
        )
    return found


def expired(pools: EtlPools, *, limit: int | None = None) -> list[ExpiredRecord]:
    """Input records this ETL expired, with their full record joined back from raw (the
    first ``limit`` in (topic, partition, offset) order, when given). The markers are
    read by delta-rs; Spark joins the full_records back only when there are some."""
    config = pools.config
    pools.refresh()
    positions = pools.positions()
    gone = mk.expired_marker_rows(pools.staging, config.name).sort_by(
        [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
    )
    if limit is not None:
        gone = gone.slice(0, limit)
    if gone.num_rows == 0:
        return []
    # deferred: pyspark
    from pyspark.sql import functions as F

    spark = pools.spark
    side = spark.createDataFrame(
        gone.select(["topic", "partition", "offset", "rule"]).rename_columns(
            ["__t", "__p", "__o", "__rule"]
        )
    )
    full_records = []
    for pool_name in config.raw_pools:
        topics = [i.topic for i in config.inputs if i.pool == pool_name]
        raw = pools.raw(pool_name)
        df = raw.read(spark).where(F.col("marker").isNull() & F.col("kafka.topic").isin(topics))
        joined = df.join(
            F.broadcast(side),
            (F.col("kafka.topic") == F.col("__t"))
            & (F.col("kafka.partition") == F.col("__p"))
            & (F.col("kafka.offset") == F.col("__o")),
            "inner",
        )
        full_records.append(
            joined.select(
                F.col("kafka.topic").alias("topic"),
                F.col("kafka.partition").alias("partition"),
                F.col("kafka.offset").alias("offset"),
                F.col("kafka.timestamp").alias("timestamp"),
                "key",
                "value",
                "seqno",
                F.col("__rule").alias("rule"),
            ).toArrow()
        )
    table = pa.concat_tables(full_records) if full_records else None
    found: dict[tuple[str, int, int], dict[str, Any]] = {}
    if table is not None:
        for row in table.to_pylist():
            found[(row["topic"], row["partition"], row["offset"])] = row
    result = []
    for row in gone.sort_by(
        [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
    ).to_pylist():
        env = found.get((row["topic"], row["partition"], row["offset"]), {})
        ts = env.get("timestamp")
        result.append(
            ExpiredRecord(
                topic=row["topic"],
                partition=row["partition"],
                offset=row["offset"],
                key=env.get("key"),
                value=env.get("value"),
                rule=row["rule"],
                timestamp=ts,
                age=age(positions.newest.get(row["topic"]), ts),
                seqno=env.get("seqno"),
            )
        )
    return result


def explain(pools: EtlPools) -> str:
    """The positions, the reads, each rule's Spark SQL and the Spark plans a pass
    would run — without running it."""
    pools.refresh()
    checked = pools.check()
    positions = pools.positions()
    staging = pools.staging
    out = io.StringIO()
    cfg = pools.config
    out.write(f"ETL {cfg.name!r} from {cfg.source}\n")
    out.write(f"staging pool {cfg.staging_pool!r} at version {positions.staging_version}\n")
    out.write("positions:\n")
    for (topic, partition), cursor in sorted(positions.cursors.items()):
        out.write(f"  cursor {topic}/{partition} = {cursor}\n")
    if not positions.cursors:
        out.write("  no cursors yet: every input record is new\n")
    for topic, offset in sorted(positions.next_offsets.items()):
        out.write(f"  next offset {topic} = {offset}\n")
    for pool_name in cfg.raw_pools:
        raw = pools.raw(pool_name)
        floor = positions.floor(pool_name)
        files = len(raw.files(f"seqno >= {floor}")) if raw.last_seqno() >= floor else 0
        topics = [i.topic for i in cfg.inputs if i.pool == pool_name]
        out.write(
            f"read raw pool {pool_name!r} (version {raw.version}): {files} of "
            f"{len(raw.files())} file(s) with seqno >= {floor}, rows where "
            f"{cursor_filter(positions.cursors, topics)}\n"
        )
    mfiles = len(staging.files(f"seqno >= {positions.marker_floor}")) if positions.marker_floor else len(staging.files())
    out.write(
        f"read markers: {mfiles} of {len(staging.files())} staging file(s) with "
        f"seqno >= {positions.marker_floor}\n"
    )
    fresh = read.fresh_records(pools, positions)
    if fresh is None:
        out.write(f"\n{NOTHING_NEW}: no raw file at or above the floors\n")
        return out.getvalue()
    done = read.done_markers(pools, positions)
    types = pools.types()
    query = PassQuery(cfg, types, checked)
    spark = pools.spark
    names = (query.name("fresh"), query.name("done"))
    with read.input_views(spark, fresh, done, names) as (fresh_view, done_view), \
            quiet_spark_errors():  # fmt: skip
        cand = query.cte("cand", read.candidates_sql(fresh_view, done_view, small=True))
        query.assigned = query.cte("assigned", assign_sql(cfg, cand, types))
        query.fates(fresh_view, label=None, status="'dead'", where="__dead")
        plan_rules(query, range(len(cfg.transforms)))
        for index in range(len(cfg.transforms)):
            out.write(f"\n{cfg.describe_rule(index)} → {cfg.transforms[index].out}:\n")
            out.write(f"  {query.sql.get(index, '')}\n")
        out.write("\n== the pass as one SQL statement ==\n")
        out.write(query.text() + "\n")
        out.write("\n== Spark plan ==\n")
        out.write(_explain(spark.sql(query.text())))
    return out.getvalue()


def _explain(df: DataFrame) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        df.explain(mode="formatted")
    return buffer.getvalue()
