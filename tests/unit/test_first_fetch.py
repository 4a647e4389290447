"""``exit_after`` and a partition's first fetch, in librdkafka's order: a fetch response
sets the partition's cached watermark a moment before its records reach the consumer's
queue, so the watermark may be known after a poll that came back empty while the records
are only in the next poll. Neither loop may exit on that empty poll. The collaborators
are stand-ins: the order of events is the point, and a real broker only shows it by
chance (a busy machine)."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME

from engine.ingest.buffer import Buffers
from engine.ingest.consume_loop import ConsumeLoop
from engine.ingest.options import IngestOptions
from engine.ingest.state import LoopState
from engine.kafka.consume import ConsumeOptions, PartDecoder, _records
from engine.settings.kafka import KafkaProfile


class Record:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def key(self) -> None:
        return None

    def value(self) -> bytes:
        return b'{"i": %d}' % self._offset

    def __len__(self) -> int:  # as confluent-kafka's Message: the value's size
        return len(self.value())

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_CREATE_TIME, 1


class FirstFetchLate:
    """A consumer whose first fetch response lands just as its first poll times out:
    the watermark is cached at once, the records come with the second poll."""

    def __init__(self) -> None:
        self.polls = 0

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Record]:
        self.polls += 1
        if self.polls == 2:
            return [Record(0), Record(1)]
        time.sleep(timeout)  # an empty poll lasts its timeout
        return []

    def get_watermark_offsets(self, partition: Any, cached: bool = False) -> tuple[int, int]:
        return (0, 2) if self.polls >= 1 else (-1001, -1001)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        pass  # its metadata: nothing a fake consumer needs

    def assign(self, partitions: Any) -> None:
        pass

    def assignment(self) -> list[Any]:
        from confluent_kafka import TopicPartition

        return [TopicPartition("t", 0)]

    def close(self) -> None:
        pass


def test_consume_reads_the_records_of_a_first_fetch_that_answered_after_an_empty_poll() -> None:
    kafka = FirstFetchLate()
    records = list(
        _records(
            KafkaProfile(bootstrap_servers="127.0.0.1:1"),
            ConsumeOptions("t", exit_after=0.001),
            [0],
            0,
            PartDecoder("json", None, part="key"),
            PartDecoder("json", None),
            None,
            None,
            lambda *_args, **_kw: kafka,
        )
    )
    assert [r["value"] for r in records] == [{"i": 0}, {"i": 1}]


class Stand:
    """What ConsumeLoop asks of positions, stages, the GC pause and the Kafka watch."""

    grouped = False
    rebalances = 0
    seeks = ()
    handed = 0
    inflight = 0
    down = False

    def when_idle(self) -> None:
        pass

    def check(self, consumer: Any, idle: float) -> None:
        pass

    def probe(self, consumer: Any) -> bool:
        return True


class Answers:
    """An assignment whose one partition has answered once the consumer polled."""

    def __init__(self, kafka: FirstFetchLate) -> None:
        self.kafka = kafka

    def read_watermarks(self, consumer: Any) -> bool:
        return self.kafka.polls >= 1


def test_from_kafka_does_not_exit_on_the_poll_before_the_first_fetch_records() -> None:
    kafka = FirstFetchLate()
    seen: list[int] = []

    class Loop(ConsumeLoop):
        def _hand_over(self, pool: str, messages: list[Any]) -> None:
            seen.extend(m.offset() for m in messages)

    stand = Stand()
    options = IngestOptions(exit_after=0.001)
    loop = Loop(options, LoopState(), stand, stand, stand, {"t": "P"}, stand)  # type: ignore[arg-type]
    # a bare LoopState names no pool: the loop buffers for one, P, fed by topic t
    loop.buffers = Buffers(["P"], {"t": "P"}, options, loop._hand_over)
    assert loop.run(kafka, Answers(kafka), threading.Event())  # type: ignore[arg-type]
    assert kafka.polls >= 2
    assert seen == [0, 1]
