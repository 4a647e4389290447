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
from engine.services.service import (
    Service,
    ServiceError,
    ServiceEvent,
)
from engine.spark import SparkSource, spark_factory

if TYPE_CHECKING:
    from engine.etl.config import EtlConfig
    from engine.etl.result import PassResult
    from engine.etl.run import EtlRunner
    from engine.lake.pools import Lake, Pool

#: Default seconds between two ETL passes (at most one pass per interval).
ETL_INTERVAL = 0.25


class EtlService(Service["PassResult"]):
    """ETL passes: one whenever a raw pool of the configuration has a new commit, at
    most every ``interval`` seconds (and one at start). :meth:`run_pass` runs one now
    (the console's "run a pass" button), never at the same time as the loop's."""

    name = "etl"
    imports_first = ("pyspark.sql",)  # the passes run on Spark

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
        return self._runner

    def run_pass(self) -> PassResult:
        """Run one pass now (waits for a pass of the loop in flight)."""
        with self._pass_lock:
            result = self.runner().run_pass()
        self._last_result = result
        if result.committed:
            outputs = sum(result.outputs.values())
            self._committed(result.staging_version, outputs, self.config.staging_pool)
            if self._on_commit is not None:
                self._on_commit(result)
        self._event("pass", result.summary("line"))
        return result

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
            self._nudge.wait(wait)
            self._nudge.clear()
