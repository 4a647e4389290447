"""One run of a delivery (:class:`~engine.deliver.loop.Delivery`), from the moment its
turn to start comes: the output topic made ready (and the claims topic with it), the
transactional producer started, the envelope composed with the parts it works with and
the last delivered positions read back; then each staging version delivered, one
transaction at a time, and reported on the delivery's status board."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from engine.deliver.envelopes.base import Envelope, Parts
from engine.deliver.keeper import PositionKeeper
from engine.deliver.ledger import Ledger
from engine.deliver.output_shaper import Shaper
from engine.deliver.positions import PoolIdentity
from engine.deliver.record_types import RecordTypes
from engine.deliver.staging_reader import StagingReader
from engine.deliver.transactions import Transactions

if TYPE_CHECKING:
    from engine.deliver.loop import Delivery
    from engine.deliver.rows import Batch, Rows
    from engine.lake.pools import Pool


class DeliveryRun:
    """The state of one run: its producer (``out``), its envelope and the staging
    version read up to. Made when the run may start (it reaches Kafka and reads the
    positions back); :meth:`close` stops the producer."""

    def __init__(self, delivery: Delivery, pool: Pool, stop: threading.Event) -> None:
        self.delivery = delivery
        self.board = delivery.board
        partitions, created = _topic_ready(delivery)
        self.board.set(partitions=len(partitions))
        self.out = Transactions(delivery.kafka, delivery.topic, self.board, stop)
        self.out.start()
        source = "" if delivery.staged == delivery.topic else f"topic {delivery.staged!r} of "
        self.board.emit(
            "started",
            f"{delivery.topic}: topic {'created' if created else 'found'} with "
            f"{len(partitions)} partition(s); delivering {source}pool {delivery.pool_name!r} "
            f"({delivery.envelope.name} envelope, {delivery.format.value})",
        )
        self.envelope = self._compose(pool, partitions)
        #: the staging version read up to (-1: read the snapshot)
        self.read_version = -1
        self._recover()

    def close(self) -> None:
        self.out.close()

    def _compose(self, pool: Pool, partitions: list[int]) -> Envelope:
        """The envelope of this run, with the parts it works with; the producer's
        position keeper."""
        delivery = self.delivery
        reader = StagingReader(
            pool, delivery.staged, batch_records=delivery.batch_records, feed=delivery.feed
        )
        shaper = Shaper(delivery.shaper_sql, reader, delivery.options.spark)
        identity = PoolIdentity(str(pool.table.metadata().id), pool.name)
        self.out.keeper = PositionKeeper(
            delivery.kafka,
            delivery.topic,
            identity,
            take_over=delivery.take_over,
            staged_last=reader.last_offset,
            faults=self.out.faults,
            board=self.board,
        )
        parts = Parts(
            topic=delivery.topic,
            identity=identity,
            format=delivery.format,
            batch_records=delivery.batch_records,
            registry=delivery.registry,
            ledger=Ledger(partitions, counts_after=delivery.envelope.counts_after),
            reader=reader,
            shaper=shaper,
            types=RecordTypes(pool, delivery.staged, delivery.format, shaper),
            board=self.board,
        )
        return delivery.envelope(parts)

    def _recover(self) -> None:
        """Start from the last delivered positions, read back and judged; commit them
        at once when they are not what is committed (an upgrade, a take-over)."""
        keeper = self.out.keeper
        assert keeper is not None
        ledger = self.envelope.parts.ledger
        found = keeper.read_back(ledger.partitions)
        ledger.take(found)
        self.envelope.resume(found)
        delivered = ledger.highest()
        self.board.set(delivered_offset=delivered)
        where = "from the start" if delivered is None else f"after pool offset {delivered}"
        self.board.emit(
            "resumed",
            f"{self.delivery.topic}: delivering {where} (position read back from Kafka)",
        )
        if keeper.must_commit():
            self.out.commit_standing(ledger)

    def refresh(self) -> None:
        """Commit the position again when it was last committed long ago (an idle
        output), so that the broker never expires it."""
        ledger = self.envelope.parts.ledger
        if self.out.keeper is not None and self.out.keeper.refresh_due(bool(ledger.last)):
            self.out.commit_standing(ledger)

    def deliver_to(self, version: int, stop: threading.Event) -> None:
        """Deliver every record of the topic committed up to ``version``."""
        envelope = self.envelope
        envelope.check_types()

        def send(rows: Rows, batch: Batch, started: float) -> None:
            self._send(rows, batch, version, started)

        if envelope.deliver(self.read_version, version, stop, send):
            self.read_version = version
            self.board.set(version=version)

    def _send(self, rows: Rows, batch: Batch, version: int, started: float) -> None:
        """Produce ``batch`` (the messages of ``rows``) in a transaction and report."""
        out, envelope = self.out, self.envelope
        produced = out.transact(
            batch,
            envelope.parts.ledger,
            lambda b: envelope.write(b, out),
            through=rows.offsets[-1],
            stamp=envelope.stamp(rows),
        )
        elapsed = max(time.monotonic() - started, 1e-6)
        first, last = rows.offsets[0], rows.offsets[-1]
        board = self.board
        status = board.get()
        delivered = status.delivered_offset
        board.set(
            delivered_offset=last if delivered is None else max(last, delivered),
            records_delivered=status.records_delivered + produced,
            bytes_delivered=status.bytes_delivered + batch.value_bytes(),
            last_produce_time=time.time() if produced else status.last_produce_time,
            rate=len(rows) / elapsed,
            last_error=None,
        )
        board.emit(
            "delivered",
            f"{self.delivery.topic}: delivered pool offsets {first}..{last} as {produced} "
            f"message(s) (staging version {version}, {len(rows) / elapsed:,.0f} records/s)",
            records=produced,
            first_offset=first,
            last_offset=last,
            version=version,
        )


def _topic_ready(delivery: Delivery) -> tuple[list[int], bool]:
    """The delivery's topic's partitions and whether it was created: as it was made
    ready with the other outputs' (:func:`~engine.deliver.deliveries.prepare_topics`),
    else created here when missing, and the claims topic with it."""
    from engine.deliver.claims import ensure_with_claims
    from engine.kafka.clients import TopicSpec  # deferred: confluent_kafka

    prepared, delivery.prepared = delivery.prepared, None
    if prepared is not None:
        return prepared
    spec = TopicSpec(delivery.partitions_wanted, delivery.replication)
    return ensure_with_claims(delivery.kafka, {delivery.topic: spec})[delivery.topic]
