"""The delivery loop: :class:`Delivery` delivers one topic of a staging pool to Kafka,
exactly once, composing the lock, the positions read back (the claim, the committed
position and the tail, judged by :mod:`~engine.deliver.ownership`), the staging reader,
the envelope and the transactional producer (with its waits for an unreachable broker,
:mod:`~engine.deliver.faults`); :func:`engine.deliver.deliveries.deliver_outputs` runs several (:class:`DeliveryOutput`
each), the outputs of one staging pool sharing one
:class:`~engine.deliver.feed.StagingFeed`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.deliver.delivery_options import DeliveryOptions
from engine.deliver.envelopes import envelope_named
from engine.deliver.envelopes.base import Envelope, Parts
from engine.deliver.errors import DeliveryError
from engine.deliver.faults import StoppedWaiting
from engine.deliver.feed import StagingFeed
from engine.deliver.keeper import PositionKeeper
from engine.deliver.ledger import Ledger
from engine.deliver.lock import topic_lock
from engine.deliver.output_shaper import Shaper, load_shaper
from engine.deliver.positions import PoolIdentity
from engine.deliver.record_types import RecordTypes
from engine.deliver.rows import Batch, Rows
from engine.deliver.staging_reader import StagingReader
from engine.deliver.starting import await_first_output, open_staging_pool, start_turn
from engine.deliver.status_board import DeliveryEvent, DeliveryStatus, StatusBoard
from engine.deliver.transactions import Transactions, transactional_id
from engine.errors import ZyncError
from engine.heartbeat import Heartbeat
from engine.kafka.codecs.formats import Format
from engine.kafka.envelope_names import DEFAULT

if TYPE_CHECKING:

    from engine.lake.pools import Lake, Pool



@dataclass(frozen=True)
class DeliveryOutput:
    """One output to deliver: the staged records of ``staged`` (default: ``topic``) in
    ``pool``, to the Kafka topic ``topic``, in ``envelope`` (None: the default, or the
    envelope the caller gives every output)."""

    pool: str
    topic: str
    envelope: str | None = None
    staged: str | None = None


class Delivery:
    """Delivers one topic of a staging pool to Kafka, exactly once.

    ``run()`` delivers what is staged and returns; with ``continuous=True`` it keeps
    polling the pool's Delta log (every ``poll_interval`` seconds) until ``stop`` is
    set, then finishes the transaction in flight and returns. ``status()`` may be
    called from any thread.

    ``staged``: the staging topic whose records go to ``topic`` (default: ``topic``).
    ``take_over``: deliver even when the topic's tail was written by another staging
    pool (:mod:`engine.deliver.ownership`). ``feed``: the staging feed this delivery
    shares with the other outputs of its pool (:mod:`engine.deliver.feed`; default: one
    of its own).
    """

    def __init__(
        self,
        lake: Lake,
        pool: str,
        topic: str,
        options: DeliveryOptions,
        *,
        envelope: str = DEFAULT,
        staged: str | None = None,
        feed: StagingFeed | None = None,
    ) -> None:
        self.lake = lake
        self.pool_name = pool
        self.topic = topic
        self.staged = staged or topic
        self.options = options
        self.take_over = options.take_over
        self.kafka = options.kafka
        self.registry = registry = options.registry
        format = options.format  # noqa: A001 - the option's name
        try:
            self.format = Format.parse(format) if isinstance(format, str) else format
            self.envelope: type[Envelope] = envelope_named(envelope)
            self.envelope.check_format(self.format)
        except ValueError as exc:
            raise DeliveryError(str(exc)) from None
        self.shaper_sql = load_shaper(options.shaper)
        self.partitions_wanted = options.partitions
        self.replication = options.replication
        self.poll_interval = options.poll_interval
        self.batch_records = options.batch_records
        self.wait_for_pool = options.wait_for_pool
        self._spark_factory = options.spark
        if self.format is Format.AVRO and registry is None:
            raise DeliveryError(
                "the avro format needs a Schema Registry: run `zync dev up` or configure "
                "one, or use --format json"
            )
        self._board = StatusBoard(
            DeliveryStatus(
                topic=topic, pool=pool, envelope=self.envelope.name, format=self.format.value
            )
        )
        #: set once the run holds the topic's lock, or has ended
        self.claimed = threading.Event()
        #: the topic's partitions and whether it was created, when they were made
        #: ready with other outputs' (and the claims topic with them); taken by a run
        self.prepared: tuple[list[int], bool] | None = None
        #: shared by the deliveries of one process, when given: bounds how many start
        #: (reach Kafka, read their position back) at once
        self.start_gate: threading.Semaphore | None = None
        self._woken = threading.Event()
        # the state of a run
        self._out: Transactions | None = None
        self._read_version = -1  # staging version read up to (-1: read the snapshot)
        self._feed = feed

    def __repr__(self) -> str:
        source = self.pool_name if self.staged == self.topic else f"{self.pool_name}:{self.staged}"
        return f"Delivery({source!r} -> {self.topic!r}, {self.envelope.name}, {self.format.value})"

    @property
    def transactional_id(self) -> str:
        """Derived from the topic: a restarted delivery fences the previous one."""
        return transactional_id(self.topic)

    # -- public -------------------------------------------------------------------------

    def status(self) -> DeliveryStatus:
        return self._board.get()

    def run(
        self,
        stop: threading.Event | None = None,
        on_event: Callable[[DeliveryEvent], None] | None = None,
        *,
        continuous: bool = False,
    ) -> DeliveryStatus:
        """Deliver what is staged (and, when ``continuous``, what gets staged until
        ``stop`` is set); returns the final status. Raises :class:`DeliveryError`."""
        stop = stop or threading.Event()
        board = self._board
        board.on_event = on_event
        try:
            with topic_lock(self.kafka, self.topic, f"pool {self.pool_name}"):
                self.claimed.set()
                self._run(stop, continuous)
        except StoppedWaiting as exc:
            board.set(state="stopped")
            board.emit(
                "stopped",
                f"{self.topic}: stopped while waiting for Kafka ({exc}); delivered up to "
                f"pool offset {board.delivered_text()}, the rest goes on the next start",
            )
            return self.status()
        except Exception as exc:
            text = str(exc) if isinstance(exc, ZyncError) else f"{type(exc).__name__}: {exc}"
            board.set(state="failed", last_error=text)
            board.emit("failed", f"{self.topic}: {text}")
            raise
        finally:
            self.claimed.set()
            if self._out is not None:
                self._out.close()
                self._out = None
        board.set(state="stopped")
        board.emit("stopped", f"{self.topic}: stopped after pool offset {board.delivered_text()}")
        return self.status()

    # -- the loop -----------------------------------------------------------------------

    def _run(self, stop: threading.Event, continuous: bool) -> None:
        pool = self._open_pool(stop, continuous)
        if pool is None:
            return
        if continuous and not await_first_output(
            pool, self._board, self.topic, self._woken, self.poll_interval, stop
        ):
            return
        with start_turn(self.start_gate, self._board, stop) as turn:
            if not turn:
                return
            partitions = self._open_kafka(stop)
            envelope = self._compose(pool, partitions)
            self._recover(envelope)
        feed = envelope.parts.reader.feed
        board = self._board
        woken = False
        while not stop.is_set():
            board.heartbeat.beat()
            # one look at the pool's log for every output of the pool (a recent one when
            # polling); this output's own snapshot catches up only when it moved
            recent = 0.0 if woken else self.poll_interval / 2
            if self._read_version < 0 or feed.version(recent) != self._read_version:
                version = pool.refresh()
                if version != self._read_version:
                    self._deliver_to(envelope, version, stop)
                    continue
            if not continuous:
                break
            self._refresh(envelope)
            _caught_up(board, self.topic, self._read_version)
            woken = self._pause()

    def wake(self) -> None:
        """The staging pool may have a new commit, or the run should stop: look now
        instead of at the next poll."""
        self._woken.set()

    def _pause(self) -> bool:
        """Until the next poll of the pool, or a :meth:`wake` (a commit of this
        process's ETL, or stop): True when woken."""
        woken = self._woken.wait(self.poll_interval)
        self._woken.clear()
        return woken

    def _open_pool(self, stop: threading.Event, continuous: bool) -> Pool | None:
        wait = continuous and self.wait_for_pool
        return open_staging_pool(self.lake, self.pool_name, self.topic, self._board, stop, wait)

    def _open_kafka(self, stop: threading.Event) -> list[int]:
        """The topic's partitions (the topic created if missing), with the transactional
        producer started (``stop`` ends its waits for an unreachable broker)."""
        partitions, created = _topic_ready(self)
        self._board.set(partitions=len(partitions))
        self._out = Transactions(self.kafka, self.topic, self._board, stop)
        self._out.start()
        source = "" if self.staged == self.topic else f"topic {self.staged!r} of "
        self._board.emit(
            "started",
            f"{self.topic}: topic {'created' if created else 'found'} with {len(partitions)} "
            f"partition(s); delivering {source}pool {self.pool_name!r} "
            f"({self.envelope.name} envelope, {self.format.value})",
        )
        return partitions

    def _compose(self, pool: Pool, partitions: list[int]) -> Envelope:
        """The envelope of this run, with the parts it works with; the producer's
        position keeper."""
        reader = StagingReader(pool, self.staged, batch_records=self.batch_records, feed=self._feed)
        shaper = Shaper(self.shaper_sql, reader, self._spark_factory)
        identity = PoolIdentity(str(pool.table.metadata().id), pool.name)
        assert self._out is not None
        self._out.keeper = PositionKeeper(
            self.kafka,
            self.topic,
            identity,
            take_over=self.take_over,
            staged_last=reader.last_offset,
            faults=self._out.faults,
            board=self._board,
        )
        parts = Parts(
            topic=self.topic,
            identity=identity,
            format=self.format,
            batch_records=self.batch_records,
            registry=self.registry,
            ledger=Ledger(partitions, counts_after=self.envelope.counts_after),
            reader=reader,
            shaper=shaper,
            types=RecordTypes(pool, self.staged, self.format, shaper),
            board=self._board,
        )
        return self.envelope(parts)

    def _recover(self, envelope: Envelope) -> None:
        """Start from the last delivered positions, read back and judged; commit them
        at once when they are not what is committed (an upgrade, a take-over)."""
        assert self._out is not None
        keeper = self._out.keeper
        assert keeper is not None
        ledger = envelope.parts.ledger
        found = keeper.read_back(ledger.partitions)
        ledger.take(found)
        envelope.resume(found)
        self._read_version = -1
        delivered = ledger.highest()
        self._board.set(delivered_offset=delivered)
        where = "from the start" if delivered is None else f"after pool offset {delivered}"
        self._board.emit(
            "resumed", f"{self.topic}: delivering {where} (position read back from Kafka)"
        )
        if keeper.must_commit():
            self._out.commit_standing(ledger)

    def _refresh(self, envelope: Envelope) -> None:
        """Commit the position again when it was last committed long ago (an idle
        output), so that the broker never expires it."""
        assert self._out is not None
        ledger = envelope.parts.ledger
        if self._out.keeper is not None and self._out.keeper.refresh_due(bool(ledger.last)):
            self._out.commit_standing(ledger)

    def _deliver_to(self, envelope: Envelope, version: int, stop: threading.Event) -> None:
        """Deliver every record of the topic committed up to ``version``."""
        envelope.check_types()

        def send(rows: Rows, batch: Batch, started: float) -> None:
            self._send(envelope, rows, batch, version, started)

        if envelope.deliver(self._read_version, version, stop, send):
            self._read_version = version
            self._board.set(version=version)

    def _send(
        self, envelope: Envelope, rows: Rows, batch: Batch, version: int, started: float
    ) -> None:
        """Produce ``batch`` (the messages of ``rows``) in a transaction and report."""
        assert self._out is not None
        out = self._out
        produced = out.transact(
            batch,
            envelope.parts.ledger,
            lambda b: envelope.write(b, out),
            through=rows.offsets[-1],
            stamp=envelope.stamp(rows),
        )
        elapsed = max(time.monotonic() - started, 1e-6)
        last = rows.offsets[-1]
        status = self.status()
        delivered = status.delivered_offset
        self._board.set(
            delivered_offset=last if delivered is None else max(last, delivered),
            records_delivered=status.records_delivered + produced,
            bytes_delivered=status.bytes_delivered + batch.value_bytes(),
            last_produce_time=time.time() if produced else status.last_produce_time,
            rate=len(rows) / elapsed,
            last_error=None,
        )
        self._board.emit(
            "delivered",
            f"{self.topic}: delivered pool offsets {rows.offsets[0]}..{last} as "
            f"{produced} message(s) (staging version {version}, {len(rows) / elapsed:,.0f} records/s)",
            records=produced,
            first_offset=rows.offsets[0],
            last_offset=last,
            version=version,
        )


def _caught_up(board: StatusBoard, topic: str, version: int) -> None:
    """Nothing left to deliver up to staging ``version`` (said once, going idle)."""
    if board.get().state != "idle":
        board.set(state="idle")
        board.emit(
            "caught-up",
            f"{topic}: caught up after pool offset {board.delivered_text()} (staging "
            f"version {version})",
            version=version,
        )


def _topic_ready(delivery: Delivery) -> tuple[list[int], bool]:
    """The delivery's topic's partitions and whether it was created: as it was made
    ready with the other outputs' (:func:`~engine.deliver.deliveries.prepare_topics`),
    else created here when missing, and the claims topic with it."""
    # deferred: confluent_kafka
    from engine.deliver.claims import CLAIMS_TOPIC, claims_refused, claims_spec
    from engine.kafka.clients import TopicRefused, TopicSpec, ensure_topics

    prepared, delivery.prepared = delivery.prepared, None
    if prepared is not None:
        return prepared
    wanted = {
        delivery.topic: TopicSpec(delivery.partitions_wanted, delivery.replication),
        CLAIMS_TOPIC: claims_spec(),
    }
    try:  # one look at the cluster for both
        return ensure_topics(delivery.kafka, wanted)[delivery.topic]
    except TopicRefused as exc:
        if exc.topic == CLAIMS_TOPIC:
            raise claims_refused(exc) from None
        raise


def heartbeat_of(delivery: Delivery) -> Heartbeat:
    """A delivery's heartbeat: its loop beats it, its waits for Kafka are deliberate."""
    return delivery._board.heartbeat
