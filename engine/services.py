"""Long-running loops with start / stop / status, for `zync run` and the console.

Three services make a pipeline out of one ETL configuration (:class:`Pipeline`):

* :class:`FromKafkaService` — :class:`engine.ingest.loop.Ingest` over the configuration's
  ``inputs`` (Kafka topics → raw pools);
* :class:`EtlService` — an :class:`engine.etl.EtlRunner` pass whenever a raw pool gets a
  new commit, at most every ``etl_interval`` seconds (raw → staging);
* :class:`ToKafkaService` — one continuous :class:`engine.deliver.loop.Delivery` per output
  topic (staging → Kafka).

Every service runs in its own thread (:meth:`Service.start`), stops cleanly
(:meth:`Service.stop` lets the loop finish the commit or transaction in flight) and
answers :meth:`Service.status` from any thread with a :class:`ServiceStatus` snapshot:
``state`` (``stopped``, ``starting``, ``running``, ``stopping``, ``failed``), the last
commit, a recent rate, the last error, and ``detail``, the wrapped loop's own snapshot
(:class:`engine.ingest.stats.IngestStats`, the last :class:`engine.etl.PassResult`, a
tuple of :class:`engine.deliver.status.DeliveryStatus`).

Listeners (``on_event``) receive a :class:`ServiceEvent` per thing that happened — a
commit, a pass, a delivery, an error — whose ``message`` is one line of words: `zync run`
prints them, the console shows them. Listeners are called from the services' threads.

Nothing here prints, and nothing happens at import time.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import ZyncError, one_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.deliver.loop import Delivery, Output
    from engine.deliver.status import DeliveryEvent, DeliveryStatus
    from engine.etl.config import EtlConfig
    from engine.etl.result import PassResult
    from engine.etl.run import EtlRunner
    from engine.ingest.loop import Ingest
    from engine.ingest.options import IngestOptions
    from engine.lake.pools import Lake
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile

STOPPED = "stopped"
STARTING = "starting"
RUNNING = "running"
STOPPING = "stopping"
FAILED = "failed"

#: Seconds over which a service's rate is averaged.
RATE_WINDOW = 10.0
#: Default seconds between two ETL passes (at most one pass per interval).
ETL_INTERVAL = 1.0


class ServiceError(ZyncError):
    """A service cannot be built or started; the message says why."""


@dataclass(frozen=True)
class Commit:
    """A service's last commit: a Delta version (from-kafka, ETL) or a Kafka transaction
    (to-kafka, ``version`` = the staging version delivered)."""

    version: int | None
    at: float
    records: int
    where: str = ""


@dataclass(frozen=True)
class ServiceEvent:
    """Something a service did; ``message`` is one line for a status display."""

    service: str
    kind: str  # started | stopped | failed | commit | pass | delivered | waiting | error |
    # unreachable | back (an outage of Kafka or the Schema Registry began, ended) | ...
    message: str
    at: float

    def line(self) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(self.at))
        return f"{stamp} {self.service:<10} {self.message}"


@dataclass(frozen=True)
class ServiceStatus:
    """A snapshot of one service."""

    name: str
    state: str
    started_at: float | None = None
    last_commit: Commit | None = None
    commits: int = 0
    records: int = 0
    rate: float = 0.0
    last_error: str | None = None
    detail: Any = None

    @property
    def running(self) -> bool:
        return self.state in (STARTING, RUNNING, STOPPING)


def _spark_factory(spark: Any) -> Callable[[], SparkSession]:
    """A callable giving the process's SparkSession from a session, a factory or None."""
    if spark is None:

        def default() -> SparkSession:
            from engine.settings.spark import load_spark_settings
            from engine.spark import get_spark

            return get_spark(load_spark_settings())

        return default
    if callable(spark) and not hasattr(spark, "sql"):
        return spark  # type: ignore[no-any-return]
    return lambda: spark  # type: ignore[no-any-return]


