"""One ETL pass, exactly once: outputs, markers and positions in one staging commit.

A pass (:meth:`EtlRunner.run_pass`):

1. checks the configuration against the lake and the typed input schemas (nothing is
   written when it is wrong) and records the outputs' Spark types in the staging pool
   (:mod:`engine.etl.etl_pools`, :mod:`engine.etl.check`);
2. reads the ETL's positions from the staging snapshot at version V
   (:mod:`engine.etl.cursors`);
3. reads the input records above the cursors and the markers above them, and keeps the
   *candidates*: those no marker covers (:mod:`engine.etl.read`);
4. evaluates every rule over the candidates in Spark and brings the driver the fates
   and the number of outputs per output topic in one job (:mod:`engine.etl.evaluate`);
5. on the driver, decides expiry, advances cursors and floors, and reserves each output
   topic's next offsets and the staging seqnos (:mod:`engine.etl.plan`);
6. numbers the outputs per output topic in design order (:mod:`engine.etl.numbering`),
   on the executors, which write them as Parquet files into the staging table's
   directory (:meth:`engine.lake.pools.Pool.write_spark`) — or on the driver for a small
   pass; the driver writes the markers and commits those files + markers + positions
   with ``staging.commit_rows(..., expect_version=V)``. When another writer moved
   staging past V the commit fails (its files are deleted) and the pass re-plans from
   step 2 (bounded attempts), so two concurrent passes never both commit the same
   outputs (docs/design.md#exactly-once-etl).

A pass that finds nothing to do commits nothing. :class:`EtlRunner` keeps the pools
and the checked configuration warm between passes, the window of rows the next pass
reads again (:class:`engine.etl.warm_input.WarmInput`), and the pool versions of its
last idle pass (:class:`IdlePass`) so a loop polling an unchanged lake does no Spark work. Inspection
(pending, expired, explain) is :mod:`engine.etl.inspect`; what a pass returns is
:mod:`engine.etl.result`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import ZyncError
from engine.etl import inspect
from engine.etl.checked import Checked
from engine.etl.config import EtlConfig
from engine.etl.cursors import Positions
from engine.etl.etl_pools import EtlPools
from engine.etl.evaluate import plan_pass
from engine.etl.numbering import numbered
from engine.etl.plan import Plan
from engine.etl.result import ExpiredRecord, PassResult, PendingRecord
from engine.etl.spark_errors import quiet_spark_errors
from engine.etl.timings import Timings, spark_jobs
from engine.etl.typed_records import TopicTypes
from engine.etl.warm_input import WarmInput
from engine.heartbeat import Heartbeat
from engine.lake import delta
from engine.lake.pool_record import AVRO_FIELD
from engine.lake.pools import Lake, Pool
from engine.spark import SparkSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAX_ATTEMPTS = 8


class EtlError(ZyncError):
    """A pass could not complete (e.g. too many conflicting commits)."""


@dataclass(frozen=True)
class IdlePass:
    """The last pass that found nothing to do: the pool versions it read (raw pools',
    staging's) and what it left pending. A pass over the same versions answers from it
    with no Spark work (a loop polling an unchanged lake)."""

    key: tuple[tuple[int, ...], int]
    pending: dict[str, int]
    pending_rules: dict[str, int]

    def again(self, etl: str, staging_version: int, positions: Positions) -> PassResult:
        """The result of a pass over the same versions: nothing done, the same pending."""
        result = PassResult(etl)
        result.read_version = result.staging_version = staging_version
        result.cursors = dict(positions.cursors)
        result.pending = dict(self.pending)
        result.pending_rules = dict(self.pending_rules)
        return result


class EtlRunner:
    """One ETL configuration over a lake, kept warm between passes.

    Thread-safe: one pass (or inspection) at a time per runner. The SparkSession is the
    process's one session (:func:`engine.spark.get_spark`) unless a session or a factory
    of one is given; it starts when first needed.
    """

    def __init__(
        self,
        config: EtlConfig,
        lake: Lake,
        spark: SparkSource = None,
        *,
        max_attempts: int = MAX_ATTEMPTS,
        keep_window: bool = True,
        log_reads: bool = True,
    ) -> None:
        self.config = config
        self.lake = lake
        self.max_attempts = max_attempts
        self.pools = EtlPools(config, lake, spark)
        #: the window kept between passes, or a small input read by delta-rs
        self.warm_input = WarmInput(
            config, self.pools, keep_window=keep_window, log_reads=log_reads
        )
        self._idle: IdlePass | None = None
        #: beaten at every phase of a pass (a service's liveness, engine.heartbeat)
        self.heartbeat: Heartbeat | None = None
        self._timings = Timings()
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"EtlRunner({self.config.name!r}, {self.lake!r})"

    # -- parts ------------------------------------------------------------------------

    @property
    def spark(self) -> SparkSession:
        return self.pools.spark

    @property
    def staging(self) -> Pool:
        return self.pools.staging

    def raw(self, name: str) -> Pool:
        return self.pools.raw(name)

    def types(self) -> dict[str, TopicTypes]:
        """Each input topic's (key, value) Spark types from its raw pool (None: unknown)."""
        return self.pools.types()

    def check(self) -> Checked:
        """Check the configuration against the lake and the input types (cached while
        the types do not change); raises :class:`EtlConfigError`."""
        with self._lock:
            return self.pools.check()

    def positions(self) -> Positions:
        """The ETL's positions in the current staging snapshot."""
        with self._lock:
            self.staging.refresh()
            return self.pools.positions()

    # -- the pass ---------------------------------------------------------------------

    def run_pass(self, *, dry_run: bool = False) -> PassResult:
        """One pass; see the module docstring. Raises :class:`EtlConfigError` before
        anything is written when the configuration is wrong."""
        with self._lock, spark_jobs(self.pools, self._timings_for_pass()) as timings:
            started = time.monotonic()
            for attempt in range(1, self.max_attempts + 1):
                with timings.phase("refresh"):
                    self.pools.refresh()
                    versions = tuple(self.raw(p).version for p in self.config.raw_pools)
                    idle_key = (versions, self.staging.version)
                    positions = self.pools.positions()
                if self._idle is not None and self._idle.key == idle_key:
                    result = self._idle.again(self.config.name, self.staging.version, positions)
                    result.dry_run, result.timings = dry_run, timings
                    result.seconds = time.monotonic() - started
                    return result
                # checked against the types of the snapshots the pass reads (a raw pool
                # refreshed after the check could bring a topic's first types, whose
                # records the rules would then take unchecked)
                with timings.phase("check"):
                    checked = self.check()
                    if not dry_run and self.pools.record_output_types(checked):
                        positions = self.pools.positions()  # staging moved: plan on it
                plan = self._plan(positions, checked)
                try:
                    result = plan.result(self.config.name, dry_run=dry_run, attempts=attempt)
                    result.timings = timings
                    result.read_from = plan.read_from
                    if plan.empty:
                        self._idle = IdlePass(
                            idle_key, dict(result.pending), dict(result.pending_rules)
                        )
                        if not dry_run:
                            with timings.phase("window"):
                                self.warm_input.keep(plan, positions.staging_version)
                        result.seconds = time.monotonic() - started
                        return result
                    if dry_run:
                        result.rows = plan.preview()
                        result.seconds = time.monotonic() - started
                        return result
                    rows = plan.driver_rows(self.staging)
                    with timings.phase("write"):
                        files = self._write_outputs(plan)
                    try:
                        with timings.phase("commit"):
                            version = self.staging.commit_rows(
                                rows,
                                expect_version=positions.staging_version,
                                app_transactions=plan.after.changes_from(positions),
                                metadata={"zync.op": "etl", "zync.etl": self.config.name},
                                files=files,
                            )
                    except delta.CommitConflict:
                        self.warm_input.drop()
                        continue
                    with timings.phase("window"):
                        self.warm_input.keep(plan, version)
                finally:
                    plan.release()
                result.committed = True
                result.staging_version = version
                result.seconds = time.monotonic() - started
                return result
            raise EtlError(
                f"ETL {self.config.name!r}: gave up after {self.max_attempts} attempts: "
                f"other writers kept committing to pool {self.config.staging_pool!r}"
            )

    def _plan(self, positions: Positions, checked: Checked) -> Plan:
        """Read, evaluate in Spark and decide (:func:`engine.etl.evaluate.plan_pass`):
        from the window when it is still good, else cold."""
        timings = self._timings
        with timings.phase("read"):
            warm = self.warm_input.read(positions)
        return plan_pass(self.pools, positions, checked, warm, timings)

    def _timings_for_pass(self) -> Timings:
        self._timings = Timings(on_phase=self.heartbeat.beat if self.heartbeat else None)
        return self._timings

    def _write_outputs(self, plan: Plan) -> list[delta.WrittenFile]:
        """Write the plan's outputs into the staging directory from the executors
        (committed, or deleted, by :meth:`Pool.commit_rows`)."""
        if plan.outputs is None:
            return []
        columns = ["seqno", "kafka", "key", "value"]
        if AVRO_FIELD.name in self.staging.row_schema.names:
            columns.append(AVRO_FIELD.name)  # not when the pool could not be upgraded
        rows = numbered(plan.outputs, plan.numbering()).select(*columns)
        with quiet_spark_errors():
            return self.staging.write_spark(rows, label="etl")

    # -- inspection -------------------------------------------------------------------

    def pending(self, *, limit: int | None = None) -> list[PendingRecord]:
        """Input records after the cursors that are not processed yet
        (:func:`engine.etl.inspect.pending`)."""
        with self._lock:
            return inspect.pending(self.pools, limit=limit)

    def expired(self, *, limit: int | None = None) -> list[ExpiredRecord]:
        """Input records this ETL expired, with their full record joined back from raw
        (:func:`engine.etl.inspect.expired`)."""
        with self._lock:
            return inspect.expired(self.pools, limit=limit)

    def explain(self) -> str:
        """The positions, the reads, each rule's Spark SQL and the Spark plans a pass
        would run — without running it (:func:`engine.etl.inspect.explain`)."""
        with self._lock:
            return inspect.explain(self.pools)


def run_pass(
    config: EtlConfig, lake: Lake, spark: SparkSession | None = None, *, dry_run: bool = False
) -> PassResult:
    """One ETL pass (see :class:`EtlRunner`); a fresh runner each call."""
    return EtlRunner(config, lake, spark).run_pass(dry_run=dry_run)


def explain(config: EtlConfig, lake: Lake, spark: SparkSession | None = None) -> str:
    """What a pass would read and run, with Spark's plans; runs nothing."""
    return EtlRunner(config, lake, spark).explain()


def pending(
    config: EtlConfig, lake: Lake, spark: SparkSession | None = None
) -> list[PendingRecord]:
    """Records after the cursors not processed yet."""
    return EtlRunner(config, lake, spark).pending()


def expired(
    config: EtlConfig, lake: Lake, spark: SparkSession | None = None
) -> list[ExpiredRecord]:
    """Records the ETL expired, with their full record."""
    return EtlRunner(config, lake, spark).expired()
