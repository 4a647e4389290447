"""The from-kafka loop, :class:`Ingest`: checks its inputs, opens the pools, and composes
per run the parts of :mod:`engine.ingest` — the consumer thread
(:mod:`~engine.ingest.consume_loop`), the decoder and writer threads
(:mod:`~engine.ingest.stages`), the partitions' positions and assignment, the group
mirrors, the waits for Kafka and the Schema Registry (:mod:`~engine.ingest.faults`) — and
the service API (start, stop, join, status) ``zync run`` and the console
use. The inputs and their pools are :mod:`~engine.ingest.input_pools`."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from engine.heartbeat import Heartbeat
from engine.ingest.allocators import keep_freed_pages
from engine.ingest.assignment import Assignment
from engine.ingest.consume_loop import ConsumeLoop
from engine.ingest.decode import RegistryLookup
from engine.ingest.faults import KafkaWatch, RegistryWait
from engine.ingest.gc_pause import GcPause
from engine.ingest.input_pools import InputPools
from engine.ingest.options import IngestInput, IngestOptions
from engine.ingest.positions import Positions
from engine.ingest.prepare import Preparer
from engine.ingest.stages import Stages
from engine.ingest.state import LoopState, NoteListener
from engine.ingest.write import Writer
from engine.lake.batch_shaper import Shaper
from engine.settings.spark import load_spark_settings

if TYPE_CHECKING:
    from confluent_kafka import Consumer
    from pyspark.sql import SparkSession

    from engine.ingest.stats import CommitInfo, IngestStats
    from engine.lake.pools import Lake
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile


class Ingest:
    """from-kafka for a set of topic → pool inputs (see :mod:`engine.ingest`).

    ``registry``: a :class:`RegistryProfile` for Avro topics (``None``: loaded from the
    zync home when the first Avro record shows up). ``spark``: a SparkSession or a
    factory of one, needed only with a shaper.

    Use :meth:`run` (blocking) or :meth:`start`/:meth:`stop`/:meth:`status`/:meth:`join`
    (a service in a background thread, as ``zync run`` and the console do).
    """

    name = "from-kafka"

    def __init__(
        self,
        inputs: Iterable[IngestInput],
        *,
        lake: Lake,
        kafka: KafkaProfile,
        registry: RegistryProfile | None = None,
        options: IngestOptions | None = None,
        spark: SparkSession | Callable[[], SparkSession] | None = None,
        heartbeat: Heartbeat | None = None,
    ) -> None:
        self.lake = lake
        self.kafka = kafka
        self.options = options or IngestOptions()
        self._lookup = RegistryLookup(registry)
        #: each input topic's raw pool, its route and decoders
        self.input_pools = InputPools(inputs, lake, self.options, self._lookup)
        self.inputs = self.input_pools.inputs
        self._spark = spark
        self._shaper: Shaper | None = None
        if self.options.shaper is not None:
            self._shaper = Shaper(self.options.shaper, source=self.options.shaper_source)
        self._shared = LoopState()
        if heartbeat is not None:  # a service's: its liveness (engine.heartbeat)
            self._shared.heartbeat = heartbeat
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- service API --------------------------------------------------------------------

    def start(
        self,
        on_commit: Callable[[CommitInfo], None] | None = None,
        on_note: NoteListener | None = None,
    ) -> None:
        """Run in a background thread; :meth:`status` tells how it goes."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop = threading.Event()

        def target() -> None:
            with contextlib.suppress(BaseException):  # kept in the status
                self.run(self._stop, on_commit=on_commit, on_note=on_note)

        self._shared.set_state("starting")
        self._thread = threading.Thread(target=target, name="zync-from-kafka", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Ask the loop to commit what it holds and stop; waits up to ``timeout``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._shared.state in ("starting", "running", "stopping")

    def status(self) -> IngestStats:
        """A consistent snapshot of the loop (cheap; safe from any thread)."""
        return self._shared.snapshot()

    stats = status

    # -- the loop -----------------------------------------------------------------------

    def run(
        self,
        stop: threading.Event | None = None,
        on_commit: Callable[[CommitInfo], None] | None = None,
        on_note: NoteListener | None = None,
    ) -> IngestStats:
        """Ingest until ``stop`` is set, ``exit_after`` seconds pass without a record, or
        something fails (raised: :class:`IngestError`, :class:`BadRecord`,
        ``KafkaUnavailable``, ...). A stop commits what was consumed first. Kafka or the
        Schema Registry out of reach is waited for (:mod:`engine.ingest.faults`).

        ``on_commit`` is called from the committer thread after each commit; ``on_note``
        hears the notes the loop makes, with their kind (``unreachable`` and ``back``
        begin and end an outage, ``note`` is the rest), from any of its threads.
        """
        keep_freed_pages()  # polars is imported later, for the first batch
        stop = stop or threading.Event()
        shared = self._shared
        shared.begin()
        shared.listener = on_note
        grouped = self.options.workers_group is not None
        gc = GcPause(self.options.pause_gc)
        client: Consumer | None = None
        assignment: Assignment | None = None
        stages: Stages | None = None
        graceful = False
        try:
            self.input_pools.open(shared)
            if self._shaper is not None:
                self._shaper.check_syntax(self._get_spark())
            positions = Positions(shared, grouped)
            preparer = Preparer(
                shared,
                self.options,
                self.input_pools.decoders,
                self._shaper,
                self._get_spark,
                registry=self._lookup,
            )
            registry = RegistryWait(shared, stop, preparer.prepare)
            writer = Writer(shared, positions, self.kafka, gc, on_commit)
            stages = Stages(shared, registry.prepare, writer.write, warm=preparer.warm)
            watch = KafkaWatch(self.kafka, shared, self.inputs[0].topic)
            consume = ConsumeLoop(
                self.options, shared, positions, stages, gc, self.input_pools.route, watch
            )
            assignment = Assignment(
                self.inputs,
                kafka=self.kafka,
                options=self.options,
                shared=shared,
                positions=positions,
                route=self.input_pools.route,
                drop=consume.buffers.drop,
                error_cb=watch.error_cb,
            )
            client = assignment.connect()
            stages.start()
            shared.set_state("running")
            # batches are millions of short-lived objects: collect between commits
            gc.pause()
            graceful = consume.run(client, assignment, stop)
        except BaseException as exc:  # noqa: BLE001 - raised below, after the clean-up
            shared.fail(exc)
        finally:
            shared.set_state("stopping", when="running")
            if stages is not None and stages.started:
                stages.finish(graceful)
            gc.resume()
            if client is not None and assignment is not None:
                if grouped and graceful:
                    assignment.flush_mirror(client, final=True)
                with contextlib.suppress(Exception):
                    client.close()  # a workers group: leaves it (the others rebalance)
            for mirror in set(shared.mirrors.values()):
                mirror.close()
            shared.end()
            shared.listener = None
        if shared.error is not None:
            raise shared.error
        return self.status()

    def _get_spark(self) -> SparkSession:
        spark = self._spark
        if spark is None:
            # deferred: engine.spark brings the JVM set-up's modules, which from-kafka
            # without a shaper (the usual one) never needs
            from engine.spark import get_spark

            spark = get_spark(load_spark_settings())
        elif callable(spark) and not hasattr(spark, "sql"):
            spark = spark()
        self._spark = spark
        return spark  # type: ignore[return-value]
