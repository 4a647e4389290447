"""How far behind Kafka the lake is, and how fast it moves.

Lag, per topic and partition (:func:`partition_lag`):

* ``lag_records``: records in Kafka after the last offset the lake holds
  (``high - 1 - lake_offset``). ``high`` is the end of the log: Tansu can report the base
  offset of the last batch as its high watermark (docs/design.md#the-embedded-stack), so
  the tail is read once per reported watermark to find the real end
  (:meth:`engine.observe.kafka_probe.KafkaProbe.tail`);
* ``lag_seconds``: the Kafka timestamp of the newest record minus that of the last synced
  record (0 when caught up) — how far behind Kafka the lake is, in time;
* ``source_lag_seconds``: the same with Debezium's ``value.source.ts_ms`` — how far behind
  the source database the lake is — for topics whose values carry it.

Both lags are differences between record timestamps, not between a record and "now", so
they stay put while nothing happens and are reproducible in tests. :class:`Rates` keeps
each partition's positions over the polls: records per second and a sparkline.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from engine.errors import one_line
from engine.observe.kafka_probe import KafkaProbe

#: Points kept for each topic's rate sparkline (one per poll).
HISTORY = 60
#: The window over which the ingest rate is averaged, in seconds.
RATE_WINDOW = 10.0


class Rates:
    """Per-partition history of the lake's position, giving records/s and a sparkline."""

    def __init__(self) -> None:
        self._points: dict[tuple[str, int, str], deque[tuple[float, int]]] = {}
        self._deltas: dict[tuple[str, int, str], deque[float]] = {}

    def add(self, key: tuple[str, int, str], now: float, position: int | None) -> tuple[float | None, tuple[float, ...]]:
        if position is None:
            return None, tuple(self._deltas.get(key, ()))
        points = self._points.setdefault(key, deque(maxlen=HISTORY))
        deltas = self._deltas.setdefault(key, deque(maxlen=HISTORY))
        if points:
            last_t, last_p = points[-1]
            if now > last_t:
                deltas.append(max(0, position - last_p) / (now - last_t))
        points.append((now, position))
        window = [(t, p) for t, p in points if now - t <= RATE_WINDOW]
        rate = None
        if len(window) >= 2 and window[-1][0] > window[0][0]:
            rate = max(0, window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
        elif len(points) == 1:
            rate = None
        else:
            rate = 0.0
        return rate, tuple(deltas)


@dataclass(frozen=True)
class PartitionLag:
    """One partition's end of log and lags (None: not known)."""

    high: int | None = None
    records: int | None = None
    seconds: float | None = None
    source_seconds: float | None = None
    #: Why the tail could not be read (the watermark stands in for it).
    error: str | None = None


def partition_lag(
    probe: KafkaProbe,
    topic: str,
    partition: int,
    position: int | None,
    low: int | None,
    high: int | None,
) -> PartitionLag:
    """The lag of the lake's ``position`` behind the partition's watermarks."""
    if low is None or high is None:
        return PartitionLag(high=high)
    error = None
    try:
        newest = probe.tail(topic, partition, low, high)
    except Exception as exc:  # noqa: BLE001 - shown in words; the watermark stands in
        probe.drop()
        newest = high - 1
        error = f"cannot read the tail of {topic}[{partition}]: {one_line(exc, limit=300)}"
    lag = max(0, newest - (position if position is not None else low - 1))
    if newest >= low:
        lag_s, src_s = lags(probe, topic, partition, position, low, newest)
    else:
        lag_s, src_s = 0.0, 0.0
    return PartitionLag(newest + 1, lag, lag_s, src_s, error)


def lags(
    probe: KafkaProbe, topic: str, partition: int, synced: int | None, low: int, newest: int
) -> tuple[float | None, float | None]:
    """(lag in Kafka time, lag in source time) between the last synced record and the
    newest one (the first record stands in for "synced" when the lake has none)."""
    if synced is not None and synced >= newest:
        return 0.0, 0.0
    try:
        new_ts, new_src = probe.record_times(topic, partition, newest)
        old_ts, old_src = probe.record_times(topic, partition, synced if synced is not None else low)
    except Exception:  # noqa: BLE001 - best effort; the watermarks still show
        probe.drop()
        return None, None
    lag = max(0.0, new_ts - old_ts) if new_ts is not None and old_ts is not None else None
    src = max(0.0, (new_src - old_src) / 1000.0) if new_src is not None and old_src is not None else None
    return lag, src
