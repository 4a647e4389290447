"""The apply service: a configuration's tables kept up with its staging pool
(:class:`engine.apply.loop.Applier`), whenever the staging pool has a new version.

It looks at the staging pool's version every ``poll_interval`` seconds, and at once when
woken (in ``zync run`` an ETL commit wakes it). A table or output that cannot be applied
(a key missing or of another type, a table kept from something else) fails the service;
anything else (the store unreachable, a read that failed) is reported and tried again
at the next look. ``detail`` is the tuple of every table's
:class:`engine.apply.loop.TableStatus`; its report (engine/services/report.py) gives each
table's position, lag, version and rows as metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.errors import ZyncError, one_line
from engine.services.report import (
    LAKE,
    Dependency,
    LoopReport,
    Metric,
    Reading,
    as_json,
    readings,
)
from engine.services.service import RUNNING, Service, ServiceEvent, ServiceStatus

if TYPE_CHECKING:
    from engine.apply.loop import Applier, ApplyResult, TableStatus
    from engine.etl.config import EtlConfig
    from engine.lake.pools import Lake

#: Seconds between two looks at the staging pool's version.
POLL_INTERVAL = 0.2

APPLIED = Metric(
    "apply_staging_version", "gauge", "The staging version a table reflects, per table."
)
LAG = Metric(
    "apply_lag_versions",
    "gauge",
    "Staging versions a table has not applied yet (newest staging version − applied), per table.",
)
TABLE_VERSION = Metric("table_version", "gauge", "A table's Delta version, per table.")
TABLE_ROWS = Metric("table_rows", "gauge", "Rows of a table (history tables: every version), per table.")
APPLIED_RECORDS = Metric(
    "apply_records_total", "counter", "Outputs this process applied to a table, per table."
)


class ApplyService(Service["tuple[TableStatus, ...]"]):
    """Applies staging commits to the configuration's tables, in order, exactly once."""

    name = "apply"

    def __init__(
        self,
        config: EtlConfig,
        lake: Lake,
        *,
        versions_per_commit: int | None = None,
        poll_interval: float = POLL_INTERVAL,
        on_event: Callable[[ServiceEvent], None] | None = None,
        on_commit: Callable[[ApplyResult], None] | None = None,
    ) -> None:
        super().__init__(on_event=on_event)
        self.config = config
        self.lake = lake
        self.versions_per_commit = versions_per_commit
        self.poll_interval = poll_interval
        self._nudge = threading.Event()
        self._applier: Applier | None = None
        self._on_commit = on_commit

    def wake(self) -> None:
        """The staging pool has a new commit: look now instead of at the next poll."""
        self._nudge.set()

    _wake = wake

    def _detail(self) -> tuple[TableStatus, ...]:
        return () if self._applier is None else self._applier.status()

    def report(self, status: ServiceStatus[tuple[TableStatus, ...]]) -> LoopReport:
        tables = status.detail or ()
        found: list[Reading | None] = []
        for t in tables:
            found += [
                APPLIED.at(t.applied, table=t.name),
                LAG.at(t.lag, table=t.name),
                TABLE_VERSION.at(t.table_version, table=t.name),
                TABLE_ROWS.at(t.rows, table=t.name),
                APPLIED_RECORDS.at(t.records, table=t.name),
            ]
        errors = [t.error for t in tables if t.error]
        looked = any(t.staged is not None for t in tables)
        # a soft error of a running loop is the store's (a read or a commit that failed)
        down = status.last_error if status.state == RUNNING else None
        lake = Dependency(LAKE, False if down else (True if looked else None), down)
        not_ready = []
        if status.state == RUNNING and not looked:
            not_ready.append("apply: has not read the staging pool yet")
        not_ready += [f"apply: {e}" for e in errors]
        return LoopReport(
            detail={"tables": as_json(tables)},
            readings=readings(*found),
            dependencies=(lake,),
            not_ready=tuple(not_ready),
        )

    def applier(self) -> Applier:
        if self._applier is None:
            # deferred: the apply loop loads polars and delta-rs' merge
            from engine.apply.loop import VERSIONS_PER_COMMIT, Applier

            self._applier = Applier(
                self.config,
                self.lake,
                versions_per_commit=self.versions_per_commit or VERSIONS_PER_COMMIT,
            )
        return self._applier

    def _run(self, stop: threading.Event) -> None:
        # deferred: the apply loop loads polars and delta-rs' merge
        from engine.apply.loop import BadOutput
        from engine.lake.lake_tables import TableError
        from engine.lake.pool_errors import PoolError

        applier = self.applier()
        applier.on_step = self.heartbeat.beat  # a long catch-up makes progress per commit
        waiting = False
        while not stop.is_set():
            self.heartbeat.beat()
            try:
                applier.staging()
                break
            except PoolError as exc:
                if not waiting:
                    self._event("waiting", f"waiting for the staging pool: {one_line(exc)}")
                    waiting = True
                with self.heartbeat.waiting("no staging pool yet"):
                    self._nudge.wait(1.0)
                self._nudge.clear()
        self._running()
        seen: int | None = None
        while not stop.is_set():
            self.heartbeat.beat()
            try:
                staged = applier.staging().latest_version()
                if staged != seen:
                    self._apply(applier)
                    seen = staged
                self._failed_softly(None)
            except (TableError, BadOutput):
                raise
            except ZyncError as exc:
                self._soft_error(one_line(exc))
            except Exception as exc:  # noqa: BLE001 - the store, a read: tried again
                self._soft_error(one_line(exc, typed=True))
            with self.heartbeat.waiting("no new staging commits"):
                self._nudge.wait(self.poll_interval)
            self._nudge.clear()

    def _apply(self, applier: Applier) -> None:
        for result in applier.run_once():
            if result.table_version is None:
                continue
            self._committed(result.table_version, result.records, result.table)
            self._event(
                "commit",
                result.line(),
                table=result.table,
                version=result.table_version,
                records=result.records,
                first=result.first,
                last=result.last,
                seconds=round(result.seconds, 3),
            )
            if self._on_commit is not None:
                self._on_commit(result)

    def _soft_error(self, message: str) -> None:
        self._failed_softly(message)
        self._event("error", f"{message}; trying again")
