"""The pools from-kafka writes: each input topic's raw pool, opened (or created) per run.

:class:`InputPools` checks the topic → pool inputs (a topic feeds one pool), routes each
topic to its pool, opens each pool with its consumer group and upkeep (a
:class:`~engine.ingest.state.PoolState` in the loop's shared state) and makes each
topic's key and value decoders. The route and the decoders are the same dicts for every
run of a loop: the consumer, the assignment and the decoder stage hold them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.ingest.decode import PartDecoder, RegistryLookup
from engine.ingest.errors import IngestError
from engine.ingest.options import IngestInput, IngestOptions, default_group
from engine.ingest.state import LoopState, PoolState
from engine.lake.maintenance import Upkeep

if TYPE_CHECKING:
    from engine.lake.pools import Lake


class InputPools:
    """A from-kafka loop's inputs and their raw pools."""

    def __init__(
        self,
        inputs: Iterable[IngestInput],
        lake: Lake,
        options: IngestOptions,
        lookup: RegistryLookup,
    ) -> None:
        self.inputs = list(inputs)
        if not self.inputs:
            raise IngestError("nothing to ingest: give at least one topic and pool")
        seen: dict[str, str] = {}
        for item in self.inputs:
            if item.topic in seen and seen[item.topic] != item.pool:
                raise IngestError(
                    f"topic {item.topic!r} is an input of two pools ({seen[item.topic]}, "
                    f"{item.pool}): run one from-kafka per pool for it"
                )
            seen[item.topic] = item.pool
        self.inputs = [IngestInput(t, p) for t, p in seen.items()]
        self.lake = lake
        self.options = options
        self.lookup = lookup
        self.route: dict[str, str] = {}  # topic -> pool
        self.decoders: dict[tuple[str, str], PartDecoder] = {}

    def open(self, shared: LoopState) -> None:
        """Open (or create) each pool for a run, note it in ``shared`` with its group and
        upkeep, route its topics to it and make their key and value decoders."""
        by_pool: dict[str, list[str]] = {}
        for item in self.inputs:
            by_pool.setdefault(item.pool, []).append(item.topic)
            self.route[item.topic] = item.pool
        for name, topics in by_pool.items():
            if self.options.create_pools:
                pool = self.lake.create_pool(name, exist_ok=True)
            else:
                pool = self.lake.open_pool(name)
            if pool.kind != "raw":
                raise IngestError(
                    f"pool {name!r} is a {pool.kind} pool: from-kafka writes raw pools"
                )
            group = self.options.group
            if group is None:
                group = self.options.workers_group or default_group(name)
            upkeep = Upkeep(
                checkpoint_every=self.options.checkpoint_every,
                compact_small_files=self.options.compact_small_files,
            )
            state = PoolState(pool, topics, group or None, upkeep)
            with shared.lock:
                shared.pools[name] = state
            for topic in topics:
                for part, fmt in (
                    ("key", self.options.key_format),
                    ("value", self.options.value_format),
                ):
                    self.decoders[(topic, part)] = PartDecoder(topic, part, fmt, self.lookup)
