"""The records from-kafka could not decode or shape, kept in their raw pools: counted per
(topic, partition) for the topics snapshot, and listed newest first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.observe.reports import DeadLetter
from engine.observe.snapshot_pools import SnapshotPools, read_valid

if TYPE_CHECKING:
    from engine.lake.pools import Pool


class DeadLetters:
    """Dead letters of a lake's raw pools; counts are cached per Delta version."""

    def __init__(self, pools: SnapshotPools) -> None:
        self.pools = pools
        self._counts: dict[str, tuple[int, dict[tuple[str, int], int]]] = {}

    def counts(self, pool: Pool) -> dict[tuple[str, int], int]:
        """Dead letters per (topic, partition) in ``pool`` (cached per Delta version)."""
        cached = self._counts.get(pool.name)
        if cached is not None and cached[0] == pool.version:
            return cached[1]
        table = read_valid(pool, ["kafka", "deadletter"], "deadletter")
        counts: dict[tuple[str, int], int] = {}
        for kafka in table.column("kafka").to_pylist():
            if kafka:
                tp = (kafka["topic"], kafka["partition"])
                counts[tp] = counts.get(tp, 0) + 1
        self._counts[pool.name] = (pool.version, counts)
        return counts

    def listing(self, pool_name: str | None = None, limit: int = 1000) -> list[DeadLetter]:
        """The dead letters of one raw pool (or every raw pool), newest first."""
        # deferred, like every heavy import of engine.observe
        from engine.lake.pool_errors import NotAPool

        names = [pool_name] if pool_name else self.pools.lake.pool_names()
        out: list[DeadLetter] = []
        for name in names:
            try:
                pool = self.pools.pool(name, "dead")
            except NotAPool:  # a Delta table of the lake that is no pool (a table)
                if pool_name:
                    raise
                continue
            if pool.kind != "raw":
                continue
            with self.pools.locks["dead"]:
                table = read_valid(pool, ["seqno", "kafka", "deadletter"], "deadletter")
            for row in table.to_pylist():
                kafka, dead = row["kafka"] or {}, row["deadletter"] or {}
                out.append(
                    DeadLetter(
                        pool=name,
                        topic=kafka.get("topic", "?"),
                        partition=kafka.get("partition", -1),
                        offset=kafka.get("offset", -1),
                        stage=dead.get("stage"),
                        error=dead.get("error"),
                        key_bytes=dead.get("key_bytes"),
                        value_bytes=dead.get("value_bytes"),
                        seqno=row["seqno"],
                    )
                )
        out.sort(key=lambda d: (d.seqno or 0), reverse=True)
        return out[:limit]
