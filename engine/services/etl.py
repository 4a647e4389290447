"""The ETL service: an :class:`engine.etl.run.EtlRunner` pass whenever a raw pool of the
configuration gets a new commit, at most every ``interval`` seconds (and one at start).

A failed pass is reported (status and event) and tried again when a raw pool changes.
``detail`` is the last :class:`engine.etl.result.PassResult`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.errors import one_line
from engine.services.report import (
    LAKE,
    POOL_VERSION,
    RECORDS_IN,
    RECORDS_OUT,
    Dependency,
    EventHistogram,
    LoopReport,
    Metric,
    Reading,
    readings,
)
from engine.services.service import (
    Service,
    ServiceError,
    ServiceEvent,
    ServiceStatus,
)
from engine.spark import SparkSource, spark_factory

if TYPE_CHECKING:
    from engine.etl.config import EtlConfig
    from engine.etl.result import PassResult
    from engine.etl.run import EtlRunner
    from engine.lake.pools import Lake, Pool

#: Default seconds between two ETL passes (at most one pass per interval).
ETL_INTERVAL = 0.25


PENDING = Metric(
    "etl_pending_records", "gauge", "Input records waiting after the cursors, per rule (last pass)."
)
EXPIRED = Metric("etl_expired_records_total", "counter", "Input records a rule expired, per rule.")
CURSOR = Metric("etl_cursor", "gauge", "The ETL's cursor per input partition: an offset.")
PASSES = Metric(
    "etl_passes_total", "counter", "ETL passes, by result: committed, nothing_new or failed."
)
PASS_SECONDS = EventHistogram(
    "etl_pass_seconds", "How long an ETL pass took.", "pass", "seconds",
    (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)  # fmt: skip
PASS_RECORDS = EventHistogram(
    "etl_pass_records", "Input records one ETL pass consumed.", "pass", "consumed",
    (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000),
)  # fmt: skip


class EtlService(Service["PassResult"]):
    """ETL passes: one whenever a raw pool of the configuration has a new commit, at
    most every ``interval`` seconds (and one at start). :meth:`run_pass` runs one now
    (the console's "run a pass" button), never at the same time as the loop's."""

    name = "etl"
    imports_first = ("pyspark.sql",)  # the passes run on Spark
    histograms = (PASS_SECONDS, PASS_RECORDS)

    def __init__(
        self,
        config: EtlConfig,
        lake: Lake,
        *,
        spark: SparkSource = None,
        interval: float = ETL_INTERVAL,
        on_event: Callable[[ServiceEvent], None] | None = None,
        on_commit: Callable[[PassResult], None] | None = None,
    ) -> None:
        super().__init__(on_event=on_event)
        if interval <= 0:
            raise ServiceError("the ETL interval must be positive")
        self.config = config
        self.lake = lake
        self.interval = interval
        self._spark = spark_factory(spark)
        self._runner: EtlRunner | None = None
        self._pass_lock = threading.Lock()
        self._nudge = threading.Event()
        self._last_result: PassResult | None = None
        self._on_commit = on_commit
        self._raw: dict[str, Pool] = {}
        # totals since the process started, for /metrics
        self._consumed: dict[str, int] = {}
        self._staged: dict[str, int] = {}
        self._expired: dict[str, int] = {}
        self._passes: dict[str, int] = {}

    def _detail(self) -> PassResult | None:
        return self._last_result

    def wake(self) -> None:
        """A raw pool has a new commit: look now instead of at the next poll."""
        self._nudge.set()

    _wake = wake

    def runner(self) -> EtlRunner:
        if self._runner is None:
            from engine.etl.run import EtlRunner  # deferred: the ETL loads deltalake

            self._runner = EtlRunner(self.config, self.lake, self._spark)
            self._runner.heartbeat = self.heartbeat
        return self._runner

    def run_pass(self) -> PassResult:
        """Run one pass now (waits for a pass of the loop in flight)."""
        with self._pass_lock:
            try:
                result = self.runner().run_pass()
            except Exception:
                self._count(self._passes, {"failed": 1})
                raise
        self._last_result = result
        self._count(self._consumed, result.consumed)
        self._count(self._staged, result.outputs if result.committed else {})
        self._count(self._expired, result.expired_rules if result.committed else {})
        self._count(self._passes, {"committed" if result.committed else "nothing_new": 1})
        if result.committed:
            outputs = sum(result.outputs.values())
            self._committed(result.staging_version, outputs, self.config.staging_pool)
            if self._on_commit is not None:
                self._on_commit(result)
        self._event(
            "pass", result.summary("line"), seconds=round(result.seconds, 4),
            consumed=sum(result.consumed.values()), outputs=result.outputs,
            pending=sum(result.pending.values()), expired=sum(result.expired.values()),
            staging_version=result.staging_version, committed=result.committed,
        )  # fmt: skip
        return result

    def _count(self, totals: dict[str, int], more: dict[str, int]) -> None:
        with self._lock:
            for key, n in more.items():
                totals[key] = totals.get(key, 0) + n

    def report(self, status: ServiceStatus[PassResult]) -> LoopReport:
        result = status.detail
        with self._lock:
            totals = (dict(self._consumed), dict(self._staged), dict(self._expired), dict(self._passes))
        consumed, staged, expired, passes = totals
        found: list[Reading | None] = [RECORDS_IN.at(n, topic=t) for t, n in consumed.items()]
        found += [RECORDS_OUT.at(n, topic=t) for t, n in staged.items()]
        found += [EXPIRED.at(n, rule=r) for r, n in expired.items()]
        found += [PASSES.at(n, result=r) for r, n in passes.items()]
        if result is not None:
            found.append(POOL_VERSION.at(result.staging_version, pool=self.config.staging_pool))
            rules = [self.config.rule_label(i) for i in range(len(self.config.transforms))]
            found += [PENDING.at(result.pending_rules.get(r, 0), rule=r) for r in rules]
            found += [
                CURSOR.at(c, topic=t, partition=p) for (t, p), c in sorted(result.cursors.items())
            ]
        lake = Dependency(LAKE, True if result is not None else None)
        return LoopReport(
            detail=result.to_json() if result is not None else {},
            readings=readings(*found),
            dependencies=(lake,),
        )

    run_once = run_pass

    def _raw_versions(self) -> tuple[int, ...]:
        from engine.lake.pool_errors import PoolError  # deferred: deltalake

        versions = []
        for name in self.config.raw_pools:
            pool = self._raw.get(name)
            try:
                if pool is None:
                    pool = self._raw[name] = self.lake.open_pool(name)
                versions.append(pool.refresh())
            except PoolError:
                versions.append(-1)
        return tuple(versions)

    def _run(self, stop: threading.Event) -> None:
        _ = self.runner().spark  # starts Spark in this thread, not in the caller's
        self._running()
        seen: tuple[int, ...] | None = None
        last_pass = 0.0
        failed_at: tuple[int, ...] | None = None
        while not stop.is_set():
            self.heartbeat.beat()
            versions = self._raw_versions()
            wait = min(0.25, self.interval)
            if versions != seen and versions != failed_at:
                early = self.interval - (time.monotonic() - last_pass)
                if early > 0:
                    wait = early
                else:
                    last_pass = time.monotonic()
                    try:
                        self.run_pass()
                    except Exception as exc:  # noqa: BLE001 - reported, retried
                        # e.g. a rule over a topic whose records (and types) have not
                        # arrived yet: try again when a raw pool changes
                        failed_at = versions
                        self._failed_softly(one_line(exc, typed=True))
                        self._event("error", f"pass failed: {one_line(exc, typed=True)}")
                        continue
                    self._failed_softly(None)
                    failed_at = None
                    seen = versions
                    continue
            with self.heartbeat.waiting("no new raw commits"):
                self._nudge.wait(wait)
            self._nudge.clear()
