"""The pools a snapshot reads: opened once per kind of snapshot and refreshed on every
call, and the lake's own error in words.

One lock and one set of open pools per kind of snapshot (``topics``, ``etl``, ``dead``),
so a slow ETL listing (Spark) never holds the topics snapshot back; Pool objects are not
shared between threads.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

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
            if pool is None or not Path(pool.path).exists():
                pool = self.lake.open_pool(name)
                pools[name] = pool
            else:
                pool.refresh()
            return pool

    def lake_error(self) -> str | None:
        if not self.lake.root.exists():
            return f"lake path {self.lake.root} is missing"
        if not self.lake.root.is_dir():
            return f"lake path {self.lake.root} is not a directory"
        return None


def read_valid(pool: Pool, columns: list[str], not_null: str) -> pa.Table:
    """``columns`` of the pool's rows where ``not_null`` is set (dead letters, markers)."""
    import pyarrow.dataset as ds  # deferred, like every heavy import of engine.observe

    dataset = pool.table.to_pyarrow_dataset()
    return dataset.to_table(columns=columns, filter=ds.field(not_null).is_valid())
