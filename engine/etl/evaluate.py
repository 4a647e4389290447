"""Evaluating a pass's rules in Spark, as one SQL statement.

The candidates (:mod:`engine.etl.read`) are assigned their first matching rule (kept
on the executors for a cold pass: :class:`Kept`); every rule is planned
(:mod:`engine.etl.rules`, :mod:`engine.etl.txn`), small sides broadcast, all as ONE SQL
statement (:class:`engine.etl.plan_context.PassQuery`): every candidate's fate and every
output, its JSON made by ``to_json``. A small pass, up to :data:`DRIVER_OUTPUT_ROWS`
candidates, brings the whole result to the driver in one Spark job: a Spark write costs
more than it saves there. A large pass keeps its outputs on the executors, brings the
driver the fates (a few small columns per input record) and the number of outputs per
output topic, and writes the outputs once the driver has decided
(:func:`engine.etl.plan.decide`) and numbered them; the rows are the same either way.

pyspark is imported inside the functions (deferred: importing the engine does not load
Spark).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.etl import read
from engine.etl.checked import Checked
from engine.etl.config import TxnRule
from engine.etl.cursors import Positions
from engine.etl.etl_pools import EtlPools
from engine.etl.markers import count_by
from engine.etl.plan import Plan, ReadFrom, decide, empty_plan
from engine.etl.plan_context import (
    DEAD,
    FATE_COLUMNS,
    NO_RULE,
    OUTPUT_COLUMNS,
    PassQuery,
)
from engine.etl.rules import assign_sql, parses_in_assign, plan_rules
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


@dataclass(frozen=True)
class Kept:
    """A frame computed once and kept on the executors: Spark's local checkpoint. Its
    plan is the stored rows, so whatever reads it computes nothing again — Spark's
    cache is looked up by plan and can miss (SPARK-46741), and building its columnar
    form costs more (bench/RESULTS.md, "ETL throughput"). An executor lost with its
    part fails the pass; nothing is committed, and the next pass starts over."""

    frame: DataFrame

    def release(self) -> None:
        """Free the rows now (Spark would free them when the JVM collects the RDD)."""
        self.frame._jdf.logicalPlan().rdd().unpersist(False)


def keep(frame: DataFrame) -> Kept:
    """Compute ``frame`` now (one Spark job) and keep its rows (:class:`Kept`) as they
    are: pyspark's ``MEMORY_AND_DISK`` stores them serialized, which costs about twice
    as much to keep and to read (bench/RESULTS.md, "ETL throughput")."""
    # deferred: pyspark
    from pyspark import StorageLevel

    return Kept(frame.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK_DESER))


def plan_pass(
    pools: EtlPools,
    positions: Positions,
    checked: Checked,
    warm: WarmRead | None = None,
    timings: Timings | None = None,
) -> Plan:
    """Read and plan in Spark, bring the fates and the output counts to the driver,
    which decides. A large pass's outputs stay kept on the executors until the plan is
    released. With ``warm``, the rows and markers come from memory: a small local
    frame, no Delta read."""
    timings = timings or Timings()
    kept: Kept | None = None
    if warm is not None:
        if warm.rows.num_rows == 0 and warm.done.num_rows == 0:
            return _with_read(empty_plan(positions), warm, warm.done)
        by_rows = _by_rows(pools, positions, checked, warm, timings)
        if by_rows is not None:
            return by_rows
        fresh = pools.spark.createDataFrame(warm.rows)
        done = warm.done
    else:
        cold = read.fresh_records(pools, positions)
        if cold is None:
            return empty_plan(positions)
        # The statement reads the input in several places, and delta-spark would list and
        # filter the table's files at each (a Spark job each): read once, kept until the
        # plan is released (after the window of the next pass is taken from it).
        with timings.phase("read"), quiet_spark_errors():
            kept = keep(cold)
        fresh = kept.frame
    try:
        if warm is None:
            with timings.phase("read"):
                done = read.done_markers(pools, positions)
        with timings.phase("evaluate"):
            evaluated = _evaluate(pools, checked, fresh, done, warm)
        with timings.phase("decide"):
            plan = _decided(pools, positions, evaluated, warm, done)
    except BaseException:
        if kept is not None:
            kept.release()
        raise
    if kept is not None:
        plan.fresh = fresh
        plan.release_read = kept.release
    return plan


@dataclass
class _Evaluated:
    """What Spark brought back: the fates and the number of outputs per output topic
    as Arrow, and the outputs — brought along by a small pass, kept on the executors
    by a large one."""

    fates: pa.Table
    counts: dict[str, int]
    local_outputs: pa.Table | None = None
    result: Kept | None = None

    def release(self) -> None:
        if self.result is not None:
            self.result.release()


def _local(table: pa.Table) -> _Evaluated:
    """A small pass's result, fates and outputs in one table (told apart by ``kind``)."""
    kind = table.column("kind")
    outputs = table.filter(pc.equal(kind, "o"))
    fates_ = table.filter(pc.equal(kind, "f")).select(list(FATE_COLUMNS))
    counts = count_by(outputs, "out")
    return _Evaluated(fates_, counts, local_outputs=outputs.select(list(OUTPUT_COLUMNS)))


