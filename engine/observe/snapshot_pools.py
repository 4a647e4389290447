"""The pools a snapshot reads: opened once per kind of snapshot and refreshed on every
call, and the lake's own error in words.

One lock and one set of open pools per kind of snapshot (``topics``, ``etl``, ``dead``),
so a slow ETL listing (Spark) never holds the topics snapshot back; Pool objects are not
shared between threads.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from engine.errors import ZyncError, one_line

if TYPE_CHECKING:
    import pyarrow as pa

    from engine.lake.pools import Lake, Pool

#: The kinds of snapshot, each with its own lock and open pools.
PARTS = ("topics", "etl", "dead")


class SnapshotPools:
    """A lake's pools, opened per kind of snapshot."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.locks = {part: threading.RLock() for part in PARTS}
        self._pools: dict[str, dict[str, Pool]] = {part: {} for part in PARTS}

    def pool(self, name: str, part: str = "topics") -> Pool:
        """The pool ``name``, opened once per kind of snapshot and refreshed on every call."""
        with self.locks[part]:
            pools = self._pools[part]
            pool = pools.get(name)
            # a local pool whose directory went (dropped, recreated) is opened anew
            gone = pool is not None and pool.location.is_local and not pool.path.exists()
            if pool is None or gone:
                pool = self.lake.open_pool(name)
                pools[name] = pool
            else:
                pool.refresh()
            return pool

    def pool_or_error(self, name: str, lake_error: str | None) -> tuple[Pool | None, str | None]:
        """The pool ``name`` of the topics snapshot, or None and why not (the lake's own
        error when there is one)."""
        if lake_error:
            return None, lake_error
        try:
            return self.pool(name), None
        except Exception as exc:  # noqa: BLE001 - shown in words
            return None, one_line(exc, limit=300)

    def lake_error(self) -> str | None:
        where = self.lake.location
        if not where.is_local:
            try:
                self.lake.guard.check_access()
            except ZyncError as exc:
                return one_line(exc)
            return None
        if not where.path.exists():
            return f"lake path {where} is missing"
        if not where.path.is_dir():
            return f"lake path {where} is not a directory"
        return None


def read_valid(pool: Pool, columns: list[str], not_null: str) -> pa.Table:
    """``columns`` of the pool's rows where ``not_null`` is set (dead letters, markers)."""
    import pyarrow.dataset as ds  # deferred, like every heavy import of engine.observe

    dataset = pool.dataset()
    return dataset.to_table(columns=columns, filter=ds.field(not_null).is_valid())
