"""The output topic's transactional producer: made (which fences the previous
incarnation and completes its open transaction), the failed transaction aborted or the
producer made again, each message handed to librdkafka (waiting for room in its queue),
and let go. Its ``transactional.id`` is derived from the topic, so a restarted process,
or a second to-kafka on another host, fences the other one."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from engine.deliver.errors import DeliveryError
from engine.deliver.faults import RENEW, STEP, Faults

if TYPE_CHECKING:
    from confluent_kafka import Producer

    from engine.deliver.positions import Headers
    from engine.settings.kafka import KafkaProfile

log = logging.getLogger("engine.to_kafka")

#: How long a transaction may stay open before the broker aborts it.
TXN_TIMEOUT = 60.0


def transactional_id(topic: str) -> str:
    """Derived from the topic: a restarted delivery fences the previous one."""
    return f"zync-to-kafka-{topic}"


class OutputProducer:
    """The producer of ``topic``'s transactions; ``faults`` waits out an unreachable
    broker and says what a failure calls for."""

    def __init__(self, kafka: KafkaProfile, topic: str, faults: Faults) -> None:
        self.kafka = kafka
        self.topic = topic
        self.faults = faults
        self._client: Producer | None = None

    @property
    def client(self) -> Producer:
        assert self._client is not None
        return self._client

    def start(self) -> None:
        self._client = self._new()

    def _new(self) -> Producer:
        # deferred: confluent_kafka (librdkafka)
        from confluent_kafka import KafkaException

        from engine.kafka.clients import look_at_cluster, producer

        made = producer(
            self.kafka,
            transactional_id=transactional_id(self.topic),
            extra={
                "transaction.timeout.ms": int(TXN_TIMEOUT * 1000),
                "error_cb": self.faults.error_cb,
            },
        )
        # else its coordinator lookup may go out on the bootstrap connection librdkafka
        # drops, and be asked again 500 ms later
        look_at_cluster(made)
        try:
            # fences the previous incarnation and completes its open transaction
            self.faults.wait(made, made.init_transactions, "starting the producer")
        except KafkaException as exc:
            raise DeliveryError(
                f"cannot start a transactional producer for topic {self.topic!r}: "
                f"{exc.args[0].str()}"
            ) from None
        return made

    def recover(self, how: str) -> None:
        """Abort the failed transaction, or make the producer again (when told to, or
        when the abort fails)."""
        from confluent_kafka import KafkaException  # deferred: librdkafka

        client = self.client
        if how != RENEW:
            try:
                self.faults.wait(client, client.abort_transaction, "aborting a transaction")
                return
            except KafkaException as exc:
                log.warning("%s: the abort failed (%s); starting the producer again",
                            self.topic, exc.args[0].str())  # fmt: skip
        _drop(client)
        self._client = None
        self._client = self._new()

    def send_to(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int,
        headers: Headers | None = None,
        on_delivery: Callable[[Any, Any], None] | None = None,
    ) -> None:
        """Hand one message to librdkafka, waiting for room in its queue if need be."""
        client = self.client
        waited = time.monotonic()
        while True:
            try:
                client.produce(
                    topic, value, key, partition=partition, headers=headers, on_delivery=on_delivery
                )
                return
            except BufferError:
                client.poll(0.05)
                if time.monotonic() - waited > STEP:  # the queue does not drain
                    self.faults.check(client, "producing", waited)
                    waited = time.monotonic()

    def close(self) -> None:
        """Deliver what is queued (not during an outage: nothing could be) and let go."""
        if self._client is not None:
            if self.faults.outage.down:
                _drop(self._client)
            else:
                with suppress(Exception):
                    self._client.flush(10)
            self._client = None


def _drop(producer: Producer) -> None:
    """Let go of a producer whose messages cannot or must not be delivered."""
    with suppress(Exception):
        producer.purge()
