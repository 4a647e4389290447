"""What a loop declares for operators (:meth:`engine.services.service.Service.report`):
its detail as JSON, its metric readings, the dependencies it reached, and why it cannot
do its job now.

A loop names its metrics with :class:`Metric` (in its own module: a new loop declares
its own, nothing is listed centrally) and reads them from its status snapshot when asked
(:meth:`Metric.at`); the API (:mod:`engine.serve`) turns the readings into Prometheus
families, adding the ``zync_`` prefix and the ``pipeline`` and ``loop`` labels. Labels
are bounded: topics, partitions, pools, rules, outputs — never an offset or a key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

#: The dependencies a loop may report on.
KAFKA = "kafka"
REGISTRY = "registry"
LAKE = "lake"


@dataclass(frozen=True)
class Metric:
    """One metric a loop reports: its name without the ``zync_`` prefix (by Prometheus'
    conventions: ``_total`` for counters, base units ``_seconds``, ``_bytes``), kind
    and help."""

    name: str
    kind: Literal["counter", "gauge"]
    help: str

    def at(self, value: float | None, **labels: object) -> Reading | None:
        """A reading of this metric (None when the value is not known)."""
        if value is None:
            return None
        return Reading(self, float(value), {k: str(v) for k, v in labels.items()})


#: Metrics more than one loop reports (each loop its own, by ``topic``).
RECORDS_IN = Metric(
    "records_in_total",
    "counter",
    "Records a loop read, per topic: from-kafka committed to its raw pool (dead letters "
    "included), etl consumed from its raw pools.",
)
BYTES_IN = Metric(
    "bytes_in_total", "counter", "Bytes of the Kafka record values from-kafka committed, per topic."
)
RECORDS_OUT = Metric(
    "records_out_total",
    "counter",
    "Records a loop wrote, per topic: etl staged (outputs), to-kafka produced (messages).",
)
POOL_VERSION = Metric("pool_version", "gauge", "The Delta version of a pool, as the loop last saw it.")


@dataclass(frozen=True)
class Reading:
    """One sample: a metric's value for one set of labels."""

    metric: Metric
    value: float
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EventHistogram:
    """A histogram a loop's events feed: each event of ``kind`` observes its ``field``
    (a loop lists them in :attr:`engine.services.service.Service.histograms`)."""

    name: str
    help: str
    kind: str
    field: str
    buckets: tuple[float, ...]


@dataclass(frozen=True)
class Dependency:
    """What a loop knows of one dependency (:data:`KAFKA`, :data:`REGISTRY`,
    :data:`LAKE`): up (True), down (False, ``detail`` says since when) or not known yet
    (None: the loop has not needed it)."""

    name: str
    up: bool | None
    detail: str | None = None


@dataclass(frozen=True)
class LoopReport:
    """A loop's report: ``detail`` (its own snapshot as JSON), ``readings`` (metrics),
    ``dependencies`` and ``not_ready`` (why it cannot do its job now, besides its state:
    one line each)."""

    detail: Mapping[str, Any] = field(default_factory=dict)
    readings: tuple[Reading, ...] = ()
    dependencies: tuple[Dependency, ...] = ()
    not_ready: tuple[str, ...] = ()


def readings(*found: Reading | None) -> tuple[Reading, ...]:
    """The readings that have a value."""
    return tuple(r for r in found if r is not None)


def as_json(value: Any) -> Any:
    """A frozen snapshot (dataclasses, tuples, mappings) as JSON-able data; mapping keys
    that are tuples become ``a/b`` strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {
            "/".join(map(str, k)) if isinstance(k, tuple) else str(k): as_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [as_json(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
