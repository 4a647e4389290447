"""Whose topic it is and where delivery stands: the three places that say so, judged
together for the staging pool being delivered (docs/design.md#exactly-once-to-kafka).

* The **claim** (:mod:`~engine.deliver.claims`) names the pool that delivers the topic
  and the Kafka id of the topic it delivered to. It outlives the topic.
* The **committed position** (:mod:`~engine.deliver.committed`) is exact: it is written
  by the same transactions as the records. Deleting the topic deletes it; it expires
  when nobody commits it for ``offsets.retention.minutes``.
* The **tail** (:mod:`~engine.deliver.positions`): the position headers of the last
  records. Exact while the records are there; retention and compaction can only remove
  records, which leaves the tail behind (or empty), never ahead.

The rules, in this order:

1. A claim on another incarnation of the topic (another topic id): the topic was
   deleted and created again; a claim by another pool: the topic was taken over. Both
   stop to-kafka with one line, unless the topic is taken over (``take_over``, the
   ``--take-over-topic`` option): then nothing of the topic counts, delivery starts
   from the pool's first output and the claim is rewritten at once. A committed
   position of another pool or incarnation is judged the same way when no claim is
   there (the claims topic was deleted).
2. The committed position is the stronger: per partition, the later of it and this
   pool's tail position counts (the tail is later only when something delivered after
   the committed position was written: a zync older than it, after a downgrade).
3. No committed position though the claim is this pool's: it expired (the delivery was
   stopped longer than ``offsets.retention.minutes``). The tail stands in for it only
   where it cannot be behind: a partition whose last record read back is the last
   thing in it (on a compacted topic) or not compacted at all, or an empty partition
   never written to. Elsewhere to-kafka stops with one line (:class:`PositionLost`)
   rather than deliver twice.
4. Neither a claim nor a committed position: a new topic, or one delivered by a zync
   from before them (an upgrade). The tail is judged as it always was: this pool's
   position counts; a position naming no pool (a zync older still) is taken as this
   pool's unless it names an offset the pool never staged; another pool's stops
   to-kafka unless taken over, or unless it is older (by Kafka timestamp) than a
   message of this pool (taken over before).

The outcome (:class:`Standing`) says whether the judged positions must be committed at
once (an upgrade, a take-over, a claim missing): then the next transaction, made before
anything else, writes them and the claim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from engine.deliver.claims import Claim
from engine.deliver.committed import Committed
from engine.deliver.errors import DeliveryError
from engine.deliver.positions import PoolIdentity, Position, Tail

#: The option that takes a topic over, named in the errors.
TAKE_OVER_OPTION = "--take-over-topic"


class ForeignTopic(DeliveryError):
    """The output topic is delivered by another staging pool."""


class RecreatedTopic(ForeignTopic):
    """The output topic was deleted and created again since this pool delivered to it."""


class PositionLost(DeliveryError):
    """The committed position expired and the topic's tail cannot stand in for it."""


@dataclass(frozen=True)
class Seen:
    """What reading back found: the topic's Kafka id (None: a broker without ids), the
    claim on it, each partition's committed position and the tail."""

    topic_id: str | None
    claim: Claim | None
    committed: Mapping[int, Committed | None]
    tail: Tail


@dataclass
class Standing:
    """Where delivery stands: each partition's position (None: nothing delivered
    there), the Kafka offsets to commit, whether the claim names this pool and topic
    already, and whether the positions must be committed before anything else."""

    positions: dict[int, Position | None]
    ends: dict[int, int]
    topic_id: str | None
    claimed: bool
    commit: bool
    notes: list[str] = field(default_factory=list)


def later(first: Position | None, second: Position | None) -> Position | None:
    """The later of two positions of one partition (by pool offset, then step)."""
    if first is None:
        return second
    if second is None:
        return first
    return second if (second.offset, second.step) > (first.offset, first.step) else first