def _output_counts(outputs: DataFrame) -> dict[str, int]:
    """The number of kept outputs per output topic (a small Spark job)."""
    return {row["out"]: int(row["count"]) for row in outputs.groupBy("out").count().collect()}


def _evaluate(
    pools: EtlPools, checked: Checked, fresh: DataFrame, done: pa.Table, warm: WarmRead | None
) -> _Evaluated:
    """The pass's one SQL statement (:class:`PassQuery`), run. Cold, the assigned
    candidates are kept and counted first (every branch of the statement reads them),
    and a large pass keeps the CTEs the statement reads several times, then its
    outputs, and brings the fates from the kept frames (which are freed then); warm,
    they are computed from a local frame of a few rows and become one (a local
    relation)."""
    spark = pools.spark
    config = pools.config
    types = pools.types()
    query = PassQuery(config, types, checked)
    names = (query.name("fresh"), query.name("done"))
    fresh_view, done_view, drop_views = read.register_input_views(spark, fresh, done, names)
    assigned = query.assigned = query.name("assigned")
    #: Temp views of this evaluation, and the frames it kept, freed at its end.
    views: list[str] = []
    kept: list[Kept] = []

    def release_inputs() -> None:
        for name in reversed(views):
            spark.catalog.dropTempView(name)
        for frame in kept:
            frame.release()
        drop_views()

    with quiet_spark_errors():
        try:
            cand = query.name("cand")
            if warm is None:
                cand_sql = read.candidates_sql(fresh_view, done_view, small=True)
                assigned_sql = f"WITH {cand} AS ({cand_sql})\n{assign_sql(config, cand, types)}"
            else:  # the candidates made on the driver: one local relation (candidates_arrow)
                spark.createDataFrame(read.candidates_arrow(warm.rows, done)).createOrReplaceTempView(cand)
                views.append(cand)
                assigned_sql = assign_sql(config, cand, types)
            # The rules read the assigned candidates at a dozen places of the statement
            # (each rule's sides, fates and outputs), so they are a view, not a CTE that
            # Spark would analyse and optimise again at each place. Cold, the view is kept
            # on the executors; warm, the few rows come to the driver and go back as a local
            # relation (bench/RESULTS.md, "Latency": the statement's optimisation halves).
            # Every part of a rule reads only the records assigned to it, so a warm pass
            # plans only the rules it holds records of (``present``; None: every rule).
            present: set[int] | None = None
            if warm is None:
                assigned_frame = spark.sql(assigned_sql)
                if parses_in_assign(config) and not any(
                    isinstance(rule, TxnRule) for rule in config.transforms
                ):
                    # only transaction rules read the JSON text again (with the types
                    # of all their topics merged); the others read the parsed columns
                    assigned_frame = assigned_frame.drop("key", "value")
                kept.append(keep(assigned_frame))
                count = kept[-1].frame.count()
                kept[-1].frame.createOrReplaceTempView(assigned)
            else:
                count = warm.rows.num_rows
                # the parsed columns too, given back with their Spark types
                assigned_frame = spark.sql(assigned_sql)
                candidates = assigned_frame.toArrow()
                present = set(pc.unique(candidates.column("__rule")).to_pylist())
                local = spark.createDataFrame(candidates, schema=assigned_frame.schema)
                local.createOrReplaceTempView(assigned)
            views.append(assigned)
            query.small = count <= BROADCAST_ROWS
            query.fates(fresh_view, label=None, status=quote(DEAD), where="__dead")
            if count:
                plan_rules(
                    query,
                    (i for i in range(len(config.transforms)) if present is None or i in present),
                    unmatched=present is None or NO_RULE in present,
                )
            if count <= DRIVER_OUTPUT_ROWS:
                return _local(spark.sql(query.text()).toArrow())
            # Spark inlines a CTE at each use: a large pass computes the ones it reads
            # several times once, kept; every CTE becomes a view (PassQuery.take_views).
            for name, select, shared in query.take_views():
                frame = spark.sql(select)
                if shared:
                    kept.append(keep(frame))
                    frame = kept[-1].frame
                frame.createOrReplaceTempView(name)
                views.append(name)
            # The outputs are kept (written once the driver has numbered them); the
            # fates come to the driver straight from the kept inputs.
            outputs_sql = query.part("o", OUTPUT_COLUMNS)
            outputs = keep(spark.sql(outputs_sql)) if outputs_sql else None
            try:
                fates_sql = query.part("f", FATE_COLUMNS)
                assert fates_sql is not None  # (every pass has the dead letters' part)
                fates_ = spark.sql(fates_sql).toArrow()
                counts = _output_counts(outputs.frame) if outputs is not None else {}
                return _Evaluated(fates_, counts, result=outputs)
            except BaseException:
                if outputs is not None:
                    outputs.release()
                raise
        finally:
            release_inputs()


