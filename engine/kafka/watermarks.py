"""A partition's low and high watermarks: asked of its leader (:func:`watermarks`), or as
a consumer's latest fetch gave them (:func:`fetched_watermarks`). Figures for people (lag,
the console) and for when a run may end; exactly-once positions come from the pools and
the output topics' headers, never from these."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaException, TopicPartition

from engine.kafka.clients import KafkaUnavailable, passing


def watermarks(
    kafka: Consumer, topic: str, partitions: list[int], timeout: float = 10.0
) -> dict[int, tuple[int, int]]:
    """Low and high watermark per partition: figures for people (lag); exactly-once
    positions come from the pools and the output topics' headers, never from these."""
    out = {}
    for partition in partitions:
        try:
            out[partition] = kafka.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout, cached=False
            )
        except KafkaException as exc:
            raise KafkaUnavailable(
                f"cannot read offsets of {topic}[{partition}]: {exc.args[0].str()}",
                passing=passing(exc.args[0]),
            ) from None
    return out


#: ``exit_after`` (from-kafka, consume) counts once every partition read has answered a
#: fetch (:func:`fetched_watermarks`), or this many seconds after the partitions were
#: assigned: a partition without a leader must not keep a run from ever exiting.
FIRST_FETCH_GRACE = 60.0


def fetched_watermarks(
    kafka: Consumer, partitions: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, int]]:
    """Low and high watermark of each partition as its latest fetch response gave them
    (no request: librdkafka's cached values). A partition not fetched from yet is left
    out: until then the consumer cannot know whether records wait there, so ``exit_after``
    does not count it as idle."""
    out = {}
    for topic, partition in partitions:
        try:
            low, high = kafka.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        except KafkaException:
            continue
        if high >= 0:
            out[(topic, partition)] = (max(low, 0), high)
    return out
