"""Transactional producing: one Kafka transaction per batch, retried after a failure.

Records are produced in Kafka transactions by a transactional producer whose
``transactional.id`` is derived from the topic
(:mod:`~engine.deliver.output_producer`), so a restarted process fences the zombie of a
killed one (its open transaction is aborted before anything is read back), and a second
to-kafka on another host is fenced by Kafka. Each transaction also commits where
delivery stands, for every partition (:mod:`~engine.deliver.committed`), and, until the
claim on the topic names this pool and this topic id, the claim
(:mod:`~engine.deliver.claims`): the records, the position and the claim are committed
together or not at all. A transaction that fails is aborted (or, when the broker gave it
up during an outage, the producer is made again), the positions are read back and only
what is still missing is produced again; what is transient and what is fatal, and the
waits for an unreachable broker, are :mod:`engine.deliver.faults`'.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING

from engine.deliver.errors import DeliveryError
from engine.deliver.faults import RENEW, STEP, Faults, Wedged
from engine.deliver.output_producer import TXN_TIMEOUT, OutputProducer, transactional_id

if TYPE_CHECKING:
    from confluent_kafka import KafkaException, Producer

    from engine.deliver.keeper import PositionKeeper, Stamp
    from engine.deliver.ledger import Ledger
    from engine.deliver.positions import Headers
    from engine.deliver.rows import Batch
    from engine.deliver.status_board import StatusBoard
    from engine.settings.kafka import KafkaProfile

#: Failed transactions in a row (outages aside) before the delivery gives up.
MAX_FAILURES = 5


class Transactions:
    """The topic's transactional producer. :meth:`start` fences the previous incarnation;
    :meth:`transact` produces one batch in one transaction (the envelope's ``write``
    produces its messages, through :meth:`send` or :attr:`producer`) and commits with it
    what :attr:`keeper` says (the position, the claim); :meth:`commit_standing` commits
    them alone. ``stop`` ends the waits for an unreachable broker; after a failed
    transaction the keeper reads the positions back (waiting for the broker, judged by
    :mod:`~engine.deliver.ownership`)."""

    def __init__(
        self,
        kafka: KafkaProfile,
        topic: str,
        board: StatusBoard,
        stop: threading.Event | None = None,
    ) -> None:
        self.kafka = kafka
        self.topic = topic
        self.board = board
        self.faults = Faults(
            kafka, topic, transactional_id(topic), board, stop or threading.Event()
        )
        #: where delivery stands and what each transaction commits (set once composed)
        self.keeper: PositionKeeper | None = None
        self.output = OutputProducer(kafka, topic, self.faults)

    @property
    def producer(self) -> Producer:
        return self.output.client

    def start(self) -> None:
        self.output.start()

    def transact(
        self,
        batch: Batch,
        ledger: Ledger,
        write: Callable[[Batch], None],
        through: int | None = None,
        stamp: Stamp = (None, None),
    ) -> int:
        """Produce ``batch`` in one transaction (``write`` produces its messages) and
        commit with it that every record up to pool offset ``through`` is delivered
        (``stamp``: the time it closes); the number of messages produced. After a
        failure: recover (see :mod:`engine.deliver.faults`), read the positions back,
        produce what is still missing."""
        from confluent_kafka import KafkaException  # deferred: librdkafka

        failures = 0
        while len(batch):
            troubles = self.faults.troubles
            try:
                self._produce(batch, ledger, write, through, stamp)
            except (KafkaException, Wedged) as exc:
                failures = self._failed(exc, troubles, failures)
                ledger.take(self._keeper().read_back(ledger.partitions))
                batch = ledger.unclaimed(batch)
                continue
            ledger.note(batch, through)
            return len(batch)
        return 0

    def commit_standing(self, ledger: Ledger) -> None:
        """Commit the ledger's positions (and the claim) in a transaction of their own:
        on start when they are not what is committed (an upgrade, a take-over), and
        when the position was last committed long ago (an idle output)."""
        from confluent_kafka import KafkaException  # deferred: librdkafka

        failures = 0
        while True:
            troubles = self.faults.troubles
            try:
                self._produce(None, ledger, None, None, None)
                return
            except (KafkaException, Wedged) as exc:
                failures = self._failed(exc, troubles, failures)

    def _failed(self, exc: KafkaException | Wedged, troubles: int, failures: int) -> int:
        """Recover from a failed transaction; the failures so far (outages aside)."""
        faults = self.faults
        if isinstance(exc, Wedged):
            faults.renewing(str(exc))
            how = RENEW
        else:
            how = faults.recovery(exc.args[0], troubles)
        if faults.troubles == troubles and not faults.outage.down:
            failures += 1  # outages and lost connections aside
        if failures >= MAX_FAILURES:
            raise DeliveryError(
                f"topic {self.topic!r}: gave up after {MAX_FAILURES} failed transactions"
            ) from None
        self.output.recover(how)
        return failures

    def _produce(
        self,
        batch: Batch | None,
        ledger: Ledger,
        write: Callable[[Batch], None] | None,
        through: int | None,
        stamp: Stamp | None,
    ) -> None:
        """One transaction: the messages of ``batch`` (None: none), the claim until it
        names this pool, and the position of every partition once it is committed."""
        producer, keeper = self.producer, self._keeper()
        troubles = self.faults.troubles
        keeper.begin()
        paused = gc.isenabled()
        gc.disable()  # a million short-lived dicts, no cycles: the collector only costs
        try:
            producer.begin_transaction()
            if batch is not None and write is not None:
                write(batch)
            claim = keeper.claim()
            if claim is not None:
                self.output.send_to(*claim, partition=0)
        finally:
            if paused:
                gc.enable()
        waited = time.monotonic()
        while producer.flush(STEP) > 0:  # the delivery reports: our last records' offsets
            self.faults.check(producer, "producing", waited)
        if self.faults.troubles != troubles:
            raise Wedged("an outage or a lost connection")  # librdkafka#5511: see faults
        offsets = keeper.offsets(ledger.standing(batch, through), ledger.after, stamp)
        metadata = keeper.group_metadata()
        self.faults.watch(
            producer,
            lambda: producer.send_offsets_to_transaction(offsets, metadata, TXN_TIMEOUT),
            "committing the position",
        )
        self.faults.wait(producer, producer.commit_transaction, "committing a transaction")
        keeper.committed_(stamp)

    def _keeper(self) -> PositionKeeper:
        assert self.keeper is not None
        return self.keeper

    def send(
        self, value: bytes | None, key: bytes | None, partition: int, headers: Headers | None
    ) -> None:
        """Produce one message of the topic (its offset is noted when it is delivered),
        waiting for room in the local queue if need be."""
        noted = self.keeper.delivered if self.keeper is not None else None
        self.output.send_to(
            self.topic, key, value, partition=partition, headers=headers, on_delivery=noted
        )

    def close(self) -> None:
        self.output.close()
        if self.keeper is not None:
            with suppress(Exception):
                self.keeper.close()
