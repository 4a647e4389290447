"""Whose topic it is: the staging pool named by the positions read back from an output
topic's tail, judged against the pool being delivered.

Every positioned message names its staging pool (``zync.pool.id``, the pool's Delta
table id, and ``zync.pool``, its name; :class:`~engine.deliver.positions.PoolIdentity`).
Each partition's last position read back is judged before the ledger takes it:

* written by this pool: it is where delivery stands in that partition;
* written by a zync older than these headers (no identity): taken as this pool's, so
  that an upgrade keeps its place, unless it names a pool offset this pool never staged
  (then another pool wrote it: treated as foreign);
* written by another pool (a recreated lake, another ETL): to-kafka stops with one line
  naming both pools, unless the topic is taken over (``take_over``, the
  ``--take-over-topic`` option). Taken over, that partition holds nothing of this pool:
  delivery starts from this pool's first output, after what the topic holds (duplicates
  on the topic rather than gaps). A foreign position older (by Kafka timestamp) than a
  message this pool wrote to the topic was taken over before: it is set aside without
  the option, so a take-over holds across restarts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from engine.deliver.errors import DeliveryError
from engine.deliver.positions import PoolIdentity, Position

#: The option that takes a topic over, named in the error.
TAKE_OVER_OPTION = "--take-over-topic"


class ForeignTopic(DeliveryError):
    """The output topic's tail was written by another staging pool."""


class Ownership:
    """Judges positions read back from ``topic`` for the pool ``identity``.

    ``staged_last`` gives the largest pool offset the pool stages for the topic (None:
    none); it is asked only when a position carries no identity. :attr:`notes` says
    what was decided (once each), for the delivery's events.
    """

    def __init__(
        self,
        identity: PoolIdentity,
        topic: str,
        *,
        take_over: bool,
        staged_last: Callable[[], int | None],
    ) -> None:
        self.identity = identity
        self.topic = topic
        self.take_over = take_over
        self._staged_last = staged_last
        self._staged: tuple[int | None] | None = None
        self.notes: list[str] = []

    def judge(self, found: Mapping[int, Position | None]) -> dict[int, Position | None]:
        """The positions that are this pool's (others become None); raises
        :class:`ForeignTopic` for a foreign tail the topic was not taken over from."""
        ours = [p.timestamp for p in found.values() if p is not None and self._ours(p)]
        newest = max((t for t in ours if t is not None), default=None)
        judged: dict[int, Position | None] = {}
        for partition, position in found.items():
            if position is None or self._ours(position):
                judged[partition] = position
            elif position.pool_id is None and self._staged_covers(position):
                self._note(
                    f"{self.topic}: partition {partition}'s position (pool offset "
                    f"{position.offset}) names no staging pool (written by an older zync): "
                    f"taken as pool {self.identity.name!r}'s"
                )
                judged[partition] = position
            elif newest is not None and position.timestamp is not None and (
                position.timestamp <= newest
            ):
                judged[partition] = None  # this pool wrote the topic after it
            elif self.take_over:
                self._note(
                    f"{self.topic}: taking the topic over from {position.writer}: "
                    f"delivering pool {self.identity.name!r} from its first output"
                )
                judged[partition] = None
            else:
                raise ForeignTopic(
                    f"topic {self.topic!r} was last written by {position.writer} "
                    f"(partition {partition}, pool offset {position.offset}), not by staging "
                    f"pool {self.identity.name!r} (table id {self.identity.id}); pass "
                    f"{TAKE_OVER_OPTION} to deliver pool {self.identity.name!r} from its first "
                    "output after what the topic holds"
                )
        return judged

    def _ours(self, position: Position) -> bool:
        return position.pool_id == self.identity.id

    def _staged_covers(self, position: Position) -> bool:
        if self._staged is None:
            self._staged = (self._staged_last(),)
        last = self._staged[0]
        return last is not None and position.offset <= last

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
