"""What from-kafka does when Kafka or the Schema Registry cannot be reached: the one place
that tells a transient outage (wait, retry, say so in words) from a fatal error.

Kafka (:class:`KafkaWatch`, in the consumer thread). librdkafka reconnects by itself and
keeps its fetch positions, but it says nothing of a broker that stopped answering (a
paused process keeps its connections open) and too much of one that is restarting (an
error per connection attempt). So the loop asks: when the consumer's error callback
reports a problem, when no record came for :data:`PROBE_IDLE` seconds, and before an idle
``exit_after`` exit, the consumer sends a metadata request. No answer within
:data:`PROBE_TIMEOUT` begins an outage ("Kafka at ... unreachable since ..., waiting");
an answer to a later request ends it ("... back after 21s, resuming"). While Kafka is out
the loop waits — ``exit_after`` counts from its return. A fatal client error stops the loop;
a record-level error is noted once per partition and error.

Schema Registry (:class:`RegistryWait`, in the decoder thread). A batch whose schema
lookup cannot reach the registry (:class:`~engine.kafka.registry_client.RegistryUnreachable`:
nothing listening, a timeout, a 5xx) is decoded again once it answers, backing off up to
:data:`REGISTRY_BACKOFF` seconds; the consumer thread waits for the decoder meanwhile, so
nothing becomes a dead letter for an outage (an unknown schema id from a registry that
answers still does). A stop while waiting drops that batch and the ones after it,
uncommitted: the next start reads them again from the pool's positions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException

from engine.kafka.clients import KafkaUnavailable
from engine.kafka.outage import BACK, UNREACHABLE, Outage
from engine.kafka.registry_client import RegistryUnreachable

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message

    from engine.ingest.buffer import Batch
    from engine.ingest.prepare import Prepared
    from engine.ingest.state import LoopState
    from engine.settings.kafka import KafkaProfile

log = logging.getLogger("engine.from_kafka")

#: Seconds a metadata request may wait for the broker before it counts as unreachable.
PROBE_TIMEOUT = 5.0
#: Seconds without a record after which the consumer asks whether Kafka is still there
#: (and again every as many seconds while it stays idle).
PROBE_IDLE = 5.0
#: Seconds between two requests while Kafka is out or in doubt (each waits up to
#: PROBE_TIMEOUT).
PROBE_AGAIN = 1.0
#: The longest wait between two attempts to decode a batch while the registry is out.
REGISTRY_BACKOFF = 5.0


class KafkaWatch:
    """Whether Kafka answers the consumer (see the module's docstring); ``error_cb`` is
    the consumer's ``error_cb``, the other methods run in the consumer thread."""

    def __init__(self, kafka: KafkaProfile, shared: LoopState, topic: str) -> None:
        self.outage = Outage(f"Kafka at {kafka.bootstrap_servers}", self._report)
        self._shared = shared
        self._topic = topic  # the metadata request asks for one input topic
        self._suspect: str | None = None  # why the error callback made us wonder
        self._fatal: KafkaError | None = None
        self._asked = 0.0  # when the last probe ended (time.monotonic())
        self._noted: dict[tuple[str | None, int | None], int] = {}  # partition -> error code

    @property
    def down(self) -> bool:
        return self.outage.down

    def error_cb(self, error: KafkaError) -> None:
        """A client-level error: fatal ones stop the loop at the next :meth:`check`,
        the others (a refused connection, all brokers down) are confirmed by a probe."""
        log.debug("librdkafka error: %s", error)
        if error.fatal():
            self._fatal = error
        elif self._suspect is None or error.code() != KafkaError._ALL_BROKERS_DOWN:
            self._suspect = _why(error)

    def check(self, consumer: Consumer, idle: float) -> None:
        """Between polls: ask Kafka when something suggests it is gone (a client error,
        ``idle`` seconds without a record, an outage under way), at most every so often.
        May block up to :data:`PROBE_TIMEOUT` seconds."""
        if self._fatal is not None:
            raise KafkaUnavailable(f"Kafka reported a fatal error: {self._fatal.str()}")
        elapsed = time.monotonic() - self._asked
        if self._suspect is not None or self.outage.down:
            due = elapsed >= PROBE_AGAIN
        else:
            due = idle >= PROBE_IDLE and elapsed >= PROBE_IDLE
        if due:
            self.probe(consumer)

    def probe(self, consumer: Consumer) -> bool:
        """One metadata request: True when Kafka answered (an outage ends), False when
        not (an outage begins)."""
        asked = time.monotonic()
        try:
            consumer.list_topics(self._topic, timeout=PROBE_TIMEOUT)
        except KafkaException as exc:
            reason = self._suspect or _why(exc.args[0], timeout=PROBE_TIMEOUT)
            self.outage.begin(reason, since=asked)
            return False
        finally:
            self._asked = time.monotonic()
        self._suspect = None
        self.outage.end()
        return True

    def message_errors(self, messages: Sequence[Message]) -> None:
        """Records that carry an error instead of data: a fatal one stops the loop, the
        others are noted (once per partition and error) and logged."""
        for m in messages:
            error = m.error()
            if error is None:
                continue
            if error.fatal():
                raise KafkaUnavailable(f"Kafka reported a fatal error: {error.str()}")
            where = (m.topic(), m.partition())
            log.warning("consumer error on %s[%s]: %s", m.topic(), m.partition(), error.str())
            if self._noted.get(where) != error.code():
                self._noted[where] = error.code()
                self._shared.note(f"{m.topic()}[{m.partition()}]: {error.str()}")

    def _report(self, kind: str, text: str) -> None:
        self._noted.clear()  # after an outage, say again what goes wrong
        log.debug("%s", text)  # said through the loop's notes or events
        _outage(self._shared, "kafka", kind, text)
        self._shared.note(text, kind)


class RegistryWait:
    """Decodes batches (``prepare``), waiting out Schema Registry outages until ``stop``."""

    def __init__(
        self,
        shared: LoopState,
        stop: threading.Event,
        prepare: Callable[[Batch], Prepared],
    ) -> None:
        self._shared = shared
        self._stop = stop
        self._prepare = prepare
        self.outage: Outage | None = None

    def prepare(self, batch: Batch) -> Prepared | None:
        """The batch prepared, once the registry answers; None when stopped meanwhile
        (the batch is not committed)."""
        wait = 0.5
        while True:
            try:
                prepared = self._prepare(batch)
            except RegistryUnreachable as exc:
                self._shared.heartbeat.beat()
                if self.outage is None:
                    self.outage = Outage(exc.where, self._report)
                if self.outage.begin(exc.reason):
                    self._shared.note(
                        f"{len(batch.messages):,} record(s) for pool {batch.pool!r} wait to be "
                        "decoded (none becomes a dead letter for an outage)"
                    )
                wait = min(wait * 2, REGISTRY_BACKOFF)
                with self._shared.heartbeat.waiting(f"waiting for {exc.where}"):
                    stopped = self._stop.wait(wait)
                if stopped:
                    self._shared.note(
                        f"stopped while waiting for {exc.where}: the records not committed "
                        "are read again on the next start"
                    )
                    return None
                continue
            if self.outage is not None:
                self.outage.end()
            return prepared

    def _report(self, kind: str, text: str) -> None:
        log.debug("%s", text)  # said through the loop's notes or events
        _outage(self._shared, "registry", kind, text)
        self._shared.note(text, kind)


def _outage(shared: LoopState, dependency: str, kind: str, text: str) -> None:
    """Keep an outage under way in the loop's state (its snapshot tells the API)."""
    with shared.lock:
        if kind == UNREACHABLE:
            shared.outages[dependency] = text
        elif kind == BACK:
            shared.outages.pop(dependency, None)


def _why(error: KafkaError, *, timeout: float | None = None) -> str:
    """What went wrong with Kafka, in a few words."""
    if timeout is not None and error.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT):
        return f"no answer within {timeout:g}s"
    text = str(error.str())
    if error.code() == KafkaError._TRANSPORT and "failed: " in text:
        return text.rsplit("failed: ", 1)[1]  # "Connection refused (after 0ms in state ...)"
    return text
