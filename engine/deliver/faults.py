"""What a delivery does when Kafka cannot be reached or a transaction fails: the one place
that tells a transient fault (wait, retry, say so in words) from a fatal one.

* Waiting (:meth:`Faults.wait`): the librdkafka calls that may be resumed after a
  timeout — starting the transactional producer, committing or aborting a transaction —
  are made in slices of :data:`STEP` seconds. After a slice without an answer a metadata
  request tells a slow broker (a big transaction being flushed: keep waiting, silently)
  from one that does not answer: that begins an outage, an ``unreachable`` event
  ("topic: Kafka at ... unreachable since ..., waiting"); the call's completion ends it,
  a ``back`` event ("... back after 21s, resuming"). librdkafka keeps the transaction
  and its messages meanwhile, so nothing is produced twice.
* A failed transaction (:meth:`Faults.recovery`): an abortable or retriable error is
  aborted (:data:`ABORT`), then the positions are read back from the topic and only what
  is missing is produced again. A fatal error (the producer fenced, its epoch bumped)
  during or right after an outage or a lost connection means the broker gave the
  transaction up (it outlived ``transaction.timeout.ms``, or the broker restarted): the
  producer is made again (:data:`RENEW`, which completes the old incarnation's
  transaction) and the positions are read back. Otherwise it is another to-kafka taking
  the topic over: :class:`DeliveryFenced`.
* Reading the positions back (:meth:`Faults.read_back`) waits for the broker too.
* ``stop`` while Kafka is out: :class:`StoppedWaiting` — the transaction in flight is not
  committed; the next start fences the old producer (aborting it) and delivers those
  records again.
* Committing the position (``send_offsets_to_transaction``) works around two librdkafka
  bugs (confluentinc/librdkafka#5456: it ignores its timeout; #5511: it hangs for good
  when the group coordinator it cached left the cluster's metadata, as a restarted
  broker does): a producer that went through an outage or lost a connection during the
  transaction is made again before it commits a position (:class:`Wedged`: the
  transaction is redone), and the call runs in a thread of its own, given up with its
  producer after :data:`WEDGED_AFTER` seconds (:meth:`Faults.watch`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TypeVar

from engine.deliver.errors import DeliveryError, DeliveryFenced
from engine.kafka.outage import BACK, UNREACHABLE, Outage

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Producer

    from engine.deliver.status_board import StatusBoard
    from engine.settings.kafka import KafkaProfile

log = logging.getLogger("engine.to_kafka")

#: Seconds a resumable call waits before the broker is asked whether it is there.
STEP = 5.0
#: Seconds before a call the broker answered with a retriable "not yet" is made again.
NOT_YET_PAUSE = 0.2
#: Seconds a metadata request may wait for the broker before it counts as unreachable.
PROBE_TIMEOUT = 5.0
#: Seconds between two attempts to read the positions back while Kafka is out.
READ_AGAIN = 1.0
#: Attempts to read the positions back from a broker that answers, before giving up.
READ_ATTEMPTS = 3
#: Seconds a read back may keep meeting errors that pass by themselves (a new topic's
#: leader being elected) before it gives up.
PASSING_FOR = 60.0

#: How a failed transaction is recovered from: abort it, or make the producer again.
ABORT: Final = "abort"
RENEW: Final = "renew"

_Read = TypeVar("_Read")


#: Seconds a call that may never return (:meth:`Faults.watch`) is given.
WEDGED_AFTER = 60.0


class StoppedWaiting(Exception):
    """``stop`` was set while Kafka was out: the transaction in flight is left."""


class Wedged(Exception):
    """The producer cannot be trusted to finish the transaction (a librdkafka call that
    does not return, or one a known bug may keep from returning): it is made again and
    the transaction redone."""


class Faults:
    """The faults of one delivery's producer (``transactional_id``, for the words);
    events go to ``board``."""

    def __init__(
        self,
        kafka: KafkaProfile,
        topic: str,
        transactional_id: str,
        board: StatusBoard,
        stop: threading.Event,
    ) -> None:
        self.kafka = kafka
        self.topic = topic
        self.transactional_id = transactional_id
        self.board = board
        self.stop = stop
        self.outage = Outage(
            f"Kafka at {kafka.bootstrap_servers}", self._report, prefix=f"{topic}: "
        )
        self._reason: tuple[float, str] | None = None  # the latest connection error, when
        self._waiting: int | None = None  # the heartbeat's token while Kafka is out
        #: outages and lost connections so far (:meth:`recovery` compares)
        self.troubles = 0

    def error_cb(self, error: KafkaError) -> None:
        """The producer's ``error_cb``: remembers why the broker cannot be reached."""
        from confluent_kafka import KafkaError  # deferred: librdkafka

        log.debug("librdkafka error: %s", error)
        if error.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
            self.troubles += 1
        if error.code() == KafkaError._TRANSPORT:
            text = str(error.str())
            self._reason = (time.monotonic(), text.rsplit("failed: ", 1)[-1])

    def wait(self, producer: Producer, call: Callable[[float], object], what: str) -> None:
        """Make ``call(timeout)`` (``init_transactions``, ``commit_transaction``,
        ``abort_transaction``) until it completes, resuming it after each timeout and
        making it again after a retriable answer (librdkafka's contract for these
        calls); the outage, if any, ends with it. Other errors are raised
        (``KafkaException``)."""
        from confluent_kafka import KafkaError, KafkaException  # deferred: librdkafka

        started = time.monotonic()
        while True:
            try:
                call(STEP)
            except KafkaException as exc:
                error = exc.args[0]
                if not error.retriable() or error.txn_requires_abort() or error.fatal():
                    raise
                if error.code() != KafkaError._TIMED_OUT:
                    # the broker answered "not yet" (a transaction coordinator still
                    # loading its partitions, as a broker just started does): ask again
                    if self.stop.wait(NOT_YET_PAUSE):
                        raise StoppedWaiting(what) from None
                    self.board.heartbeat.beat()
                    continue
                self.check(producer, what, started)
                continue
            self.outage.end()
            return

    def watch(self, producer: Producer, call: Callable[[], object], what: str) -> None:
        """``call()`` (a librdkafka call that may not return) in a thread of its own,
        asking the broker while it waits (:meth:`check`); :class:`Wedged` after
        :data:`WEDGED_AFTER` seconds (the call is left to its thread). Its errors are
        raised here."""
        done = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - raised by the waiting thread
                failed.append(exc)
            finally:
                done.set()

        started = time.monotonic()
        threading.Thread(target=run, name=f"zync-{what}", daemon=True).start()
        while not done.wait(STEP):
            self.check(producer, what, started)
            if time.monotonic() - started > WEDGED_AFTER:
                log.warning("%s: %s did not return in %gs", self.topic, what, WEDGED_AFTER)
                raise Wedged(what)
        if failed:
            raise failed[0]
        self.outage.end()

    def check(self, producer: Producer, what: str, since: float) -> None:
        """``what`` has waited since ``since`` (``time.monotonic()``): ask the broker; no
        answer begins an outage (and, once ``stop`` is set, gives up waiting)."""
        from confluent_kafka import KafkaException  # deferred: librdkafka

        try:
            producer.list_topics(self.topic, timeout=PROBE_TIMEOUT)
            self.board.heartbeat.beat()  # a slow broker, answering: progress
            return
        except KafkaException:
            self.outage.begin(f"{what}: {self._why(since)}", since)
        if self.stop.is_set():
            raise StoppedWaiting(what)

    def recovery(self, error: KafkaError, troubles_before: int) -> str:
        """How to go on after a transaction failed with ``error`` (:data:`ABORT` or
        :data:`RENEW`); raises :class:`DeliveryFenced` or :class:`DeliveryError` when
        there is no going on. ``troubles_before``: :attr:`troubles` when the
        transaction began (a fatal error after an outage or a lost connection is the
        broker's doing, not another to-kafka's)."""
        text = str(error.str())
        if error.fatal() or "fenc" in text.lower():
            if not (self.outage.down or self.troubles != troubles_before):
                raise DeliveryFenced(
                    f"topic {self.topic!r}: another to-kafka took over the topic "
                    f"(transactional id {self.transactional_id!r}): {text}"
                )
            self._retrying(f"the broker gave the transaction up while out of reach ({text}); "
                           "starting the producer again")  # fmt: skip
            return RENEW
        if not (error.txn_requires_abort() or error.retriable()):
            raise DeliveryError(f"topic {self.topic!r}: {text}")
        self._retrying(f"transaction failed ({text}); retrying")
        return ABORT

    def read_back(self, read: Callable[[], _Read]) -> _Read:
        """``read()`` (what is committed and the topic's tail, read back), waiting for
        the broker: while it is out, a metadata request every :data:`READ_AGAIN` seconds
        (each waiting up to :data:`PROBE_TIMEOUT`) says when to read again. An error that
        passes by itself (a new topic's leader not elected yet) is read again after a
        pause, for up to :data:`PASSING_FOR` seconds; any other, :data:`READ_ATTEMPTS`
        times."""
        from engine.kafka.clients import KafkaUnavailable  # deferred: confluent_kafka

        attempts = 0
        started = time.monotonic()
        pause = NOT_YET_PAUSE
        while True:
            if self.outage.down and not self._reachable():
                if self.stop.wait(READ_AGAIN):
                    raise StoppedWaiting("reading the positions back")
                continue
            try:
                found = read()
            except (KafkaUnavailable, DeliveryError) as exc:
                passing = isinstance(exc, KafkaUnavailable) and exc.passing
                if passing and time.monotonic() - started < PASSING_FOR:
                    # not counted: the broker answers, and says "a moment" (a leader is
                    # being elected); asked again after a pause that grows to READ_AGAIN
                    self._retrying(f"reading the positions back: {exc}; again")
                    if self.stop.wait(pause):
                        raise StoppedWaiting("reading the positions back") from None
                    pause = min(pause * 2, READ_AGAIN)
                    continue
                if self._reachable():
                    attempts += 1
                    if attempts >= READ_ATTEMPTS:
                        raise
                    log.warning(
                        "%s: reading the positions back failed (%s); again", self.topic, exc
                    )
                    continue
                self.outage.begin(f"reading the positions back: {self._why(started)}", started)
                continue
            self.outage.end()
            return found

    def _reachable(self) -> bool:
        # deferred: confluent_kafka
        from engine.kafka.clients import KafkaUnavailable, check_reachable

        try:
            check_reachable(self.kafka, timeout=PROBE_TIMEOUT)
        except KafkaUnavailable:
            return False
        return True

    def _why(self, since: float) -> str:
        """Why the broker does not answer: a connection error since ``since``, or none."""
        if self._reason is not None and self._reason[0] >= since:
            return self._reason[1]
        return f"no answer within {PROBE_TIMEOUT:g}s"

    def renewing(self, why: str) -> None:
        """Say that the producer is made again (a :class:`Wedged` transaction)."""
        self._retrying(f"the transaction cannot be finished ({why}); starting the producer again")

    def _retrying(self, text: str) -> None:
        self.board.set(last_error=text)
        self.board.emit("retrying", f"{self.topic}: {text}")

    def _report(self, kind: str, text: str) -> None:
        log.debug("%s", text)  # said through the loop's notes or events
        if kind == UNREACHABLE:
            self.troubles += 1
            self.board.set(last_error=text, unreachable_since=self.outage.since)
            if self._waiting is None:
                self._waiting = self.board.heartbeat.begin_wait(text)
        elif kind == BACK:
            self.board.set(last_error=None, unreachable_since=None)
            if self._waiting is not None:
                self.board.heartbeat.end_wait(self._waiting)
                self._waiting = None
        self.board.emit(kind, text)
