"""Evaluating a pass's rules in Spark, in one job.

The candidates (:mod:`engine.etl.read`) are assigned their first matching rule (cached
once for a cold pass); every rule is planned (:mod:`engine.etl.rules`,
:mod:`engine.etl.txn`), small sides broadcast, all as ONE SQL statement
(:class:`engine.etl.plan_context.PassQuery`). The result — every candidate's fate and every output, its JSON
made by ``to_json`` — stays on the executors (persisted); one Spark job brings the
driver the fates (a few small columns per input record) and the number of outputs per
output topic, and the driver decides (:func:`engine.etl.plan.decide`). A small pass, up
to :data:`DRIVER_OUTPUT_ROWS` candidates, brings its outputs along in that job: a Spark
write costs more than it saves there; the rows are the same either way.

pyspark is imported inside the functions (deferred: importing the engine does not load
Spark).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.etl import read
from engine.etl.checked import Checked
from engine.etl.cursors import Positions
from engine.etl.plan import Plan, ReadFrom, decide, empty_plan
from engine.etl.plan_context import (
    DEAD,
    FATE_COLUMNS,
    NO_RULE,
    OUTPUT_COLUMNS,
    RESULT_TYPES,
    PassQuery,
)
from engine.etl.pools import EtlPools
from engine.etl.rules import ASSIGNED_COLUMNS, assign_sql, parsed_sql, plan_rule, plan_unmatched
from engine.etl.spark_errors import quiet_spark_errors
from engine.etl.sql import quote
from engine.etl.timings import Timings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Up to this many candidates, joins broadcast their small side (no shuffle).
BROADCAST_ROWS = 200_000
#: Up to this many candidates, a pass's outputs come to the driver with the fates (one
#: Spark job) and are written with the markers; above, the executors write them.
DRIVER_OUTPUT_ROWS = 20_000


@dataclass(frozen=True)
class WarmRead:
    """A pass's input in memory: the rows (``FRESH_SCHEMA``) and this ETL's markers
    above the cursors, from the ETL's window (``source="window"``,
    :mod:`engine.etl.window`) or read from the Delta log by delta-rs (``"log"``,
    :func:`engine.etl.window.log_read`: a small input after a start)."""

    rows: pa.Table
    done: pa.Table
    source: ReadFrom = "window"


def plan_pass(
    pools: EtlPools,
    positions: Positions,
    checked: Checked,
    warm: WarmRead | None = None,
    timings: Timings | None = None,
) -> Plan:
    """Read and plan in Spark; one job (plus one for the done markers, if any can
    exist) brings the fates and the output counts to the driver, which decides. The
    outputs stay persisted on the executors until the plan is released. With ``warm``,
    the rows and markers come from memory: a small local frame, no Delta read."""
    timings = timings or Timings()
    if warm is not None:
        if warm.rows.num_rows == 0 and warm.done.num_rows == 0:
            return _with_read(empty_plan(positions), None, warm, warm.done)
        fresh = pools.spark.createDataFrame(warm.rows)
        done = warm.done
    else:
        cold = read.fresh_records(pools, positions)
        if cold is None:
            return empty_plan(positions)
        # deferred: pyspark
        from pyspark import StorageLevel

        # The statement reads the input in several places, and delta-spark would list and
        # filter the table's files at each (a Spark job each): read once, kept until the
        # plan is released (Plan.release, after the outputs that are computed from it).
        fresh = cold.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if warm is None:
            with timings.phase("read"):
                done = read.done_markers(pools, positions)
        with timings.phase("evaluate"):
            evaluated = _evaluate(pools, checked, fresh, done, warm)
        with timings.phase("decide"):
            return _decided(pools, positions, evaluated, fresh, warm, done)
    except BaseException:
        if warm is None:
            fresh.unpersist()
        raise


@dataclass
class _Evaluated:
    """What the Spark job brought back: fates and counts (and, for a small pass, the
    outputs) as Arrow; for a large pass the result persisted on the executors."""

    table: pa.Table
    local: bool
    result: DataFrame | None = None
    #: Frees what the persisted result was computed from (the cached assigned
    #: candidates, the shared CTEs, their views and the input views). It runs only
    #: after the result is unpersisted: Spark drops the caches of every plan built on a
    #: cache it uncaches, so the outputs would be computed again when they are written.
    release_inputs: Callable[[], None] = lambda: None

    def release(self) -> None:
        if self.result is not None:
            self.result.unpersist()
        self.release_inputs()


def _evaluate(
    pools: EtlPools, checked: Checked, fresh: DataFrame, done: pa.Table, warm: WarmRead | None
) -> _Evaluated:
    """The pass's one SQL statement (:class:`PassQuery`), run. Cold, the assigned
    candidates are cached and counted first (every branch of the statement reads them),
    and a large pass caches the CTEs the statement reads several times; warm, they are
    computed from a local frame of a few rows and become one (a local relation)."""
    # deferred: pyspark
    from pyspark import StorageLevel

    spark = pools.spark
    config = pools.config
    types = pools.types()
    query = PassQuery(config, types, checked)
    names = (query.name("fresh"), query.name("done"))
    # The views and caches live until the evaluation is released: a large pass's
    # outputs are computed from them again when written (read.register_input_views).
    fresh_view, done_view, drop_views = read.register_input_views(spark, fresh, done, names)
    assigned = query.name("assigned")
    cand_name = query.name("cand")
    local = query.name("local")
    cached: DataFrame | None = None
    #: Temp views of this evaluation (with their frame when it is cached), in order.
    views: list[tuple[str, DataFrame | None]] = []

    def release_inputs() -> None:
        for name, frame in reversed(views):
            spark.catalog.dropTempView(name)
            if frame is not None:
                frame.unpersist()
        spark.catalog.dropTempView(assigned)
        if cached is not None:
            cached.unpersist()
        spark.catalog.dropTempView(local)
        spark.catalog.dropTempView(cand_name)
        drop_views()

    kept = False
    with quiet_spark_errors():
        try:
            # A view, not a CTE: Spark finds the cache of the assigned candidates only
            # when its plan holds no CTE (PassQuery.take_views).
            cand = read.candidates_sql(fresh_view, done_view, small=True)
            spark.sql(cand).createOrReplaceTempView(cand_name)
            assigned_sql = assign_sql(config, cand_name, types)
            # The rules read the assigned candidates at a dozen places of the statement
            # (each rule's sides, fates and outputs), so they are a view, not a CTE that
            # Spark would analyse and optimise again at each place. Cold, the view is cached
            # on the executors; warm, the few rows come to the driver and go back as a local
            # relation (bench/RESULTS.md, "Latency": the statement's optimisation halves).
            # Every part of a rule reads only the records assigned to it, so a warm pass
            # plans only the rules it holds records of (``present``; None: every rule).
            present: set[int] | None = None
            if warm is None:
                cached = spark.sql(assigned_sql).cache()
                count = cached.count()
                cached.createOrReplaceTempView(assigned)
            else:
                count = warm.rows.num_rows
                # without the parsed columns: they are added again on the driver's
                # few rows (the local relation), rather than sent through Arrow
                candidates = spark.sql(
                    f"SELECT {', '.join(ASSIGNED_COLUMNS)} FROM ({assigned_sql})"
                ).toArrow()
                present = set(pc.unique(candidates.column("__rule")).to_pylist())
                spark.createDataFrame(candidates).createOrReplaceTempView(local)
                spark.sql(parsed_sql(config, types, local)).createOrReplaceTempView(assigned)
            query.small = count <= BROADCAST_ROWS
            query.fates(fresh_view, label=None, status=quote(DEAD), where="__dead")
            for index in range(len(config.transforms) if count else 0):
                if present is None or index in present:
                    plan_rule(query, index, assigned)
            if count and (present is None or NO_RULE in present):
                plan_unmatched(query, assigned)
            if count > DRIVER_OUTPUT_ROWS:
                # Spark inlines a CTE at each use: a large pass computes the ones it
                # reads several times once, cached until the plan is released. Every CTE
                # becomes a view, so that no cached plan holds one (take_views).
                for name, select, shared in query.take_views():
                    frame = spark.sql(select)
                    if shared:
                        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
                    frame.createOrReplaceTempView(name)
                    views.append((name, frame if shared else None))
            result = spark.sql(query.text())
            if count <= DRIVER_OUTPUT_ROWS:
                return _Evaluated(result.toArrow(), local=True)
            result = result.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                evaluated = _Evaluated(_summarize(result), False, result, release_inputs)
            except BaseException:
                result.unpersist()
                raise
            kept = True
            return evaluated
        finally:
            if not kept:
                release_inputs()


def _decided(
    pools: EtlPools,
    positions: Positions,
    evaluated: _Evaluated,
    fresh: DataFrame,
    warm: WarmRead | None,
    done: pa.Table,
) -> Plan:
    # deferred: pyspark
    from pyspark.sql import functions as F

    table = evaluated.table
    kind = table.column("kind")
    fates_ = table.filter(pc.equal(kind, "f"))
    if evaluated.local:
        outputs = table.filter(pc.equal(kind, "o"))
        grouped = outputs.group_by("out", use_threads=False).aggregate([([], "count_all")])
        counts = _counts(grouped.column("out"), grouped.column("count_all"))
        plan = decide(pools, positions, done, fates_, counts)
        if plan.counts:
            plan.local_outputs = outputs.select(list(OUTPUT_COLUMNS))
        return _with_read(plan, fresh, warm, done)
    result = evaluated.result
    assert result is not None
    counted = table.filter(pc.equal(kind, "c"))
    counts = _counts(counted.column("topic"), counted.column("offset"))
    try:
        plan = decide(pools, positions, done, fates_, counts)
    except BaseException:
        evaluated.release()
        raise
    if plan.counts:
        plan.release_result = evaluated.release
        plan.outputs = result.where(F.col("kind") == "o").select(*OUTPUT_COLUMNS)
    else:
        evaluated.release()
    return _with_read(plan, fresh, warm, done)


def _with_read(
    plan: Plan, fresh: DataFrame | None, warm: WarmRead | None, done: pa.Table
) -> Plan:
    """Note on the plan what the pass read, for the window of the next pass."""
    plan.done = done
    if warm is not None:
        plan.read_rows = warm.rows
        plan.read_from = warm.source
    else:
        plan.fresh = fresh
        if fresh is not None:
            plan.release_read = fresh.unpersist
    return plan


def _summarize(result: DataFrame) -> pa.Table:
    """In one Spark job, for the driver: the fate rows (kind ``f``, fate columns only)
    and one row per output topic (kind ``c``: the topic in ``topic``, the number of its
    outputs in ``offset``)."""
    # deferred: pyspark
    from pyspark.sql import functions as F

    fates_ = result.where(F.col("kind") == "f").select(*FATE_COLUMNS, "kind")
    counts = (
        result.where(F.col("kind") == "o")
        .groupBy("out")
        .agg(F.count(F.lit(1)).alias("offset"))
        .select(
            *[
                (
                    F.col("out").alias("topic")
                    if name == "topic"
                    else F.col("offset")
                    if name == "offset"
                    else F.lit(None).cast(RESULT_TYPES[name]).alias(name)
                )
                for name in FATE_COLUMNS
            ],
            F.lit("c").alias("kind"),
        )
    )
    return fates_.unionByName(counts).toArrow()


def _counts(topics: pa.ChunkedArray, counts: pa.ChunkedArray) -> dict[str, int]:
    return dict(zip(topics.to_pylist(), counts.to_pylist(), strict=True))
