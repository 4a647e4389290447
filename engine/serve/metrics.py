"""``GET /metrics``: Prometheus' text exposition, written with ``prometheus_client``.

Nothing is instrumented in the loops' hot paths: at scrape time a custom collector
(:class:`LoopCollector`) reads each loop's status snapshot and report
(engine/services/report.py) — the counts, positions and lags the loops keep anyway — and
histograms (:class:`EventHistograms`) are fed by the loops' events (an ETL pass's
duration and records). Every name has the ``zync_`` prefix and Prometheus' units; every
series has the ``pipeline`` and ``loop`` labels, and only bounded others (topic,
partition, pool, rule, output, stage, state). The process's own (CPU, memory, start time)
come from ``prometheus_client``'s process collector. A rendering is kept
:data:`RENDER_AGE` seconds, one rendering at a time, so a storm of scrapes costs what a
few do.
"""

from __future__ import annotations

import platform
import threading
import time
from collections.abc import Iterator
from importlib import metadata
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from engine import __version__
from engine.services.service import STARTING, STATES, STOPPING

if TYPE_CHECKING:
    from engine.serve.health import LoopFacts
    from engine.serve.served_process import ServedProcess
    from engine.services.report import Reading
    from engine.services.service import Service, ServiceDetail, ServiceEvent

PREFIX = "zync_"
#: Seconds a rendering is served again.
RENDER_AGE = 0.5
#: The packages whose versions ``zync_build_info`` carries.
PACKAGES = ("pyspark", "deltalake", "confluent-kafka")


