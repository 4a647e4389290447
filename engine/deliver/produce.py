"""Transactional producing: one Kafka transaction per batch, retried after an abort.

Records are produced in Kafka transactions by a transactional producer whose
``transactional.id`` is derived from the topic, so a restarted process fences the zombie
of a killed one (its open transaction is aborted before the tail is read), and a second
to-kafka on another host is fenced by Kafka. After an abortable error the transaction is
aborted, the positions are read back from the topic and only what is still missing is
produced again.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING

from engine.deliver.errors import DeliveryError, DeliveryFenced
from engine.deliver.positions import Headers, Position

if TYPE_CHECKING:
    from confluent_kafka import Producer

    from engine.deliver.ledger import Ledger
    from engine.deliver.rows import Batch
    from engine.deliver.status import StatusBoard
    from engine.settings.kafka import KafkaProfile

TXN_TIMEOUT = 60.0

#: Reads the delivered positions back from the topic (judged: only this pool's).
ReadBack = Callable[[], Mapping[int, "Position | None"]]


def transactional_id(topic: str) -> str:
    """Derived from the topic: a restarted delivery fences the previous one."""
    return f"zync-to-kafka-{topic}"


class Transactions:
    """The topic's transactional producer. :meth:`start` fences the previous incarnation;
    :meth:`transact` produces one batch in one transaction (the envelope's ``write``
    produces its messages, through :meth:`send` or :attr:`produce`). ``read_back``
    reads the positions back after an aborted transaction."""

    def __init__(
        self,
        kafka: KafkaProfile,
        topic: str,
        board: StatusBoard,
        read_back: ReadBack | None = None,
    ) -> None:
        self.kafka = kafka
        self.topic = topic
        self.board = board
        self.read_back = read_back
        self._producer: Producer | None = None

    @property
    def producer(self) -> Producer:
        assert self._producer is not None
        return self._producer

    def start(self) -> None:
        # deferred: confluent_kafka (librdkafka)
        from confluent_kafka import KafkaException

        from engine.kafka.clients import producer

        self._producer = producer(
            self.kafka,
            transactional_id=transactional_id(self.topic),
            extra={"transaction.timeout.ms": int(TXN_TIMEOUT * 1000)},
        )
        try:
            # fences the previous incarnation and completes its open transaction
            self._producer.init_transactions(TXN_TIMEOUT)
        except KafkaException as exc:
            raise DeliveryError(
                f"cannot start a transactional producer for topic {self.topic!r}: "
                f"{exc.args[0].str()}"
            ) from None

    def transact(self, batch: Batch, ledger: Ledger, write: Callable[[Batch], None]) -> int:
        """Produce ``batch`` in one transaction (``write`` produces its messages); the
        number of messages produced. On an abortable error: abort, read the positions
        back from the topic, produce what is still missing."""
        from confluent_kafka import KafkaException  # deferred: librdkafka

        for _ in range(5):
            if not len(batch):
                return 0
            try:
                self._produce(batch, write)
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal() or "fenc" in error.str().lower():
                    raise DeliveryFenced(
                        f"topic {self.topic!r}: another to-kafka took over the topic "
                        f"(transactional id {transactional_id(self.topic)!r}): {error.str()}"
                    ) from None
                if not (error.txn_requires_abort() or error.retriable()):
                    raise DeliveryError(f"topic {self.topic!r}: {error.str()}") from None
                self.board.set(last_error=error.str())
                self.board.emit(
                    "retrying", f"{self.topic}: transaction failed ({error.str()}); retrying"
                )
                with suppress(KafkaException):
                    self.producer.abort_transaction(TXN_TIMEOUT)
                assert self.read_back is not None
                ledger.take(self.read_back())
                batch = ledger.unclaimed(batch)
                continue
            ledger.note(batch)
            return len(batch)
        raise DeliveryError(f"topic {self.topic!r}: gave up after 5 failed transactions")

    def _produce(self, batch: Batch, write: Callable[[Batch], None]) -> None:
        producer = self.producer
        paused = gc.isenabled()
        gc.disable()  # a million short-lived dicts, no cycles: the collector only costs
        try:
            producer.begin_transaction()
            write(batch)
        finally:
            if paused:
                gc.enable()
        producer.commit_transaction(TXN_TIMEOUT)

    def send(
        self, value: bytes | None, key: bytes | None, partition: int, headers: Headers | None
    ) -> None:
        """Produce one message, waiting for room in the local queue if need be."""
        producer = self.producer
        while True:
            try:
                producer.produce(self.topic, value, key, partition=partition, headers=headers)
                return
            except BufferError:
                producer.poll(0.05)

    def close(self) -> None:
        if self._producer is not None:
            with suppress(Exception):
                self._producer.flush(10)
            self._producer = None
