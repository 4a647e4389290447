"""The position keeper: where delivery to one topic stands, read back and kept
(docs/design.md#exactly-once-to-kafka).

:class:`PositionKeeper` reads back, waiting for the broker, the three places that say
where delivery stands — the topic's Kafka id and the claim on it
(:mod:`~engine.deliver.claims`), the committed position of every partition
(:mod:`~engine.deliver.committed`) and the tail (:mod:`~engine.deliver.positions`) — and
has them judged (:mod:`~engine.deliver.ownership`). Then it says what each transaction
commits beside its records: every partition's position, with the Kafka offset after
to-kafka's last record there (noted from the delivery reports), and the claim until it
names this pool and this topic id.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from engine.deliver.claims import CLAIMS_TOPIC, Claim, read_claim
from engine.deliver.committed import REFRESH, CommittedPositions
from engine.deliver.ownership import Ownership, Seen, Standing
from engine.deliver.positions import PoolIdentity, Position, read_positions

if TYPE_CHECKING:
    from confluent_kafka import Message, TopicPartition

    from engine.deliver.faults import Faults
    from engine.deliver.status_board import StatusBoard
    from engine.settings.kafka import KafkaProfile

#: The staging time and lower bound a transaction closes (time-based envelopes).
Stamp = tuple["int | None", "int | None"]


class PositionKeeper:
    """Reads back and keeps where delivery of the pool ``identity`` to ``topic`` stands.

    ``take_over`` and ``staged_last`` are :class:`~engine.deliver.ownership.Ownership`'s;
    ``faults`` waits for the broker; notes go to ``board``."""

    def __init__(
        self,
        kafka: KafkaProfile,
        topic: str,
        identity: PoolIdentity,
        *,
        take_over: bool,
        staged_last: Callable[[], int | None],
        faults: Faults,
        board: StatusBoard,
    ) -> None:
        self.kafka = kafka
        self.topic = topic
        self.identity = identity
        self.faults = faults
        self.board = board
        self.owner = Ownership(
            identity, topic, take_over=take_over, staged_last=staged_last, compacted=self._compacted
        )
        self.committed = CommittedPositions(kafka, topic)
        #: the latest judgement of what was read back (None: not read back yet)
        self.standing: Standing | None = None
        self._stamp: Stamp = (None, None)
        self._reported: dict[int, int] = {}  # partition -> Kafka offset of our last record
        self._last_commit = time.monotonic()

    # -- reading back -------------------------------------------------------------------

    def read_back(self, partitions: Sequence[int]) -> dict[int, Position | None]:
        """Each partition's position, read back (waiting while the broker is out) and
        judged; only this pool's count."""
        standing = self.owner.judge(self.faults.read_back(lambda: self._read(partitions)))
        for note in standing.notes:
            self.board.emit("owner", note)
        self.standing = standing
        latest = None
        for position in standing.positions.values():
            if position is not None and (latest is None or position > latest):
                latest = position
        self._stamp = (None, None) if latest is None else (latest.time, latest.lower)
        return standing.positions

    def _read(self, partitions: Sequence[int]) -> Seen:
        from confluent_kafka import KafkaException  # deferred: librdkafka

        from engine.kafka.clients import KafkaUnavailable, admin_client, passing, topic_id

        # four reads of what Kafka holds, none depending on another (the topic is locked
        # and the previous producer fenced, so nothing moves under them): at once, a
        # round trip or two each (90 ms one after the other at every start)
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="zync-read-back") as reads:
            current = reads.submit(lambda: topic_id(admin_client(self.kafka), self.topic))
            claim = reads.submit(read_claim, self.kafka, self.topic)
            committed = reads.submit(self.committed.read, partitions, timeout=30.0)
            tail = reads.submit(read_positions, self.kafka, self.topic, partitions)
            try:
                positions = committed.result()
            except KafkaException as exc:
                raise KafkaUnavailable(
                    f"cannot read the committed positions of topic {self.topic!r} (group "
                    f"{self.committed.group!r}): {exc.args[0].str()}",
                    passing=passing(exc.args[0]),
                ) from None
            return Seen(current.result(), claim.result(), positions, tail.result())

    def _compacted(self) -> bool:
        """Whether the topic is compacted (its ``cleanup.policy``)."""
        from engine.kafka.clients import admin_client, topic_config  # deferred: librdkafka

        policy = topic_config(admin_client(self.kafka), self.topic, "cleanup.policy") or ""
        return "compact" in policy

    # -- what a transaction commits -----------------------------------------------------

    def must_commit(self) -> bool:
        """Whether the positions judged differ from what is committed (an upgrade, a
        take-over, a missing claim): they are committed before anything else."""
        return self.standing is not None and self.standing.commit

    def refresh_due(self, delivered: bool) -> bool:
        """Whether to commit the position again (``delivered``: there is one to keep):
        it was last committed :data:`~engine.deliver.committed.REFRESH` seconds ago."""
        standing = self.standing
        known = delivered or (standing is not None and standing.claimed)
        return known and time.monotonic() - self._last_commit > REFRESH

    def begin(self) -> None:
        """A transaction begins: no delivery report yet."""
        self._reported = {}

    def delivered(self, error: Any, message: Message) -> None:
        """A message's delivery report (``on_delivery``): the largest offset per
        partition."""
        if error is None:
            offset, partition = message.offset(), message.partition()
            if (
                offset is not None
                and partition is not None
                and offset > self._reported.get(partition, -1)
            ):
                self._reported[partition] = offset

    def claim(self) -> tuple[str, bytes, bytes] | None:
        """The claim record (topic, key, value) the transaction must carry, if any."""
        standing = self.standing
        if standing is None or standing.claimed:
            return None
        claim = Claim.of(self.identity, standing.topic_id)
        return CLAIMS_TOPIC, self.topic.encode(), claim.value()

    def offsets(
        self,
        last: Mapping[int, tuple[int, int]],
        after: Mapping[int, int],
        stamp: Stamp | None,
    ) -> list[TopicPartition]:
        """What the transaction commits for every partition: the Kafka offset after our
        last record there and, as metadata, the position ``last`` (with the records
        counted ``after`` it; ``stamp``: the time it closes, None: the same as before)."""
        assert self.standing is not None
        ends = dict(self.standing.ends)
        for partition, offset in self._reported.items():
            ends[partition] = offset + 1
        time_, lower = self._stamp if stamp is None else stamp
        positions = {
            p: Position(o, st, time_, after=after.get(p, 0), lower=lower)
            for p, (o, st) in last.items()
        }
        return self.committed.offsets(positions, ends, self.identity, self.standing.topic_id)

    def group_metadata(self) -> Any:
        return self.committed.group_metadata()

    def committed_(self, stamp: Stamp | None) -> None:
        """The transaction was committed: its claim, offsets and time hold."""
        assert self.standing is not None
        self.standing.claimed = True
        self.standing.commit = False
        for partition, offset in self._reported.items():
            self.standing.ends[partition] = offset + 1
        if stamp is not None:
            self._stamp = stamp
        self._last_commit = time.monotonic()

    def close(self) -> None:
        self.committed.close()