def _versions() -> dict[str, str]:
    found = {"version": __version__, "python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package.replace("-", "_")] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package.replace("-", "_")] = ""
    return found


class LoopCollector(Collector):
    """The loops' metrics, read from their snapshots at each scrape."""

    def __init__(self, process: ServedProcess) -> None:
        self.process = process
        self.versions = _versions()

    def collect(self) -> Iterator[Metric]:
        process = self.process
        base = {"pipeline": process.pipeline}
        info = GaugeMetricFamily(
            PREFIX + "build_info", "zync's version and those of its engines.",
            labels=["pipeline", *self.versions],
        )  # fmt: skip
        info.add_metric([process.pipeline, *self.versions.values()], 1)
        yield info
        start = GaugeMetricFamily(
            PREFIX + "process_start_time_seconds",
            "When this zync process started (Unix time).",
            labels=["pipeline", "role"],
        )
        start.add_metric([process.pipeline, process.role], process.started_at)
        yield start
        facts = process.facts()
        yield from self._loops(facts, base)
        yield from families(
            [(fact.name, r) for fact in facts for r in fact.report.readings], process.pipeline
        )

    def _loops(self, facts: list[LoopFacts], base: dict[str, str]) -> Iterator[Metric]:
        labels = ["pipeline", "loop"]
        state = GaugeMetricFamily(
            PREFIX + "loop_state", "1 for the state the loop is in.", labels=[*labels, "state"]
        )
        up = GaugeMetricFamily(PREFIX + "loop_up", "1 when the loop runs.", labels=labels)
        commits = CounterMetricFamily(
            PREFIX + "loop_commits_total", "Commits the loop made (Delta commits, Kafka transactions).", labels=labels
        )  # fmt: skip
        records = CounterMetricFamily(
            PREFIX + "loop_records_total", "Records the loop's commits held.", labels=labels
        )
        errors = CounterMetricFamily(
            PREFIX + "loop_errors_total", "Errors of the loop: failures and problems it survived.", labels=labels
        )  # fmt: skip
        last = GaugeMetricFamily(
            PREFIX + "loop_last_commit_timestamp_seconds",
            "When the loop last committed (Unix time).",
            labels=labels,
        )
        progress = GaugeMetricFamily(
            PREFIX + "loop_seconds_since_progress",
            "Seconds since the loop last made progress (while it runs).",
            labels=labels,
        )
        waiting = GaugeMetricFamily(
            PREFIX + "loop_waiting", "1 while the loop waits on purpose (no work, an outage).", labels=labels
        )  # fmt: skip
        deps = {
            name: GaugeMetricFamily(
                f"{PREFIX}{name}_up", f"1 when the loop reaches {title}, 0 when it cannot.", labels=labels
            )  # fmt: skip
            for name, title in (("kafka", "Kafka"), ("registry", "the Schema Registry"), ("lake", "the lake"))
        }
        for fact in facts:
            values = [base["pipeline"], fact.name]
            status = fact.status
            for name in STATES:
                state.add_metric([*values, name], 1.0 if status.state == name else 0.0)
            up.add_metric(values, 1.0 if status.state in (STARTING, "running", STOPPING) else 0.0)
            commits.add_metric(values, status.commits)
            records.add_metric(values, status.records)
            errors.add_metric(values, status.errors)
            if status.last_commit is not None:
                last.add_metric(values, status.last_commit.at)
            beat = status.heartbeat
            if beat is not None and beat.since_progress is not None:
                progress.add_metric(values, beat.since_progress)
                waiting.add_metric(values, 1.0 if beat.waiting else 0.0)
            for dep in fact.report.dependencies:
                if dep.up is not None and dep.name in deps:
                    deps[dep.name].add_metric(values, 1.0 if dep.up else 0.0)
        made = (state, up, commits, records, errors, last, progress, waiting, *deps.values())
        yield from (family for family in made if family.samples)


def families(found: list[tuple[str, Reading]], pipeline: str) -> Iterator[Metric]:
    """The loops' readings as metric families, labels ``pipeline``, ``loop`` and theirs."""
    grouped: dict[str, list[tuple[str, Reading]]] = {}
    for loop, reading in found:
        grouped.setdefault(reading.metric.name, []).append((loop, reading))
    for name, items in grouped.items():
        metric = items[0][1].metric
        keys = sorted({k for _, r in items for k in r.labels})
        labels = ["pipeline", "loop", *keys]
        kind = CounterMetricFamily if metric.kind == "counter" else GaugeMetricFamily
        family = kind(PREFIX + name, metric.help, labels=labels)
        for loop, reading in items:
            family.add_metric([pipeline, loop, *(reading.labels.get(k, "") for k in keys)], reading.value)
        yield family


class EventHistograms:
    """Histograms the loops' events feed (each loop lists its own: ``Service.histograms``)."""

    def __init__(self, process: ServedProcess, registry: CollectorRegistry) -> None:
        self.process = process
        self.registry = registry
        self._made: dict[str, Histogram] = {}
        self._lock = threading.Lock()

    def adopt(self, service: Service[ServiceDetail]) -> None:
        """Make ``service``'s histograms and listen to its events."""
        specs = service.histograms
        if not specs:
            return
        with self._lock:
            for spec in specs:
                if spec.name not in self._made:
                    self._made[spec.name] = Histogram(
                        PREFIX + spec.name, spec.help, ["pipeline", "loop"],
                        buckets=spec.buckets, registry=self.registry,
                    )  # fmt: skip

        def observe(event: ServiceEvent) -> None:
            for spec in specs:
                value = event.fields.get(spec.field)
                if event.kind == spec.kind and isinstance(value, int | float):
                    self._made[spec.name].labels(self.process.pipeline, event.service).observe(value)

        service.add_listener(observe)


class Exposition:
    """The process's /metrics, rendered at most every :data:`RENDER_AGE` seconds."""

    def __init__(self, process: ServedProcess) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(LoopCollector(process))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.histograms = EventHistograms(process, self.registry)
        process.on_loop(self.histograms.adopt)
        self._lock = threading.Lock()
        self._body = b""
        self._at = 0.0

    def render(self) -> bytes:
        with self._lock:
            if not self._body or time.monotonic() - self._at > RENDER_AGE:
                self._body = generate_latest(self.registry)
                self._at = time.monotonic()
            return self._body