class Ownership:
    """Judges what is read back from ``topic`` for the pool ``identity``.

    ``staged_last`` gives the largest pool offset the pool stages for the topic (asked
    only for a tail position naming no pool); ``compacted`` whether the topic is
    compacted (asked only when the committed position expired).
    """

    def __init__(
        self,
        identity: PoolIdentity,
        topic: str,
        *,
        take_over: bool,
        staged_last: Callable[[], int | None],
        compacted: Callable[[], bool],
    ) -> None:
        self.identity = identity
        self.topic = topic
        self.take_over = take_over
        self._staged_last = staged_last
        self._compacted = compacted
        self._staged: tuple[int | None] | None = None
        self.notes: list[str] = []

    @property
    def me(self) -> str:
        return f"staging pool {self.identity.name!r} (table id {self.identity.id})"

    def judge(self, seen: Seen) -> Standing:
        """Where delivery stands (rules 1-4 of the module); raises
        :class:`ForeignTopic`, :class:`RecreatedTopic` or :class:`PositionLost`."""
        self.notes = []
        claim, current = seen.claim, seen.topic_id
        if claim is not None:
            if _another(claim.topic_id, current):
                return self._recreated(seen, claim.writer, claim.topic_id)
            if claim.pool_id != self.identity.id:
                return self._foreign(seen, claim.writer, None)
        committed: dict[int, Committed] = {}
        for partition, entry in sorted(seen.committed.items()):
            if entry is None:
                continue
            if _another(entry.topic_id, current):
                if claim is None:
                    return self._recreated(seen, entry.writer, entry.topic_id)
            elif entry.pool_id != self.identity.id:
                if claim is None:
                    return self._foreign(seen, entry.writer, partition)
            else:
                committed[partition] = entry
        tail = seen.tail
        if claim is None and not committed:
            positions, taken = self._judge_tail(tail.positions)
            known = taken or any(p is not None for p in positions.values())
            return self._standing(seen, positions, {}, claimed=False, commit=known)
        mine = {
            p: pos
            for p, pos in tail.positions.items()
            if pos is not None and pos.pool_id == self.identity.id
        }
        if committed:
            positions = {
                p: later(committed[p].position if p in committed else None, mine.get(p))
                for p in tail.marks
            }
            held = {p: c.position for p, c in committed.items()}
            commit = claim is None or any(positions[p] != held.get(p) for p in positions)
            return self._standing(seen, positions, committed, claimed=claim is not None,
                                  commit=commit)  # fmt: skip
        lost = self._lost(tail, mine)
        if lost:
            error = PositionLost(
                f"topic {self.topic!r}: the committed delivery position expired (was "
                "to-kafka stopped longer than the broker's offsets.retention.minutes?) "
                f"and partition(s) {', '.join(map(str, lost))} no longer show what was "
                f"delivered (retention or compaction removed records); pass "
                f"{TAKE_OVER_OPTION} to deliver pool {self.identity.name!r} from its first "
                "output again"
            )
            return self._start_over(seen, error, "whose committed position expired")
        self._note(
            f"{self.topic}: the committed delivery position expired; the topic's records "
            "show where delivery stopped: committing it again"
        )
        positions = {p: mine.get(p) for p in tail.marks}
        return self._standing(seen, positions, {}, claimed=True, commit=True)

    # -- outcomes -----------------------------------------------------------------------

    def _standing(
        self,
        seen: Seen,
        positions: dict[int, Position | None],
        committed: Mapping[int, Committed],
        *,
        claimed: bool,
        commit: bool,
    ) -> Standing:
        """The Kafka offsets to commit: the committed ones, else each partition's end."""
        ends = {p: high for p, (_, high) in seen.tail.marks.items()}
        ends |= {p: c.kafka_offset for p, c in committed.items() if c.kafka_offset >= 0}
        return Standing(positions, ends, seen.topic_id, claimed, commit, list(self.notes))

    def _start_over(self, seen: Seen, error: DeliveryError, what: str) -> Standing:
        """Deliver from the pool's first output when the topic is taken over (``what``
        says from what, for the note); else raise ``error``."""
        if not self.take_over:
            raise error
        self._note(
            f"{self.topic}: taking the topic over {what}: delivering pool "
            f"{self.identity.name!r} from its first output"
        )
        positions: dict[int, Position | None] = dict.fromkeys(seen.tail.marks)
        return self._standing(seen, positions, {}, claimed=False, commit=True)

    def _recreated(self, seen: Seen, writer: str, before: str | None) -> Standing:
        error = RecreatedTopic(
            f"topic {self.topic!r} was deleted and created again since {writer} delivered "
            f"to it (topic id {before}, now {seen.topic_id}); pass {TAKE_OVER_OPTION} to "
            f"deliver pool {self.identity.name!r} from its first output"
        )
        return self._start_over(seen, error, f"(created again since {writer} delivered to it)")

    def _foreign(self, seen: Seen, writer: str, partition: int | None) -> Standing:
        where = "" if partition is None else f" (partition {partition})"
        error = ForeignTopic(
            f"topic {self.topic!r} was last written by {writer}{where}, not by {self.me}; "
            f"pass {TAKE_OVER_OPTION} to deliver pool {self.identity.name!r} from its first "
            "output after what the topic holds"
        )
        return self._start_over(seen, error, f"from {writer}")

    # -- the tail -----------------------------------------------------------------------

    def _lost(self, tail: Tail, mine: Mapping[int, Position]) -> list[int]:
        """Partitions where the tail cannot stand in for an expired committed position
        (rule 3)."""
        lost = []
        for partition, (low, high) in sorted(tail.marks.items()):
            position = mine.get(partition)
            if position is not None:
                if self._compacted() and (position.at is None or high != position.at + 2):
                    lost.append(partition)  # a tombstone after it may have been removed
            elif not (high == 0 or (low == 0 and not self._compacted())):
                lost.append(partition)  # records removed: ours may have been among them
        return lost

    def _judge_tail(self, found: Mapping[int, Position | None]) -> tuple[dict[int, Position | None], bool]:
        """Rule 4: the tail's positions that are this pool's (others become None) and
        whether the topic was taken over; raises :class:`ForeignTopic` for another
        pool's tail the topic was not taken over from."""
        ours = [p.timestamp for p in found.values() if p is not None and self._ours(p)]
        newest = max((t for t in ours if t is not None), default=None)
        judged: dict[int, Position | None] = {}
        taken = False
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
                taken = True
            else:
                raise ForeignTopic(
                    f"topic {self.topic!r} was last written by {position.writer} "
                    f"(partition {partition}, pool offset {position.offset}), not by "
                    f"{self.me}; pass {TAKE_OVER_OPTION} to deliver pool "
                    f"{self.identity.name!r} from its first output after what the topic holds"
                )
        return judged, taken

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


def _another(seen_id: str | None, current: str | None) -> bool:
    """Whether ``seen_id`` names another incarnation of the topic than ``current``
    (unknown ids never differ)."""
    return seen_id is not None and current is not None and seen_id != current