def _by_rows(
    pools: EtlPools, positions: Positions, checked: Checked, warm: WarmRead, timings: Timings
) -> Plan | None:
    """The pass evaluated row by row on the driver (:mod:`engine.etl.evaluate_rows`),
    or None when Spark must evaluate it (the reason is noted in ``timings``)."""
    # deferred: the row evaluator, loaded by the passes that use it
    from engine.etl import evaluate_rows
    from engine.etl.rowwise.unsupported import Unsupported

    if evaluate_rows.ROWWISE_ROWS <= 0:
        return None
    try:
        with timings.phase("evaluate"):
            compiled = pools.row_rules()
            rows = evaluate_rows.evaluate_rows(
                pools.config, checked, compiled, warm.rows, warm.done
            )
    except Unsupported as exc:
        timings.row_refusal = exc.reason
        return None
    timings.evaluated_by = "rows"
    evaluated = _Evaluated(rows.fates, rows.counts, local_outputs=rows.outputs)
    with timings.phase("decide"):
        return _decided(pools, positions, evaluated, warm, warm.done)


def _decided(
    pools: EtlPools,
    positions: Positions,
    evaluated: _Evaluated,
    warm: WarmRead | None,
    done: pa.Table,
) -> Plan:
    try:
        plan = decide(pools, positions, done, evaluated.fates, evaluated.counts)
    except BaseException:
        evaluated.release()
        raise
    if plan.counts and evaluated.result is not None:
        plan.release_result = evaluated.release
        plan.outputs = evaluated.result.frame
    else:
        evaluated.release()
        if plan.counts:
            plan.local_outputs = evaluated.local_outputs
    return _with_read(plan, warm, done)


def _with_read(plan: Plan, warm: WarmRead | None, done: pa.Table) -> Plan:
    """Note on the plan what the pass read, for the window of the next pass (a cold
    pass's frame is noted by :func:`plan_pass`)."""
    plan.done = done
    if warm is not None:
        plan.read_rows = warm.rows
        plan.read_from = warm.source
    return plan
