"""Read-only snapshots of a running pipeline: offsets, lag, cursors, pending, expired.

What an operator looks at (the console polls these; a script can print them). Nothing
here writes: snapshots read Kafka watermarks, the Delta logs of the pools and, for pending
and expired records, the ETL module's own public functions.

Every snapshot says what it could not see in words (``error`` fields) instead of raising:
a broker that is down gives topic rows with the lake's positions and a Kafka error, a
missing lake gives an error and no rows, and the next poll picks recovery up by itself.

Lag, per topic and partition (``TopicSnapshot``):

* ``lag_records``: records in Kafka after the last offset the lake holds
  (``high - 1 - lake_offset``). ``high`` is the end of the log: Tansu can report the base
  offset of the last batch as its high watermark (DESIGN.md), so the tail is read once per
  reported watermark to find the real end;
* ``lag_seconds``: the Kafka timestamp of the newest record minus that of the last synced
  record (0 when caught up) — how far behind Kafka the lake is, in time;
* ``source_lag_seconds``: the same with Debezium's ``value.source.ts_ms`` — how far behind
  the source database the lake is — for topics whose values carry it.

Both lags are differences between record timestamps, not between a record and "now", so
they stay put while nothing happens and are reproducible in tests.

The clock (``clock``) is injectable, so ages and rates are deterministic under test.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.etl.config import EtlConfig
    from engine.lake.pools import Lake, Pool
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile

#: How long a snapshot waits for Kafka or the registry before saying it is unreachable.
PROBE_TIMEOUT = 3.0
#: Points kept for each topic's rate sparkline (one per poll).
HISTORY = 60
#: Pending/expired records shown with their full envelope (the rest: key and position).
LISTING_ENVELOPES = 1000
#: The window over which the ingest rate is averaged, in seconds.
RATE_WINDOW = 10.0

IN = "in"  # Kafka → lake (from-kafka)
OUT = "out"  # lake → Kafka (to-kafka)


# --------------------------------------------------------------------------- snapshots


@dataclass(frozen=True)
class TopicSnapshot:
    """One topic partition as the lake and Kafka see it."""

    topic: str
    partition: int
    pool: str | None
    direction: str = IN
    low: int | None = None
    high: int | None = None
    lake_offset: int | None = None
    lag_records: int | None = None
    lag_seconds: float | None = None
    source_lag_seconds: float | None = None
    rate: float | None = None
    history: tuple[float, ...] = ()
    dead_letters: int = 0
    error: str | None = None


@dataclass(frozen=True)
class TopicsReport:
    """Every topic partition the pipeline reads or writes, and what could not be seen."""

    taken_at: float
    topics: tuple[TopicSnapshot, ...] = ()
    kafka_error: str | None = None
    registry_error: str | None = None
    lake_error: str | None = None

    @property
    def errors(self) -> list[str]:
        return [e for e in (self.lake_error, self.kafka_error, self.registry_error) if e]


@dataclass(frozen=True)
class DeadLetter:
    """A record from-kafka could not decode or shape, kept in its pool."""

    pool: str
    topic: str
    partition: int
    offset: int
    stage: str | None
    error: str | None
    key_bytes: bytes | None
    value_bytes: bytes | None
    seqno: int | None = None

    def envelope(self) -> dict[str, Any]:
        """The dead letter as JSON-able data (bytes shown as text when they are UTF-8)."""
        return {
            "pool": self.pool,
            "kafka": {"topic": self.topic, "partition": self.partition, "offset": self.offset},
            "seqno": self.seqno,
            "stage": self.stage,
            "error": self.error,
            "key_bytes": _show_bytes(self.key_bytes),
            "value_bytes": _show_bytes(self.value_bytes),
        }


@dataclass(frozen=True)
class EtlSnapshot:
    """One ETL rule and one of its input partitions."""

    etl: str
    rule: str
    topic: str
    partition: int
    cursor: int | None
    processed: int
    pending: int
    expired: int


@dataclass(frozen=True)
class RecordRow:
    """A pending or expired input record, with its full envelope."""

    etl: str
    topic: str
    partition: int
    offset: int
    key: str
    rule: str
    age_seconds: float | None
    status: str
    envelope: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EtlReport:
    """The ETL's positions and waiting records, from one staging snapshot."""

    taken_at: float
    rows: tuple[EtlSnapshot, ...] = ()
    pending: tuple[RecordRow, ...] = ()
    expired: tuple[RecordRow, ...] = ()
    staging_version: int | None = None
    error: str | None = None


