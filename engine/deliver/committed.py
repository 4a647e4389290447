"""The committed position: where delivery to an output topic stands, kept in Kafka's
offsets topic by the same transactions as the records it accounts for
(docs/design.md#exactly-once-to-kafka).

Every transaction of a delivery commits, through the transactional producer
(``send_offsets_to_transaction``), an offset for **every** partition of the output topic
under the consumer group :func:`group_id` (named like the transactional id: one per
output topic; no consumer ever joins it). For each partition:

* the committed offset is the Kafka offset just after to-kafka's last record there (the
  partition's end when to-kafka has written nothing there yet), so Kafka's own tools
  read the group as a consumer that has read what to-kafka wrote;
* its metadata (:class:`Committed`, compact JSON, well under the broker's 4 KB) says
  where delivery stands in staging: the pool offset and step through which the
  partition is delivered — after a transaction every partition stands at that
  transaction's last pool offset, since every record up to it is delivered wherever its
  key sends it — the records counted after it (``n``: records read back after an
  anchor of a tail, not claimed yet), the time (and lower bound) of the time-based
  envelopes, and who wrote it: the staging pool (Delta table id and name) and the Kafka
  id of the topic (a recreated topic has another).

The offsets topic is not the output topic, so the output topic's retention and
compaction do not touch the position. Deleting the topic deletes its committed offsets
(the broker does so); and an offset of a group without members expires
``offsets.retention.minutes`` (7 days by default) after it was last committed, so a
running delivery commits its position again after :data:`REFRESH` seconds without a
transaction. What a delivery finds on start is judged by
:mod:`~engine.deliver.ownership`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.deliver.positions import Position

if TYPE_CHECKING:
    from confluent_kafka import Consumer, TopicPartition

    from engine.deliver.positions import PoolIdentity
    from engine.settings.kafka import KafkaProfile

#: Seconds without a transaction after which a running delivery commits its position
#: again, so that the broker never expires it (``offsets.retention.minutes``).
REFRESH = 3600.0
#: The metadata's format (``"zync"`` in the JSON).
FORMAT = 1
#: Seconds between two reads of the committed positions while the group's coordinator
#: is not ready.
RETRY_AFTER = 0.2


def group_id(topic: str) -> str:
    """The consumer group under which delivery to ``topic`` commits its position."""
    return f"zync-to-kafka-{topic}"


@dataclass(frozen=True)
class Committed:
    """One partition's committed position: ``position`` (None: nothing of the pool
    delivered to the partition), who wrote it, and the committed Kafka offset."""

    position: Position | None
    pool_id: str
    pool_name: str
    topic_id: str | None
    kafka_offset: int

    @property
    def writer(self) -> str:
        return f"staging pool {self.pool_name!r} (table id {self.pool_id})"

    def metadata(self) -> str:
        data: dict[str, Any] = {
            "zync": FORMAT,
            "pool": self.pool_id,
            "name": self.pool_name,
            "topic": self.topic_id,
        }
        position = self.position
        if position is not None:
            data |= {"o": position.offset, "s": position.step}
            optional = {"n": position.after or None, "t": position.time, "l": position.lower}
            data |= {k: v for k, v in optional.items() if v is not None}
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str | None, kafka_offset: int) -> Committed | None:
        """The committed position in ``text``; None when it is not one zync wrote."""
        try:
            data = json.loads(text or "")
            if not isinstance(data, dict) or data.get("zync") != FORMAT:
                return None
            position = None
            if "o" in data:
                position = Position(
                    int(data["o"]),
                    int(data["s"]),
                    None if data.get("t") is None else int(data["t"]),
                    after=int(data.get("n", 0)),
                    lower=None if data.get("l") is None else int(data["l"]),
                    pool_id=str(data["pool"]),
                    pool_name=str(data["name"]),
                )
            topic_id = data.get("topic")
            return cls(
                position,
                str(data["pool"]),
                str(data["name"]),
                None if topic_id is None else str(topic_id),
                kafka_offset,
            )
        except (ValueError, KeyError, TypeError):
            return None


class CommittedPositions:
    """The committed positions of one output topic: read back through a consumer of
    :func:`group_id` (which never subscribes), whose group metadata the producer
    commits with."""

    def __init__(self, kafka: KafkaProfile, topic: str) -> None:
        from engine.kafka.clients import consumer  # deferred: confluent_kafka

        self.topic = topic
        self.group = group_id(topic)
        self._consumer: Consumer = consumer(kafka, extra={"group.id": self.group})

    def group_metadata(self) -> Any:
        """What ``send_offsets_to_transaction`` takes: a group that has no generation
        and no members (the broker checks neither for it)."""
        return self._consumer.consumer_group_metadata()

    def read(self, partitions: Sequence[int], timeout: float) -> dict[int, Committed | None]:
        """The committed position of each partition (None: none, or not zync's).
        Waits while a transaction that commits offsets is still open (the broker asks
        a read_committed consumer to wait for stable offsets), and while the group's
        coordinator is being found or loaded (a new cluster makes its offsets topic on
        the first use). Raises KafkaException."""
        from confluent_kafka import KafkaException, TopicPartition  # deferred: librdkafka

        wanted = [TopicPartition(self.topic, p) for p in partitions]
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = self._consumer.committed(
                    wanted, timeout=max(0.1, deadline - time.monotonic())
                )
                break
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(RETRY_AFTER)
        out: dict[int, Committed | None] = {}
        for entry in found:
            out[entry.partition] = (
                None if entry.offset < 0 else Committed.parse(entry.metadata, entry.offset)
            )
        return out

    def offsets(
        self,
        positions: Mapping[int, Position | None],
        ends: Mapping[int, int],
        identity: PoolIdentity,
        topic_id: str | None,
    ) -> list[TopicPartition]:
        """What a transaction commits: for every partition, ``ends`` (the Kafka offset
        after to-kafka's last record there) with ``positions`` as metadata."""
        from confluent_kafka import TopicPartition  # deferred: librdkafka

        out = []
        for partition in sorted(ends):
            entry = Committed(
                positions.get(partition), identity.id, identity.name, topic_id, ends[partition]
            )
            out.append(
                TopicPartition(
                    self.topic, partition, ends[partition], metadata=entry.metadata()
                )
            )
        return out

    def close(self) -> None:
        self._consumer.close()
