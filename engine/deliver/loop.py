"""The delivery loop: :class:`Delivery` delivers one topic of a staging pool to Kafka,
exactly once. It holds the output's settings and status, takes the topic's lock, waits
for the pool and its turn to start, then polls the pool's log; one run's producer,
envelope and positions (read back, judged by :mod:`~engine.deliver.ownership`) are a
:class:`~engine.deliver.delivery_run.DeliveryRun`.
:func:`engine.deliver.deliveries.deliver_outputs` runs several (:class:`DeliveryOutput`
each), the outputs of one staging pool sharing one
:class:`~engine.deliver.feed.StagingFeed`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.deliver.delivery_options import DeliveryOptions
from engine.deliver.delivery_run import DeliveryRun
from engine.deliver.envelopes import envelope_named
from engine.deliver.envelopes.base import Envelope
from engine.deliver.errors import DeliveryError
from engine.deliver.faults import StoppedWaiting
from engine.deliver.feed import StagingFeed
from engine.deliver.lock import topic_lock
from engine.deliver.output_producer import transactional_id
from engine.deliver.output_shaper import load_shaper
from engine.deliver.starting import await_first_output, open_staging_pool, start_turn
from engine.deliver.status_board import DeliveryEvent, DeliveryStatus, StatusBoard
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
        if self.format is Format.AVRO and registry is None:
            raise DeliveryError(
                "the avro format needs a Schema Registry: run `zync dev up` or configure "
                "one, or use --format json"
            )
        #: what the delivery is doing, for any thread (:meth:`status`) and its listener
        self.board = StatusBoard(
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
        #: the staging feed shared with the other outputs of the pool (None: its own)
        self.feed = feed
        self._woken = threading.Event()
        self._current: DeliveryRun | None = None  # the run under way, once it started

    def __repr__(self) -> str:
        source = self.pool_name if self.staged == self.topic else f"{self.pool_name}:{self.staged}"
        return f"Delivery({source!r} -> {self.topic!r}, {self.envelope.name}, {self.format.value})"

    @property
    def transactional_id(self) -> str:
        """Derived from the topic: a restarted delivery fences the previous one."""
        return transactional_id(self.topic)

    # -- public -------------------------------------------------------------------------

    def status(self) -> DeliveryStatus:
        return self.board.get()

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
        board = self.board
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
            if self._current is not None:
                self._current.close()
                self._current = None
        board.set(state="stopped")
        board.emit("stopped", f"{self.topic}: stopped after pool offset {board.delivered_text()}")
        return self.status()

    # -- the loop -----------------------------------------------------------------------

    def _run(self, stop: threading.Event, continuous: bool) -> None:
        pool = self._open_pool(stop, continuous)
        if pool is None:
            return
        if continuous and not await_first_output(
            pool, self.board, self.topic, self._woken, self.poll_interval, stop
        ):
            return
        with start_turn(self.start_gate, self.board, stop) as turn:
            if not turn:
                return
            self._current = current = DeliveryRun(self, pool, stop)
        feed = current.envelope.parts.reader.feed
        board = self.board
        woken = False
        while not stop.is_set():
            board.heartbeat.beat()
            # one look at the pool's log for every output of the pool (a recent one when
            # polling); this output's own snapshot catches up only when it moved
            recent = 0.0 if woken else self.poll_interval / 2
            read = current.read_version
            if read < 0 or feed.version(recent) != read:
                version = pool.refresh()
                if version != read:
                    current.deliver_to(version, stop)
                    continue
            if not continuous:
                break
            current.refresh()
            _caught_up(board, self.topic, current.read_version)
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
        return open_staging_pool(self.lake, self.pool_name, self.topic, self.board, stop, wait)


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


def heartbeat_of(delivery: Delivery) -> Heartbeat:
    """A delivery's heartbeat: its loop beats it, its waits for Kafka are deliberate."""
    return delivery.board.heartbeat