# --------------------------------------------------------------------------- helpers


def _show_bytes(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.hex()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first if len(first) <= 300 else first[:297] + "..."


def _ts_seconds(value: Any) -> float | None:
    """A Kafka timestamp (``(type, ms)`` from confluent-kafka) in seconds."""
    if isinstance(value, tuple):
        kind, ms = value
        return None if kind == 0 or ms is None or ms < 0 else ms / 1000.0
    return None


def source_ts_ms(value: Any) -> int | None:
    """Debezium's ``source.ts_ms`` in a decoded change-event value, or None."""
    if isinstance(value, Mapping):
        payload = value.get("payload") if "payload" in value and "schema" in value else value
        if isinstance(payload, Mapping):
            source = payload.get("source")
            if isinstance(source, Mapping):
                ts = source.get("ts_ms")
                if isinstance(ts, int | float) and not isinstance(ts, bool):
                    return int(ts)
    return None


class _Rates:
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


# --------------------------------------------------------------------------- observer


class Observer:
    """Takes snapshots of a lake, its Kafka topics and the ETLs configured on it.

    ``kafka`` and ``registry`` are connection profiles (None: not configured, and the
    snapshot says so). ``etls`` are loaded ETL configurations. ``spark`` is a callable
    returning the process's SparkSession, used only for pending/expired listings (the ETL
    module needs it); it is called in the polling thread, never at construction.

    One Observer is meant to be polled by one thread at a time per method (the console
    runs each kind of poll in its own non-overlapping worker); its caches are locked.
    """

    def __init__(
        self,
        lake: Lake,
        *,
        kafka: KafkaProfile | None = None,
        registry: RegistryProfile | None = None,
        etls: Sequence[EtlConfig] = (),
        spark: Callable[[], Any] | None = None,
        clock: Callable[[], float] = time.time,
        probe_timeout: float = PROBE_TIMEOUT,
        kafka_error: str | None = None,
        registry_error: str | None = None,
    ) -> None:
        self.lake = lake
        self.kafka = kafka
        self.registry = registry
        self.etls = list(etls)
        self.spark = spark
        self.clock = clock
        self.probe_timeout = probe_timeout
        self._kafka_config_error = kafka_error
        self._registry_config_error = registry_error
        # One lock and one set of open pools per kind of snapshot, so a slow ETL listing
        # (Spark) never holds the topics snapshot back; Pool objects are not shared
        # between threads.
        self._locks = {part: threading.RLock() for part in ("topics", "etl", "dead")}
        self._pools: dict[str, dict[str, Pool]] = {part: {} for part in self._locks}
        self._rates = _Rates()
        self._consumer: Any = None
        self._decoder: Any = None
        self._ts_cache: dict[tuple[str, int, int], tuple[float | None, int | None]] = {}
        self._tail_cache: dict[tuple[str, int, int], int] = {}
        self._topics_cache: dict[str, tuple[int, list[str]]] = {}
        self._deadletter_cache: dict[str, tuple[int, dict[tuple[str, int], int]]] = {}
        self._marker_cache: tuple[tuple[str, int], dict[tuple[str, str, int, str], int]] | None = None
        self._runners: dict[str, Any] = {}
        self._listing_cache: dict[tuple[Any, ...], tuple[tuple[RecordRow, ...], tuple[RecordRow, ...], str | None]] = {}

    # -- pools --------------------------------------------------------------------------

    def pool(self, name: str, part: str = "topics") -> Pool:
        """The pool ``name``, opened once per kind of snapshot and refreshed on every call."""
        with self._locks[part]:
            pools = self._pools[part]
            pool = pools.get(name)
            if pool is None or not Path(pool.path).exists():
                pool = self.lake.open_pool(name)
                pools[name] = pool
            else:
                pool.refresh()
            return pool

    def _lake_error(self) -> str | None:
        if not self.lake.root.exists():
            return f"lake path {self.lake.root} is missing"
        if not self.lake.root.is_dir():
            return f"lake path {self.lake.root} is not a directory"
        return None

    # -- topics ---------------------------------------------------------------------------

    def _inputs(self) -> list[tuple[str, str]]:
        """(topic, raw pool) pairs: the ETLs' inputs, then topics found in raw pools."""
        seen: dict[tuple[str, str], None] = {}
        for config in self.etls:
            for endpoint in config.inputs:
                seen[(endpoint.topic, endpoint.pool)] = None
        for name in self.lake.pool_names():
            try:
                pool = self.pool(name)
            except Exception:  # noqa: BLE001 - a table that is not a pool: not ours to show
                continue
            if pool.kind != "raw":
                continue
            for topic in self.pool_topics(pool):
                seen[(topic, name)] = None
        return list(seen)

    def pool_topics(self, pool: Pool) -> list[str]:
        """The topics a pool holds records (or dead letters) of; cached per version."""
        cached = self._topics_cache.get(pool.name)
        if cached is not None and cached[0] == pool.version:
            return cached[1]
        import pyarrow.compute as pc
        import pyarrow.dataset as ds

        table = pool.table.to_pyarrow_dataset().to_table(
            columns={"topic": ds.field("kafka", "topic")}, filter=ds.field("kafka").is_valid()
        )
        found = {t for t in pc.unique(table.column("topic")).to_pylist() if t is not None}
        topics = sorted(found | set(pool.meta.types))
        self._topics_cache[pool.name] = (pool.version, topics)
        return topics

    def _outputs(self) -> list[tuple[str, str, str]]:
        """(topic, staging pool, etl name) of every ETL output."""
        out = []
        for config in self.etls:
            for endpoint in config.outputs:
                out.append((endpoint.topic, endpoint.pool, config.name))
        return out

    def _kafka_consumer(self) -> Any:
        if self._consumer is None:
            from engine.kafka.clients import consumer

            assert self.kafka is not None
            self._consumer = consumer(
                self.kafka,
                extra={"socket.timeout.ms": str(int(self.probe_timeout * 1000)), "isolation.level": "read_uncommitted"},
            )
        return self._consumer

    def _drop_consumer(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception:  # noqa: BLE001 - closing a broken client
                pass
            self._consumer = None

    def _kafka_partitions(self) -> tuple[dict[str, int] | None, str | None]:
        if self.kafka is None:
            return None, self._kafka_config_error or "no Kafka configured"
        from engine.kafka.clients import check_reachable

        try:
            return check_reachable(self.kafka, timeout=self.probe_timeout), None
        except Exception as exc:  # noqa: BLE001 - shown in words
            self._drop_consumer()
            return None, _one_line(exc)

    def _registry_check(self) -> str | None:
        if self.registry is None:
            return self._registry_config_error
        import httpx

        try:
            response = httpx.get(
                self.registry.url.rstrip("/") + "/subjects",
                timeout=self.probe_timeout,
                auth=self.registry.basic_auth(),
            )
        except Exception as exc:  # noqa: BLE001 - shown in words
            return f"cannot reach Schema Registry at {self.registry.url}: {_one_line(exc)}"
        if response.status_code != 200:
            return f"Schema Registry at {self.registry.url} answered {response.status_code}"
        return None

    def _decode_value(self, data: bytes | None) -> Any:
        """A Kafka value as JSON-able data, whatever its format (None if it cannot be)."""
        if data is None:
            return None
        from engine.kafka.codecs.decoder import RecordDecoder
        from engine.kafka.codecs.formats import Format

        try:
            if data[:1] == b"\x00" and len(data) > 5:
                if self.registry is None:
                    return None
                if self._decoder is None:
                    from engine.kafka.registry_client import RegistrySchemas

                    self._decoder = RecordDecoder(
                        Format.AVRO, RegistrySchemas(self.registry, timeout=self.probe_timeout)
                    )
                return self._decoder.decode(data)
            return RecordDecoder(Format.JSON).decode(data)
        except Exception:  # noqa: BLE001 - lag in source time is best effort
            return None

    def _read_from(self, topic: str, partition: int, offset: int, *, to_end: bool) -> list[Any]:
        """Messages of one partition from ``offset``: the first one, or (``to_end``) every
        one until the partition's end (a poll that brings nothing)."""
        from confluent_kafka import TopicPartition

        kafka = self._kafka_consumer()
        kafka.assign([TopicPartition(topic, partition, offset)])
        found: list[Any] = []
        deadline = time.monotonic() + self.probe_timeout
        try:
            while time.monotonic() < deadline:
                message = kafka.poll(0.3 if found else min(1.0, self.probe_timeout))
                if message is None:
                    if found:
                        break
                    continue
                if message.error():
                    break
                if message.topic() != topic or message.partition() != partition or message.offset() < offset:
                    continue
                found.append(message)
                if not to_end:
                    break
        finally:
            kafka.unassign()
        return found

    def _times(self, message: Any) -> tuple[float | None, int | None]:
        return _ts_seconds(message.timestamp()), source_ts_ms(self._decode_value(message.value()))

    def _record_times(self, topic: str, partition: int, offset: int) -> tuple[float | None, int | None]:
        """(Kafka timestamp in s, Debezium source.ts_ms) of one record; cached."""
        key = (topic, partition, offset)
        cached = self._ts_cache.get(key)
        if cached is not None:
            return cached
        found = self._read_from(topic, partition, offset, to_end=False)
        times = self._times(found[0]) if found else (None, None)
        if found:
            self._remember(key, times)
        return times

    def _remember(self, key: tuple[str, int, int], times: tuple[float | None, int | None]) -> None:
        if len(self._ts_cache) > 10_000:
            self._ts_cache.clear()
        self._ts_cache[key] = times

    def _tail(self, topic: str, partition: int, low: int, high: int) -> int:
        """The partition's last offset. Tansu can report the base offset of the last batch
        as the high watermark (DESIGN.md), so the tail is read from ``high - 1`` to the
        end once per reported watermark, and remembered."""
        key = (topic, partition, high)
        cached = self._tail_cache.get(key)
        if cached is not None:
            return cached
        if high <= low:
            return high - 1
        found = self._read_from(topic, partition, high - 1, to_end=True)
        last = high - 1
        for message in found:
            self._remember((topic, partition, message.offset()), self._times(message))
            last = max(last, message.offset())
        if found:
            self._tail_cache[key] = last
        return last

    def _lags(self, topic: str, partition: int, synced: int | None, low: int, newest: int) -> tuple[float | None, float | None]:
        """(lag in Kafka time, lag in source time) between the last synced record and the
        newest one (the first record stands in for "synced" when the lake has none)."""
        if synced is not None and synced >= newest:
            return 0.0, 0.0
        try:
            new_ts, new_src = self._record_times(topic, partition, newest)
            old_ts, old_src = self._record_times(topic, partition, synced if synced is not None else low)
        except Exception:  # noqa: BLE001 - best effort; the watermarks still show
            self._drop_consumer()
            return None, None
        lag = max(0.0, new_ts - old_ts) if new_ts is not None and old_ts is not None else None
        src = max(0.0, (new_src - old_src) / 1000.0) if new_src is not None and old_src is not None else None
        return lag, src

    def dead_letter_counts(self, pool: Pool) -> dict[tuple[str, int], int]:
        """Dead letters per (topic, partition) in ``pool`` (cached per Delta version)."""
        cached = self._deadletter_cache.get(pool.name)
        if cached is not None and cached[0] == pool.version:
            return cached[1]
        table = self._read(pool, ["kafka", "deadletter"], "deadletter")
        counts: dict[tuple[str, int], int] = {}
        for kafka in table.column("kafka").to_pylist():
            if kafka:
                tp = (kafka["topic"], kafka["partition"])
                counts[tp] = counts.get(tp, 0) + 1
        self._deadletter_cache[pool.name] = (pool.version, counts)
        return counts

    @staticmethod
    def _read(pool: Pool, columns: list[str], not_null: str) -> Any:
        import pyarrow.dataset as ds

        dataset = pool.table.to_pyarrow_dataset()
        return dataset.to_table(columns=columns, filter=ds.field(not_null).is_valid())

    def dead_letters(self, pool_name: str | None = None, limit: int = 1000) -> list[DeadLetter]:
        """The dead letters of one raw pool (or every raw pool), newest first."""
        names = [pool_name] if pool_name else self.lake.pool_names()
        out: list[DeadLetter] = []
        for name in names:
            pool = self.pool(name, "dead")
            if pool.kind != "raw":
                continue
            with self._locks["dead"]:
                table = self._read(pool, ["seqno", "kafka", "deadletter"], "deadletter")
            for row in table.to_pylist():
                kafka, dead = row["kafka"] or {}, row["deadletter"] or {}
                out.append(
                    DeadLetter(
                        pool=name,
                        topic=kafka.get("topic", "?"),
                        partition=kafka.get("partition", -1),
                        offset=kafka.get("offset", -1),
                        stage=dead.get("stage"),
                        error=dead.get("error"),
                        key_bytes=dead.get("key_bytes"),
                        value_bytes=dead.get("value_bytes"),
                        seqno=row["seqno"],
                    )
                )
        out.sort(key=lambda d: (d.seqno or 0), reverse=True)
        return out[:limit]

    def topics(self) -> TopicsReport:
        """Watermarks, lake positions, lag, rate and dead letters of every topic partition."""
        with self._locks["topics"]:
            now = self.clock()
            lake_error = self._lake_error()
            inputs: list[tuple[str, str]] = []
            if lake_error is None:
                try:
                    inputs = self._inputs()
                except Exception as exc:  # noqa: BLE001
                    lake_error = f"cannot read the lake at {self.lake.root}: {_one_line(exc)}"
            elif self.etls:
                inputs = [(e.topic, e.pool) for c in self.etls for e in c.inputs]
            outputs = self._outputs()
            partitions, kafka_error = self._kafka_partitions()
            registry_error = self._registry_check()
            rows: list[TopicSnapshot] = []
            for topic, pool_name in inputs:
                rows.extend(
                    self._input_rows(topic, pool_name, partitions, kafka_error, lake_error, now)
                )
            for topic, pool_name, etl in outputs:
                rows.extend(
                    self._output_rows(topic, pool_name, etl, partitions, kafka_error, lake_error, now)
                )
            return TopicsReport(
                taken_at=now,
                topics=tuple(rows),
                kafka_error=kafka_error,
                registry_error=registry_error,
                lake_error=lake_error,
            )

    def _pool_or_error(self, name: str, lake_error: str | None) -> tuple[Pool | None, str | None]:
        if lake_error:
            return None, lake_error
        try:
            return self.pool(name), None
        except Exception as exc:  # noqa: BLE001
            return None, _one_line(exc)

    def _watermarks(self, topic: str, parts: list[int]) -> tuple[dict[int, tuple[int, int]], str | None]:
        from engine.kafka.clients import watermarks

        try:
            return watermarks(self._kafka_consumer(), topic, parts, timeout=self.probe_timeout), None
        except Exception as exc:  # noqa: BLE001
            self._drop_consumer()
            return {}, _one_line(exc)

    def _input_rows(
        self,
        topic: str,
        pool_name: str,
        partitions: Mapping[str, int] | None,
        kafka_error: str | None,
        lake_error: str | None,
        now: float,
    ) -> list[TopicSnapshot]:
        pool, pool_error = self._pool_or_error(pool_name, lake_error)
        count = (partitions or {}).get(topic, 0)
        parts = list(range(count))
        if pool is not None:
            # partitions the lake knows of, even when Kafka cannot be asked
            partition = 0
            while pool.position(topic, partition) is not None:
                parts.append(partition)
                partition += 1
            parts = sorted(set(parts))
        if not parts:
            parts = [0]
        marks: dict[int, tuple[int, int]] = {}
        error = pool_error or kafka_error
        if partitions is not None and topic not in partitions:
            error = error or f"topic {topic} does not exist in Kafka yet"
        elif partitions is not None:
            marks, mark_error = self._watermarks(topic, list(range(count)))
            error = error or mark_error
        dead: dict[tuple[str, int], int] = {}
        if pool is not None:
            try:
                dead = self.dead_letter_counts(pool)
            except Exception as exc:  # noqa: BLE001
                error = error or f"cannot count dead letters: {_one_line(exc)}"
        rows = []
        for partition in parts:
            position = pool.position(topic, partition) if pool is not None else None
            low, high = marks.get(partition, (None, None))
            lag = lag_s = src_s = None
            if low is not None and high is not None:
                try:
                    newest = self._tail(topic, partition, low, high)
                except Exception as exc:  # noqa: BLE001
                    self._drop_consumer()
                    newest = high - 1
                    error = error or f"cannot read the tail of {topic}[{partition}]: {_one_line(exc)}"
                high = newest + 1
                lag = max(0, newest - (position if position is not None else low - 1))
                if newest >= low:
                    lag_s, src_s = self._lags(topic, partition, position, low, newest)
                else:
                    lag_s, src_s = 0.0, 0.0
            rate, history = self._rates.add((topic, partition, IN), now, position)
            rows.append(
                TopicSnapshot(
                    topic=topic,
                    partition=partition,
                    pool=pool_name,
                    direction=IN,
                    low=low,
                    high=high,
                    lake_offset=position,
                    lag_records=lag,
                    lag_seconds=lag_s,
                    source_lag_seconds=src_s,
                    rate=rate,
                    history=history,
                    dead_letters=dead.get((topic, partition), 0),
                    error=error,
                )
            )
        return rows

    def _output_rows(
        self,
        topic: str,
        pool_name: str,
        etl: str,
        partitions: Mapping[str, int] | None,
        kafka_error: str | None,
        lake_error: str | None,
        now: float,
    ) -> list[TopicSnapshot]:
        from engine.etl.cursors import out_app

        pool, error = self._pool_or_error(pool_name, lake_error)
        staged = None
        if pool is not None:
            next_offset = pool.app_version(out_app(etl, topic))
            staged = None if next_offset is None else next_offset - 1
        low = high = None
        if partitions is not None and topic in partitions:
            marks, mark_error = self._watermarks(topic, list(range(partitions[topic])))
            error = error or mark_error
            if marks:
                low = min(m[0] for m in marks.values())
                high = sum(m[1] for m in marks.values())
        else:
            error = error or kafka_error
        rate, history = self._rates.add((topic, 0, OUT), now, staged)
        return [
            TopicSnapshot(
                topic=topic,
                partition=0,
                pool=pool_name,
                direction=OUT,
                low=low,
                high=high,
                lake_offset=staged,
                rate=rate,
                history=history,
                error=error,
            )
        ]

    # -- ETL ------------------------------------------------------------------------------

    def marker_counts(self, staging: Pool) -> dict[tuple[str, str, int, str], int]:
        """Completion markers per (etl/rule, topic, partition, status); cached per version."""
        key = (staging.name, staging.version)
        if self._marker_cache is not None and self._marker_cache[0] == key:
            return self._marker_cache[1]
        table = self._read(staging, ["marker"], "marker")
        counts: dict[tuple[str, str, int, str], int] = {}
        for marker in table.column("marker").to_pylist():
            if marker:
                k = (
                    f"{marker['etl']}/{marker['rule'] or ''}",
                    marker["topic"],
                    marker["partition"],
                    marker["status"],
                )
                counts[k] = counts.get(k, 0) + 1
        self._marker_cache = (key, counts)
        return counts

    def etl(self, *, listings: bool = True) -> EtlReport:
        """Cursors, processed/pending/expired counts, and the pending and expired records
        of every configured ETL. ``listings=False`` skips the Spark-backed listings."""
        with self._locks["etl"]:
            now = self.clock()
            if not self.etls:
                return EtlReport(taken_at=now, error="no ETL configuration loaded")
            lake_error = self._lake_error()
            if lake_error:
                return EtlReport(taken_at=now, error=lake_error)
            rows: list[EtlSnapshot] = []
            pending: list[RecordRow] = []
            expired: list[RecordRow] = []
            errors: list[str] = []
            version = None
            for config in self.etls:
                try:
                    staging = self.pool(config.staging_pool, "etl")
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"{config.name}: {_one_line(exc)}")
                    continue
                version = staging.version
                if listings:
                    p, e, listing_error = self._listings(config, staging)
                    pending.extend(p)
                    expired.extend(e)
                    if listing_error:
                        errors.append(f"{config.name}: {listing_error}")
                rows.extend(self._etl_rows(config, staging, pending, expired))
            return EtlReport(
                taken_at=now,
                rows=tuple(rows),
                pending=tuple(pending),
                expired=tuple(expired),
                staging_version=version,
                error="; ".join(errors) or None,
            )

    def _etl_rows(
        self,
        config: EtlConfig,
        staging: Pool,
        pending: Iterable[RecordRow],
        expired: Iterable[RecordRow],
    ) -> list[EtlSnapshot]:
        from engine.etl.cursors import Positions

        positions = Positions.load(config, staging)
        markers = self.marker_counts(staging)
        waiting: dict[tuple[str, str, int], int] = {}
        for row in pending:
            if row.etl == config.name:
                k = (row.rule, row.topic, row.partition)
                waiting[k] = waiting.get(k, 0) + 1
        rows = []
        for index, rule in enumerate(config.transforms):
            label = config.rule_label(index)
            for topic in rule.topics:
                parts = positions.parts.get(topic)
                partitions = list(range(parts)) if parts else [0]
                for partition in partitions:
                    mk = f"{config.name}/{label}"
                    rows.append(
                        EtlSnapshot(
                            etl=config.name,
                            rule=label,
                            topic=topic,
                            partition=partition,
                            cursor=positions.cursor(topic, partition),
                            processed=markers.get((mk, topic, partition, "processed"), 0),
                            pending=waiting.get((label, topic, partition), 0),
                            expired=markers.get((mk, topic, partition, "expired"), 0),
                        )
                    )
        return rows

    def _runner(self, config: EtlConfig) -> Any:
        """The observer's own warm ETL runner for ``config`` (listings only, never passes)."""
        from engine.etl.run import EtlRunner

        runner = self._runners.get(config.name)
        if runner is None:
            spark = self.spark() if self.spark is not None else None
            runner = EtlRunner(config, self.lake, spark)
            self._runners[config.name] = runner
        return runner

    def _listings(
        self, config: EtlConfig, staging: Pool
    ) -> tuple[tuple[RecordRow, ...], tuple[RecordRow, ...], str | None]:
        """Pending and expired records through the ETL module's runner, with their full
        envelopes from the raw pools; cached until a pool the ETL reads moves."""
        versions: list[Any] = [config.name, staging.version]
        for name in config.raw_pools:
            try:
                versions.append(self.pool(name, "etl").version)
            except Exception:  # noqa: BLE001
                versions.append(None)
        key = tuple(versions)
        cached = self._listing_cache.get(key)
        if cached is not None:
            return cached
        try:
            runner = self._runner(config)
            waiting = runner.pending()
            gone = runner.expired()
            envelopes = self._envelopes(config, [*waiting, *gone])
        except Exception as exc:  # noqa: BLE001
            return (), (), f"cannot list pending/expired records: {_one_line(exc)}"
        result = (
            tuple(_record_row(config.name, r, "pending", envelopes) for r in waiting),
            tuple(_record_row(config.name, r, "expired", envelopes) for r in gone),
            None,
        )
        self._listing_cache = {key: result}
        return result

    def _envelopes(self, config: EtlConfig, records: Sequence[Any]) -> dict[tuple[str, int, int], dict[str, Any]]:
        """The raw-pool rows of listed records, as envelopes (key and value parsed)."""
        import pyarrow.compute as pc
        import pyarrow.dataset as ds

        wanted: dict[str, list[int]] = {}
        for record in records[:LISTING_ENVELOPES]:
            seqno = getattr(record, "seqno", None)
            if seqno is not None:
                wanted.setdefault(config.pool_of(record.topic), []).append(int(seqno))
        out: dict[tuple[str, int, int], dict[str, Any]] = {}
        for pool_name, seqnos in wanted.items():
            pool = self.pool(pool_name, "etl")
            dataset = pool.table.to_pyarrow_dataset()
            expr = (ds.field("seqno") >= min(seqnos)) & (ds.field("seqno") <= max(seqnos))
            table = dataset.to_table(columns=["seqno", "kafka", "key", "value"], filter=expr)
            table = table.filter(pc.is_in(table.column("seqno"), value_set=_int_array(seqnos)))
            for row in table.to_pylist():
                kafka = dict(row["kafka"] or {})
                if kafka.get("timestamp") is not None:
                    kafka["timestamp"] = kafka["timestamp"].isoformat()
                envelope = {
                    "pool": pool_name,
                    "seqno": row["seqno"],
                    "kafka": kafka,
                    "key": _parse(row["key"]),
                    "value": _parse(row["value"]),
                }
                out[(kafka.get("topic"), kafka.get("partition"), kafka.get("offset"))] = envelope
        return out

    def close(self) -> None:
        with self._locks["topics"]:
            self._drop_consumer()


def _parse(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _int_array(values: Sequence[int]) -> Any:
    import pyarrow as pa

    return pa.array(values, pa.int64())


def _record_row(
    etl: str, record: Any, status: str, envelopes: Mapping[tuple[str, int, int], dict[str, Any]]
) -> RecordRow:
    """A RecordRow from a :class:`engine.etl.run.PendingRecord` or ``ExpiredRecord``."""
    age = getattr(record, "age", None)
    seconds = age.total_seconds() if age is not None else None
    envelope = envelopes.get((record.topic, record.partition, record.offset))
    if envelope is None:  # not in the raw pool any more (or past the listing limit)
        timestamp = getattr(record, "timestamp", None)
        envelope = {
            "kafka": {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": timestamp.isoformat() if timestamp is not None else None,
            },
            "key": _parse(record.key),
            "value": _parse(getattr(record, "value", None)),
        }
    return RecordRow(
        etl=etl,
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        key=record.key if record.key is not None else "null",
        rule=record.rule or "(no rule)",
        age_seconds=seconds,
        status=status,
        envelope=envelope,
    )
