"""Where a pass's input comes from without a Spark read: the window, else a small log read.

:class:`WarmInput` keeps the window a long-running ETL holds between passes
(:mod:`engine.etl.window`): after each pass it keeps the rows the next pass would read
again, and before the next it adds the raw rows committed since — as long as nobody else
moved staging or replaced a raw pool. Without a window that holds, a pass whose input is
small is read by delta-rs (:func:`engine.etl.window.log_read`); otherwise Spark reads it
cold (:func:`engine.etl.evaluate.plan_pass` with no warm read).
"""

from __future__ import annotations

import pyarrow as pa

from engine.etl.config import EtlConfig
from engine.etl.cursors import Positions, cursor_filter
from engine.etl.etl_pools import EtlPools
from engine.etl.evaluate import DRIVER_OUTPUT_ROWS, WarmRead
from engine.etl.plan import Plan
from engine.etl.spark_errors import quiet_spark_errors
from engine.etl.sql import quote
from engine.etl.window import (
    FRESH_SCHEMA,
    WINDOW_ROWS,
    RawMark,
    Window,
    log_read,
    new_rows,
    next_window,
    raw_mark,
    readable,
    rows_above,
)
from engine.lake.pools import Pool


class WarmInput:
    """The window kept between one ETL's passes, and the log read when there is none.

    ``keep_window`` False keeps no window; ``log_reads`` False never reads by delta-rs
    (both for tests and benchmarks that want the cold path).
    """

    def __init__(
        self, config: EtlConfig, pools: EtlPools, *, keep_window: bool, log_reads: bool
    ) -> None:
        self.config = config
        self.pools = pools
        self.keep_window = keep_window
        self.log_reads = log_reads  # small cold inputs read by delta-rs (engine.etl.window)
        self._window: Window | None = None
        self._marks: dict[str, RawMark] = {}

    def drop(self) -> None:
        """Forget the window (staging moved under the pass: the next read is cold)."""
        self._window = None

    def read(self, positions: Positions) -> WarmRead | None:
        """The pass's input in memory: from the window plus the raw rows committed
        since, else (no window, or it no longer holds) read by delta-rs when small, else
        None (Spark reads it cold); notes the raw marks the read stands on."""
        raws = {name: self.pools.raw(name) for name in self.config.raw_pools}
        self._marks = {name: raw_mark(pool) for name, pool in raws.items()}
        warm = self._read_window(positions, raws)
        if warm is None and self.log_reads:
            read = log_read(self.config, raws, self.pools.staging, positions)
            if read is not None:
                warm = WarmRead(*read, source="log")
        return warm

    def _read_window(self, positions: Positions, raws: dict[str, Pool]) -> WarmRead | None:
        window, self._window = self._window, None
        if window is None or window.staging_version != positions.staging_version:
            return None
        parts = [window.rows]
        for name, pool in raws.items():
            seen, now = window.raw.get(name), self._marks[name]
            if seen is None or seen.table_id != now.table_id or now.version < seen.version:
                return None
            if now.last_seqno > seen.last_seqno:
                if not readable(pool):
                    return None
                topics = [i.topic for i in self.config.inputs if i.pool == name]
                fresh = new_rows(name, pool, seen.last_seqno, topics)
                parts.append(rows_above(fresh, positions.cursors))
        rows = pa.concat_tables(parts)
        if rows.num_rows > WINDOW_ROWS + DRIVER_OUTPUT_ROWS:
            return None  # a burst: Spark reads it cold
        return WarmRead(rows, window.done)

    def keep(self, plan: Plan, staging_version: int) -> None:
        """The window for the next pass, after ``plan`` (committed as
        ``staging_version``, or found nothing to commit)."""
        self._window = None
        if not self.keep_window or plan.done is None:
            return
        read_rows = plan.read_rows
        if read_rows is None and plan.fresh is not None:
            read_rows = self._collect_window(plan)
        if read_rows is not None:
            self._window = next_window(read_rows, plan.done, plan, staging_version, self._marks)

    def _collect_window(self, plan: Plan) -> pa.Table | None:
        """After a cold pass: the rows it read that stay in the window (above the new
        cursors, at or after the new floors), from Spark — None when too many."""
        assert plan.fresh is not None
        after = plan.positions if plan.empty else plan.after
        floors = " OR ".join(
            f"(pool = {quote(name)} AND seqno >= {after.floor(name)})"
            for name in self.config.raw_pools
        )
        above = cursor_filter(after.cursors, self.config.input_topics)
        with quiet_spark_errors():
            rows = plan.fresh.where(f"({floors}) AND {above}").limit(WINDOW_ROWS + 1).toArrow()
        if rows.num_rows > WINDOW_ROWS:
            return None
        return rows.select(FRESH_SCHEMA.names).cast(FRESH_SCHEMA)
