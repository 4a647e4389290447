"""Claims: which staging pool delivers each output topic, and to which incarnation of
the topic — kept in Kafka apart from the topic, so that they outlive it
(docs/design.md#exactly-once-to-kafka).

Deleting a topic deletes its committed offsets with it (:mod:`~engine.deliver.committed`),
so a recreated topic would look like a new one. The compacted topic
:data:`CLAIMS_TOPIC` (one partition; created when first needed, with the brokers'
default replication) keeps one record per output topic, keyed by its name: the Kafka
topic id it was delivered to and the staging pool (Delta table id and name) that
delivers it (:class:`Claim`). A delivery writes its claim in the transaction that first
delivers to a topic (or that takes the topic over), so a claim exists exactly when the
records it speaks of do; it changes only then, so the topic stays small. On start the
whole topic is read (read_committed) and the last record of the output topic taken.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.deliver.errors import DeliveryError
from engine.deliver.positions import READ_WAIT, TAIL_READER

if TYPE_CHECKING:
    from collections.abc import Mapping

    from engine.deliver.positions import PoolIdentity
    from engine.kafka.clients import TopicSpec
    from engine.settings.kafka import KafkaProfile

#: The topic holding every output topic's claim.
CLAIMS_TOPIC = "_zync-to-kafka-claims"
#: Its settings: the latest claim of each output topic is kept forever.
CLAIMS_CONFIG = {"cleanup.policy": "compact"}


def claims_spec() -> TopicSpec:
    """How :data:`CLAIMS_TOPIC` is made when missing: one partition, the brokers'
    replication, compacted."""
    from engine.kafka.clients import TopicSpec  # deferred: librdkafka

    return TopicSpec(1, -1, CLAIMS_CONFIG)


@dataclass(frozen=True)
class Claim:
    """Output topic (``topic_id``) is delivered by the staging pool ``pool_id``
    (``pool_name``)."""

    topic_id: str | None
    pool_id: str
    pool_name: str

    @classmethod
    def of(cls, identity: PoolIdentity, topic_id: str | None) -> Claim:
        return cls(topic_id, identity.id, identity.name)

    @property
    def writer(self) -> str:
        return f"staging pool {self.pool_name!r} (table id {self.pool_id})"

    def value(self) -> bytes:
        data = {"topic_id": self.topic_id, "pool_id": self.pool_id, "pool": self.pool_name}
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def parse(cls, raw: bytes | None) -> Claim | None:
        try:
            data = json.loads(raw or b"")
            topic_id = data.get("topic_id")
            return cls(
                None if topic_id is None else str(topic_id),
                str(data["pool_id"]),
                str(data["pool"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def ensure_with_claims(
    kafka: KafkaProfile, wanted: Mapping[str, TopicSpec], *, timeout: float = 10.0
) -> dict[str, tuple[list[int], bool]]:
    """The ``wanted`` output topics and :data:`CLAIMS_TOPIC` made ready in one look at
    the cluster: each topic's partitions and whether it was created. Kafka refusing the
    claims topic says what to do about it; anything else is Kafka's own words
    (:class:`~engine.kafka.clients.KafkaUnavailable` and its kinds)."""
    from engine.kafka.clients import TopicRefused, ensure_topics  # deferred: librdkafka

    try:
        return ensure_topics(kafka, {**wanted, CLAIMS_TOPIC: claims_spec()}, timeout=timeout)
    except TopicRefused as exc:
        if exc.topic != CLAIMS_TOPIC:
            raise
        raise DeliveryError(
            f"{exc}; to-kafka keeps which staging pool delivers each output topic in "
            f"{CLAIMS_TOPIC!r}: create it (compacted, one partition) or let zync's user "
            "create it"
        ) from None


def read_claim(kafka: KafkaProfile, topic: str, timeout: float = 30.0) -> Claim | None:
    """The latest claim on ``topic`` (None: none), reading :data:`CLAIMS_TOPIC` whole."""
    # deferred: confluent_kafka (librdkafka)
    from confluent_kafka import KafkaException, TopicPartition

    from engine.kafka.clients import consumer
    from engine.kafka.watermarks import watermarks

    wanted = topic.encode()
    found: Claim | None = None
    reader = consumer(kafka, extra=TAIL_READER)
    deadline = time.monotonic() + timeout
    try:
        low, high = watermarks(reader, CLAIMS_TOPIC, [0])[0]
        if high <= low:
            return None
        reader.assign([TopicPartition(CLAIMS_TOPIC, 0, low)])
        while True:
            if time.monotonic() > deadline:
                raise DeliveryError(
                    f"could not read {CLAIMS_TOPIC!r} within {timeout:g}s to find who "
                    f"delivers topic {topic!r}; is the broker healthy?"
                )
            try:
                messages = reader.consume(10_000, READ_WAIT)
            except KafkaException as exc:
                raise DeliveryError(
                    f"cannot read {CLAIMS_TOPIC!r}: {exc.args[0].str()}"
                ) from None
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == error._PARTITION_EOF:
                        return found
                    if error.fatal() or not error.retriable():
                        raise DeliveryError(f"cannot read {CLAIMS_TOPIC!r}: {error.str()}")
                    continue
                if message.key() == wanted:
                    found = Claim.parse(message.value()) or found
    finally:
        reader.close()
