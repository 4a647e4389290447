"""Transactional producing: one Kafka transaction per batch, retried after a failure.

Records are produced in Kafka transactions by a transactional producer whose
``transactional.id`` is derived from the topic, so a restarted process fences the zombie
of a killed one (its open transaction is aborted before the tail is read), and a second
to-kafka on another host is fenced by Kafka. A transaction that fails is aborted (or,
when the broker gave it up during an outage, the producer is made again), the positions
are read back from the topic and only what is still missing is produced again; what is
transient and what is fatal, and the waits for an unreachable broker, are
:mod:`engine.deliver.faults`'.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING

from engine.deliver.errors import DeliveryError
from engine.deliver.faults import RENEW, STEP, Faults
from engine.deliver.positions import Position

if TYPE_CHECKING:
    from confluent_kafka import Producer

    from engine.deliver.ledger import Ledger
    from engine.deliver.positions import Headers
    from engine.deliver.rows import Batch
    from engine.deliver.status import StatusBoard
    from engine.settings.kafka import KafkaProfile

log = logging.getLogger("engine.to_kafka")

TXN_TIMEOUT = 60.0
#: Failed transactions in a row (outages aside) before the delivery gives up.
MAX_FAILURES = 5

#: Reads the delivered positions back from the topic (judged: only this pool's).
ReadBack = Callable[[], Mapping[int, "Position | None"]]


def transactional_id(topic: str) -> str:
    """Derived from the topic: a restarted delivery fences the previous one."""
    return f"zync-to-kafka-{topic}"


class Transactions:
    """The topic's transactional producer. :meth:`start` fences the previous incarnation;
    :meth:`transact` produces one batch in one transaction (the envelope's ``write``
    produces its messages, through :meth:`send` or :attr:`producer`). ``stop`` ends the
    waits for an unreachable broker; ``read_back`` reads the positions back (waiting for
    the broker, judged by :mod:`~engine.deliver.ownership`) after a failed transaction."""

    def __init__(
        self,
        kafka: KafkaProfile,
        topic: str,
        board: StatusBoard,
        stop: threading.Event | None = None,
        read_back: ReadBack | None = None,
    ) -> None:
        self.kafka = kafka
        self.topic = topic
        self.board = board
        self.faults = Faults(
            kafka, topic, transactional_id(topic), board, stop or threading.Event()
        )
        self.read_back = read_back
        self._producer: Producer | None = None

    @property
    def producer(self) -> Producer:
        assert self._producer is not None
        return self._producer

    def start(self) -> None:
        self._producer = self._new_producer()

    def _new_producer(self) -> Producer:
        # deferred: confluent_kafka (librdkafka)
        from confluent_kafka import KafkaException

        from engine.kafka.clients import producer

        made = producer(
            self.kafka,
            transactional_id=transactional_id(self.topic),
            extra={
                "transaction.timeout.ms": int(TXN_TIMEOUT * 1000),
                "error_cb": self.faults.error_cb,
            },
        )
        try:
            # fences the previous incarnation and completes its open transaction
            self.faults.wait(made, made.init_transactions, "starting the producer")
        except KafkaException as exc:
            raise DeliveryError(
                f"cannot start a transactional producer for topic {self.topic!r}: "
                f"{exc.args[0].str()}"
            ) from None
        return made

    def transact(self, batch: Batch, ledger: Ledger, write: Callable[[Batch], None]) -> int:
        """Produce ``batch`` in one transaction (``write`` produces its messages); the
        number of messages produced. After a failure: recover (see
        :mod:`engine.deliver.faults`), read the positions back from the topic, produce
        what is still missing."""
        from confluent_kafka import KafkaException  # deferred: librdkafka

        faults = self.faults
        failures = 0
        while len(batch):
            troubles = faults.troubles
            try:
                self._produce(batch, write)
            except KafkaException as exc:
                how = faults.recovery(exc.args[0], troubles)
                if faults.troubles == troubles and not faults.outage.down:
                    failures += 1  # outages and lost connections aside
                if failures >= MAX_FAILURES:
                    raise DeliveryError(
                        f"topic {self.topic!r}: gave up after {MAX_FAILURES} failed transactions"
                    ) from None
                self._recover(how)
                assert self.read_back is not None
                ledger.take(self.read_back())
                batch = ledger.unclaimed(batch)
                continue
            ledger.note(batch)
            return len(batch)
        return 0

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
        self.faults.wait(producer, producer.commit_transaction, "committing a transaction")

    def _recover(self, how: str) -> None:
        """Abort the failed transaction, or make the producer again (when told to, or
        when the abort fails)."""
        from confluent_kafka import KafkaException  # deferred: librdkafka

        producer = self.producer
        if how != RENEW:
            try:
                self.faults.wait(producer, producer.abort_transaction, "aborting a transaction")
                return
            except KafkaException as exc:
                log.warning("%s: the abort failed (%s); starting the producer again",
                            self.topic, exc.args[0].str())  # fmt: skip
        self._drop(producer)
        self._producer = None
        self._producer = self._new_producer()

    def send(
        self, value: bytes | None, key: bytes | None, partition: int, headers: Headers | None
    ) -> None:
        """Produce one message, waiting for room in the local queue if need be."""
        producer = self.producer
        waited = time.monotonic()
        while True:
            try:
                producer.produce(self.topic, value, key, partition=partition, headers=headers)
                return
            except BufferError:
                producer.poll(0.05)
                if time.monotonic() - waited > STEP:  # the queue does not drain
                    self.faults.check(producer, "producing", waited)
                    waited = time.monotonic()

    def close(self) -> None:
        if self._producer is not None:
            if self.faults.outage.down:  # nothing can be flushed
                self._drop(self._producer)
            else:
                with suppress(Exception):
                    self._producer.flush(10)
            self._producer = None

    @staticmethod
    def _drop(producer: Producer) -> None:
        """Let go of a producer whose messages cannot or must not be delivered."""
        with suppress(Exception):
            producer.purge()