class Service:
    """A loop in a thread. Subclasses implement :meth:`_run` (return when ``stop`` is
    set, after finishing the work in flight) and report with :meth:`_committed` and
    :meth:`_event`."""

    name = "service"

    def __init__(self, *, on_event: Callable[[ServiceEvent], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._state = STOPPED
        self._started_at: float | None = None
        self._last_commit: Commit | None = None
        self._commits = 0
        self._records = 0
        self._recent: deque[tuple[float, int]] = deque()
        self._error: str | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._listeners: list[Callable[[ServiceEvent], None]] = [on_event] if on_event else []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._state})"

    # -- control ------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[ServiceEvent], None]) -> None:
        self._listeners.append(listener)

    def start(self) -> None:
        """Start the loop in a thread (nothing happens when it already runs)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop = threading.Event()
            self._state = STARTING
            self._error = None
            self._started_at = time.time()
            self._thread = threading.Thread(
                target=self._main, name=f"zync-{self.name}", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float | None = 120.0) -> None:
        """Ask the loop to finish what it is doing and stop; waits up to ``timeout``."""
        with self._lock:
            thread = self._thread
            if thread is not None and thread.is_alive() and self._state != FAILED:
                self._state = STOPPING
        self._stop.set()
        self._wake()
        if thread is not None:
            thread.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def status(self) -> ServiceStatus:
        now = time.time()
        with self._lock:
            while self._recent and self._recent[0][0] < now - RATE_WINDOW:
                self._recent.popleft()
            recent = sum(n for _, n in self._recent)
            state = self._state
            if (
                state in (RUNNING, STARTING, STOPPING)
                and not self.running
                and self._thread is not None
            ):
                state = STOPPED
            return ServiceStatus(
                name=self.name,
                state=state,
                started_at=self._started_at,
                last_commit=self._last_commit,
                commits=self._commits,
                records=self._records,
                rate=recent / RATE_WINDOW,
                last_error=self._error,
                detail=self._detail(),
            )

    # -- for subclasses -----------------------------------------------------------------

    def _run(self, stop: threading.Event) -> None:
        raise NotImplementedError

    def _detail(self) -> Any:
        return None

    def _wake(self) -> None:
        """Called by :meth:`stop`: interrupt a wait of the loop."""

    def _running(self) -> None:
        with self._lock:
            if self._state == STARTING:
                self._state = RUNNING

    def _committed(self, version: int | None, records: int, where: str = "") -> None:
        now = time.time()
        with self._lock:
            self._last_commit = Commit(version, now, records, where)
            self._commits += 1
            self._records += records
            self._recent.append((now, records))

    def _failed_softly(self, message: str | None) -> None:
        """Record (or clear, with None) an error the loop survives."""
        with self._lock:
            self._error = message

    def _event(self, kind: str, message: str) -> None:
        event = ServiceEvent(self.name, kind, message, time.time())
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):  # a listener never stops a loop
                listener(event)

    def _main(self) -> None:
        self._event("started", "started")
        try:
            self._run(self._stop)
        except BaseException as exc:  # noqa: BLE001 - kept in the status
            message = one_line(exc, typed=True)
            with self._lock:
                self._state = FAILED
                self._error = message
            self._event("failed", f"failed: {message}")
            return
        with self._lock:
            self._state = STOPPED
        self._event("stopped", "stopped")


# ----------------------------------------------------------------------------- from-kafka


class FromKafkaService(Service):
    """from-kafka over ``inputs`` ((topic, pool) pairs); waits for missing topics."""

    name = "from-kafka"

    def __init__(
        self,
        inputs: Iterable[tuple[str, str]],
        lake: Lake,
        *,
        kafka: KafkaProfile,
        registry: RegistryProfile | None = None,
        options: IngestOptions | None = None,
        spark: Any = None,
        on_event: Callable[[ServiceEvent], None] | None = None,
        on_commit: Callable[[Any], None] | None = None,
    ) -> None:
        super().__init__(on_event=on_event)
        from engine.ingest.options import IngestInput, IngestOptions

        self.inputs = [IngestInput(topic, pool) for topic, pool in inputs]
        self.lake = lake
        self.kafka = kafka
        self.registry = registry
        self.options = options or IngestOptions(create_pools=True)
        self._spark = spark
        self._on_commit = on_commit
        self.ingest: Ingest | None = None

    def _detail(self) -> Any:
        return None if self.ingest is None else self.ingest.status()

    def _run(self, stop: threading.Event) -> None:
        from engine.ingest.loop import Ingest

        if not self._wait_for_topics(stop):
            return
        self.ingest = Ingest(
            self.inputs,
            lake=self.lake,
            kafka=self.kafka,
            registry=self.registry,
            options=self.options,
            spark=self._spark,
        )
        self._running()
        self.ingest.run(stop, on_commit=self._commit, on_note=self._note)

    def _note(self, kind: str, text: str) -> None:
        """An outage of Kafka or the registry began (``unreachable``) or ended (``back``)."""
        from engine.kafka.outage import BACK, UNREACHABLE

        if kind in (UNREACHABLE, BACK):
            self._failed_softly(text if kind == UNREACHABLE else None)
            self._event(kind, text)

    def _wait_for_topics(self, stop: threading.Event) -> bool:
        from engine.kafka.clients import KafkaUnavailable, check_reachable

        announced = ""
        while not stop.is_set():
            try:
                topics = check_reachable(self.kafka)
                missing = [i.topic for i in self.inputs if not topics.get(i.topic)]
                problem = f"waiting for topic(s) {', '.join(missing)} to exist" if missing else ""
            except KafkaUnavailable as exc:
                problem = f"waiting for Kafka: {exc}"
            if not problem:
                self._failed_softly(None)
                return True
            if problem != announced:
                self._event("waiting", problem)
                self._failed_softly(problem)
                announced = problem
            stop.wait(2.0)
        return False

    def _commit(self, info: Any) -> None:
        self._committed(info.version, info.records, info.pool)
        lag = {t: n for t, n in info.topic_lag().items() if n}
        tail = f", lag {', '.join(f'{t} {n}' for t, n in sorted(lag.items()))}" if lag else ""
        dead = f", {info.dead_letters} dead letter(s)" if info.dead_letters else ""
        self._event(
            "commit",
            f"{info.pool} v{info.version}: +{info.records} record(s){dead} in {info.seconds:.2f}s{tail}",
        )
        if self._on_commit is not None:
            self._on_commit(info)


# ----------------------------------------------------------------------------- ETL


class EtlService(Service):
    """ETL passes: one whenever a raw pool of the configuration has a new commit, at
    most every ``interval`` seconds (and one at start). :meth:`run_pass` runs one now
    (the console's "run a pass" button), never at the same time as the loop's."""

    name = "etl"

    def __init__(
        self,
        config: EtlConfig,
        lake: Lake,
        *,
        spark: Any = None,
        interval: float = ETL_INTERVAL,
        on_event: Callable[[ServiceEvent], None] | None = None,
    ) -> None:
        super().__init__(on_event=on_event)
        if interval <= 0:
            raise ServiceError("the ETL interval must be positive")
        self.config = config
        self.lake = lake
        self.interval = interval
        self._spark = _spark_factory(spark)
        self._runner: EtlRunner | None = None
        self._pass_lock = threading.Lock()
        self._nudge = threading.Event()
        self._last_result: PassResult | None = None
        self._raw: dict[str, Any] = {}

    def _detail(self) -> Any:
        return self._last_result

    def wake(self) -> None:
        """A raw pool has a new commit: look now instead of at the next poll."""
        self._nudge.set()

    _wake = wake

    def runner(self) -> EtlRunner:
        if self._runner is None:
            from engine.etl.run import EtlRunner

            self._runner = EtlRunner(self.config, self.lake, self._spark())
        return self._runner

    def run_pass(self) -> PassResult:
        """Run one pass now (waits for a pass of the loop in flight)."""
        with self._pass_lock:
            result = self.runner().run_pass()
        self._last_result = result
        if result.committed:
            outputs = sum(result.outputs.values())
            self._committed(result.staging_version, outputs, self.config.staging_pool)
        self._event("pass", result.summary("line"))
        return result

    run_once = run_pass

    def _raw_versions(self) -> tuple[int, ...]:
        from engine.lake.pools import PoolError

        versions = []
        for name in self.config.raw_pools:
            pool = self._raw.get(name)
            try:
                if pool is None:
                    pool = self._raw[name] = self.lake.open_pool(name)
                versions.append(pool.refresh())
            except PoolError:
                versions.append(-1)
        return tuple(versions)

    def _run(self, stop: threading.Event) -> None:
        self.runner()  # starts Spark in this thread, not in the caller's
        self._running()
        seen: tuple[int, ...] | None = None
        last_pass = 0.0
        failed_at: tuple[int, ...] | None = None
        while not stop.is_set():
            versions = self._raw_versions()
            wait = min(0.25, self.interval)
            if versions != seen and versions != failed_at:
                early = self.interval - (time.monotonic() - last_pass)
                if early > 0:
                    wait = early
                else:
                    last_pass = time.monotonic()
                    try:
                        self.run_pass()
                    except Exception as exc:  # noqa: BLE001 - reported, retried
                        # e.g. a rule over a topic whose records (and types) have not
                        # arrived yet: try again when a raw pool changes
                        failed_at = versions
                        self._failed_softly(one_line(exc, typed=True))
                        self._event("error", f"pass failed: {one_line(exc, typed=True)}")
                        continue
                    self._failed_softly(None)
                    failed_at = None
                    seen = versions
                    continue
            self._nudge.wait(wait)
            self._nudge.clear()


# ----------------------------------------------------------------------------- to-kafka


class ToKafkaService(Service):
    """Continuous delivery of each output to Kafka, one thread each; each in its own
    envelope unless ``envelope`` names one for all."""

    name = "to-kafka"

    def __init__(
        self,
        outputs: Iterable[Output],
        lake: Lake,
        *,
        kafka: KafkaProfile,
        registry: RegistryProfile | None = None,
        format: str = "avro",  # noqa: A002 - the option's name
        envelope: str | None = None,
        take_over: bool = False,
        partitions: int = 1,
        replication: int = 1,
        shaper: str | Path | None = None,
        spark: Any = None,
        poll_interval: float | None = None,
        on_event: Callable[[ServiceEvent], None] | None = None,
    ) -> None:
        super().__init__(on_event=on_event)
        self.outputs = list(outputs)
        self.lake = lake
        self.envelope = envelope
        self._options: dict[str, Any] = {
            "kafka": kafka,
            "registry": registry,
            "format": format,
            "take_over": take_over,
            "partitions": partitions,
            "replication": replication,
            "shaper": shaper,
            "spark": _spark_factory(spark) if shaper is not None else None,
            "wait_for_pool": True,
        }
        if poll_interval is not None:
            self._options["poll_interval"] = poll_interval
        self._deliveries: list[Delivery] = []

    def deliveries(self) -> list[Delivery]:
        return list(self._deliveries)

    def _detail(self) -> tuple[DeliveryStatus, ...]:
        return tuple(d.status() for d in self._deliveries)

    def _run(self, stop: threading.Event) -> None:
        from engine.deliver.loop import deliveries_of, run_deliveries

        self._deliveries = deliveries_of(self.lake, self.outputs, self.envelope, **self._options)
        self._running()
        run_deliveries(self._deliveries, stop, self._delivery_event, continuous=True)

    def _delivery_event(self, event: DeliveryEvent) -> None:
        if event.kind == "delivered":
            self._committed(event.version, event.records, event.topic)
        if event.kind == "failed":
            return  # the service reports the failure itself
        if event.kind in ("unreachable", "back"):  # an outage of Kafka began or ended
            self._failed_softly(event.message if event.kind == "unreachable" else None)
        self._event(event.kind, event.message)


# ----------------------------------------------------------------------------- pipeline


class Pipeline:
    """from-kafka, ETL and to-kafka for one ETL configuration, in one process.

    ``kafka`` / ``registry``: connection profiles (None: loaded from the zync home and
    environment). ``spark``: a SparkSession or a factory of one (None: the process's
    session). ``format``: the output topics' format (None: avro when a registry is
    configured, else json). ``envelope``: every output's envelope (None: each output's
    own, from the configuration). ``take_over``: to-kafka takes over output topics
    last written by another staging pool. ``on_event`` receives every service's events.
    """

    def __init__(
        self,
        config_path: str | Path,
        lake: Lake,
        *,
        kafka: KafkaProfile | None = None,
        registry: RegistryProfile | None = None,
        spark: Any = None,
        etl_interval: float = ETL_INTERVAL,
        format: str | None = None,  # noqa: A002 - the option's name
        envelope: str | None = None,
        take_over: bool = False,
        partitions: int = 1,
        replication: int = 1,
        ingest_options: IngestOptions | None = None,
        create_pools: bool = True,
        on_event: Callable[[ServiceEvent], None] | None = None,
    ) -> None:
        from engine.deliver.loop import config_outputs  # deferred: the codecs (pyarrow)
        from engine.etl.config import load_config
        from engine.settings.errors import NotConfiguredError
        from engine.settings.kafka import load_kafka_profile
        from engine.settings.registry import load_registry_profile

        self.config_path = Path(config_path)
        self.config = load_config(self.config_path)
        self.lake = lake
        self.kafka = kafka or load_kafka_profile()
        if registry is None:
            try:
                registry = load_registry_profile()
            except NotConfiguredError:
                registry = None
        self.registry = registry
        self.create_pools = create_pools
        chosen = format or ("avro" if registry is not None else "json")
        spark_factory = _spark_factory(spark)
        self.etl = EtlService(self.config, lake, spark=spark_factory, interval=etl_interval)
        self.from_kafka = FromKafkaService(
            [(i.topic, i.pool) for i in self.config.inputs],
            lake,
            kafka=self.kafka,
            registry=registry,
            options=ingest_options,
            spark=spark_factory,
            on_commit=lambda _info: self.etl.wake(),
        )
        self.to_kafka = ToKafkaService(
            config_outputs(self.config),
            lake,
            kafka=self.kafka,
            registry=registry,
            format=chosen,
            envelope=envelope,
            take_over=take_over,
            partitions=partitions,
            replication=replication,
        )
        if on_event is not None:
            for service in self.services.values():
                service.add_listener(on_event)

    def __repr__(self) -> str:
        return f"Pipeline({self.config.name!r}, {self.lake!r})"

    @property
    def services(self) -> dict[str, Service]:
        """The loops by name: ``from-kafka``, ``etl``, ``to-kafka``."""
        return {"from-kafka": self.from_kafka, "etl": self.etl, "to-kafka": self.to_kafka}

    def add_listener(self, listener: Callable[[ServiceEvent], None]) -> None:
        for service in self.services.values():
            service.add_listener(listener)

    def prepare(self) -> list[str]:
        """Create the configuration's pools that do not exist yet; returns notes."""
        from engine.lake.pools import RAW, STAGING

        notes = []
        if not self.create_pools:
            return notes
        wanted = {i.pool: RAW for i in self.config.inputs}
        wanted.update({o.pool: STAGING for o in self.config.outputs})
        for name, kind in wanted.items():
            if not self.lake.exists(name):
                self.lake.create_pool(name, kind, exist_ok=True)
                notes.append(f"created {kind} pool {name!r} in {self.lake.root}")
        return notes

    def start(self, only: Iterable[str] | None = None) -> None:
        """Start the loops (all, or those named in ``only``: ``from-kafka``, ``etl``,
        ``to-kafka``), downstream first so nothing waits on a loop not started yet."""
        wanted = set(self.services) if only is None else set(only)
        unknown = wanted - set(self.services)
        if unknown:
            raise ServiceError(
                f"unknown loop {sorted(unknown)[0]!r}: use {', '.join(self.services)}"
            )
        self.prepare()
        for name in ("to-kafka", "etl", "from-kafka"):
            if name in wanted:
                self.services[name].start()

    def stop(self, timeout: float | None = 120.0) -> None:
        """Stop every loop, upstream first; each finishes its commit in flight."""
        for service in (self.from_kafka, self.etl, self.to_kafka):
            service.stop(timeout)

    def status(self) -> dict[str, ServiceStatus]:
        return {name: service.status() for name, service in self.services.items()}

    @property
    def running(self) -> bool:
        return any(service.running for service in self.services.values())

    def failed(self) -> Mapping[str, str]:
        """Services that failed, with their error."""
        return {
            name: status.last_error or "failed"
            for name, status in self.status().items()
            if status.state == FAILED
        }


__all__ = [
    "ETL_INTERVAL",
    "Commit",
    "EtlService",
    "FromKafkaService",
    "Pipeline",
    "Service",
    "ServiceError",
    "ServiceEvent",
    "ServiceStatus",
    "ToKafkaService",
]
