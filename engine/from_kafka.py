"""from-kafka: Kafka topics into raw pools, exactly once.

One :class:`Ingest` reads any number of topics (every partition, assigned directly — no
consumer-group rebalancing) into any number of pools, one pool per topic::

    ingest = Ingest([IngestInput("Invoices", "Raw")], lake=lake, kafka=profile)
    ingest.run(stop_event, on_commit=print)      # blocks; or start() / stop() / status()

Exactly once (DESIGN.md, decision 4): every commit to a pool carries, in the same Delta
commit, the last offset it holds per (topic, partition) (Delta ``txn`` actions, see
:meth:`engine.lake.pools.Pool.append_records`). On start each partition is sought to the
pool's position + 1. A second process on the same input cannot duplicate anything: a
commit is made only on the snapshot it was planned on, and rows another writer already
committed are dropped when re-planning. Kafka's own group offsets are only a mirror
(:class:`_GroupMirror`), for lag tools; the Delta log is the source of truth.

Workers (``IngestOptions.workers_group``, ``zync from-kafka --workers-group G``): several
processes share the topics' partitions through the consumer group G (DESIGN.md: group
subscription only to spread work). Positions still come from the Delta log only: when the
group assigns a partition, it is started at the pool's position + 1 (explicit offsets,
never the group's committed offsets). When a partition is revoked or lost, the rows of it
still buffered are dropped and its next offset forgotten; a batch already on its way to
the commit stays safe (rows the pool already holds are dropped when re-planning). The
positions are mirrored to G itself through the subscribing consumer (an assign-mode
consumer committing to a group with active members is rejected).

The loop, in three threads, so consuming, decoding and the Delta write overlap
(DESIGN.md, "Measured facts"):

* the **consumer** (the thread calling :meth:`Ingest.run`) polls librdkafka and cuts a
  batch per pool when it holds ``max_records`` records or ``max_bytes`` bytes, or when
  its oldest record has waited ``interval`` seconds;
* the **decoder** turns a batch into pool rows: Avro through the polars batch decoder
  (one vectorised call when the batch has one schema id), JSON and Kafka Connect JSON in
  Python, the optional shaper, dead letters in place;
* the **writer** records the topic's Spark types in the pool *before* the data commit,
  commits records and dead letters in one commit, mirrors positions to the consumer
  group, runs the pool's upkeep (checkpoints, compaction) and reports to ``on_commit``.
  Commits are made one at a time, in consumption order.

Dead letters (``--on-error deadletter``, the default): a record whose key or value cannot
be decoded (bad magic byte, unknown schema id, truncated Avro, invalid JSON, a bad
Connect envelope) or that the shaper fails on becomes a pool row with ``deadletter``
set (stage, error, raw key and value bytes), committed with the records around it, and
counts as consumed. With ``on_error="fail"`` the batch holding it is not committed and
:class:`BadRecord` names its topic, partition and offset.

Formats: ``auto`` (the default) decides a topic's value format from its first records
(Confluent Avro when they start with the magic byte 0, Kafka Connect JSON for
``{"schema", "payload"}`` objects, else JSON) and keeps it for the run, so a stray record
of another format becomes a dead letter. Keys are decided the same way; a key that is
not JSON but UTF-8 text (a common plain-string key) is kept as a JSON string.

Nothing here prints: :meth:`Ingest.status` returns an :class:`IngestStats` snapshot (the
console polls it) and ``on_commit`` receives a :class:`CommitInfo` per commit.
"""

from __future__ import annotations

import gc
import logging
import os
import queue
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ZyncError
from engine.kafka.codecs.decoder import RecordDecoder
from engine.kafka.codecs.errors import DecodeError
from engine.kafka.codecs.formats import Format
from engine.lake.envelope import DEADLETTER_TYPE, KAFKA_TYPE, MARKER_TYPE, ROW_SCHEMA, record_rows
from engine.lake.pools import Lake, Pool, PoolError, TopicTypes

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message
    from pyspark.sql import SparkSession

    from engine.lake.shaper import Shaper
    from engine.settings.kafka import KafkaProfile
    from engine.settings.registry import RegistryProfile

log = logging.getLogger("engine.from_kafka")

ON_ERROR = ("deadletter", "fail")
FORMATS = ("auto", "avro", "connect-json", "json")
DECODE_STAGE = "decode"
#: Records whose JSON values are sampled per topic batch to infer a JSON topic's type.
JSON_TYPE_SAMPLES = 256
#: The window over which :attr:`PoolStats.rate` is averaged, in seconds.
RATE_WINDOW = 10.0
#: How often the consumer refreshes cached watermarks (lag) and looks for new partitions.
WATERMARK_EVERY = 1.0
METADATA_EVERY = 30.0
_POLL = 0.1
#: With the garbage collector paused, a full collection at most this often (seconds).
FULL_GC_EVERY = 60.0
#: A workers group rebalances eagerly (every member gives everything back, then gets its
#: share): one round per rebalance, where Tansu makes every round wait (DESIGN.md, "Tansu
#: quirks"); what a worker gives back costs only its buffered rows (positions are in the pool).
WORKERS_ASSIGNMENT = "range,roundrobin"
#: Who committed, in each commit's metadata (``zync pool show``, debugging races).
_WRITER = f"{socket.gethostname()}:{os.getpid()}"


class IngestError(ZyncError):
    """from-kafka cannot start or continue; the message says why and what to do."""


class BadRecord(IngestError):
    """A record could not be decoded or shaped and ``on_error`` is ``fail``."""

    def __init__(self, message: str, topic: str, partition: int, offset: int) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class IngestInput:
    """One topic and the pool it goes to."""

    topic: str
    pool: str


@dataclass(frozen=True)
class IngestOptions:
    """How :class:`Ingest` batches, decodes, reacts to bad records and keeps pools tidy.

    * ``max_records``/``max_bytes``/``interval``: a batch is committed when it holds that
      many records or bytes of values, or when its oldest record has waited that many
      seconds (so a record waits about ``interval`` plus one commit at most);
    * ``exit_after``: seconds without any record after which :meth:`Ingest.run` returns
      (``None``: run until stopped; in a workers group, counted from the latest rebalance);
    * ``value_format``/``key_format``: one of :data:`FORMATS`;
    * ``on_error``: ``deadletter`` or ``fail`` (see the module doc);
    * ``group``: the consumer group positions are mirrored to (``None``: ``zync-<pool>``
      per pool, or the workers group; ``""``: no mirroring);
    * ``workers_group``: share the partitions with other processes through this consumer
      group (``None``: assign every partition to this process). Positions are still read
      from the pools only; the mirror then goes to this group, through the subscribing
      consumer (``group`` naming another group mirrors there instead, from an assign-mode
      consumer: a group no consumer subscribes to);
    * ``shaper``: the SQL text of a shaper (:mod:`engine.lake.shaper`), ``shaper_source``
      names it in messages;
    * ``create_pools``: create missing pools instead of failing;
    * ``checkpoint_every``/``compact_small_files``: the pools' upkeep
      (:class:`engine.lake.maintenance.Upkeep`; 0 disables);
    * ``pause_gc``: pause Python's automatic garbage collection while running and collect
      between commits instead (faster; process-wide while the loop runs).
    """

    max_records: int = 100_000
    max_bytes: int = 64 * 2**20
    interval: float = 1.0
    exit_after: float | None = None
    value_format: str = "auto"
    key_format: str = "auto"
    on_error: str = "deadletter"
    group: str | None = None
    workers_group: str | None = None
    shaper: str | None = None
    shaper_source: str = "<shaper>"
    create_pools: bool = False
    checkpoint_every: int = 100
    compact_small_files: int = 200
    pause_gc: bool = True

    def __post_init__(self) -> None:
        if self.max_records < 1:
            raise IngestError("max_records must be at least 1")
        if self.max_bytes < 1:
            raise IngestError("max_bytes must be at least 1")
        if self.interval <= 0:
            raise IngestError("interval must be positive")
        if self.exit_after is not None and self.exit_after <= 0:
            raise IngestError("exit_after must be positive")
        if self.workers_group is not None and not self.workers_group.strip():
            raise IngestError("workers group must be a non-empty consumer group name")
        if self.on_error not in ON_ERROR:
            raise IngestError(f"on_error must be one of {', '.join(ON_ERROR)} (got {self.on_error!r})")
        for name in ("value_format", "key_format"):
            value = getattr(self, name)
            if value not in FORMATS:
                raise IngestError(
                    f"{name.replace('_', ' ')} must be one of {', '.join(FORMATS)} (got {value!r})"
                )


def default_group(pool: str) -> str:
    """The consumer group from-kafka mirrors a pool's positions to: ``zync-<pool>``."""
    return f"zync-{pool}"


def load_inputs(path: str | Path) -> list[IngestInput]:
    """The ``inputs:`` list of a YAML file (an ETL configuration): ``{topic, pool}`` each.

    Only ``inputs`` is read; the rest of the file belongs to the ETL. Each entry must
    have exactly ``topic`` and ``pool`` (strings); anything else is an error naming the
    file and the entry.
    """
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise IngestError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise IngestError(f"{path}:{where}: invalid YAML: {problem}") from None
    if not isinstance(data, dict) or "inputs" not in data:
        raise IngestError(f"{path}: no `inputs:` list (e.g. `inputs: [{{topic: T, pool: Raw}}]`)")
    entries = data["inputs"]
    if not isinstance(entries, list) or not entries:
        raise IngestError(f"{path}: `inputs` must be a non-empty list of {{topic, pool}}")
    inputs = []
    for i, entry in enumerate(entries, 1):
        where = f"{path}: inputs[{i}]"
        if not isinstance(entry, dict):
            raise IngestError(f"{where}: expected a mapping with topic and pool")
        unknown = sorted(set(entry) - {"topic", "pool"})
        if unknown:
            raise IngestError(f"{where}: unknown key {unknown[0]!r}; an input has topic and pool")
        for key in ("topic", "pool"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise IngestError(f"{where}: `{key}` must be a non-empty string")
        inputs.append(IngestInput(entry["topic"].strip(), entry["pool"].strip()))
    return inputs


# --------------------------------------------------------------------------- stats


@dataclass(frozen=True)
class PartitionStats:
    """One input partition: what the pool holds and what Kafka says it has."""

    topic: str
    partition: int
    lake_offset: int | None
    low: int | None = None
    high: int | None = None

    @property
    def lag(self) -> int | None:
        """Records in Kafka after the pool's position (never negative; None: unknown).

        From the high watermark, which Tansu can report behind the log's end: a lag of 0
        there means "probably caught up", never a position."""
        if self.high is None:
            return None
        done = self.lake_offset + 1 if self.lake_offset is not None else (self.low or 0)
        return max(0, self.high - done)


@dataclass(frozen=True)
class CommitRef:
    """The last commit of a loop (for the console's loop table)."""

    pool: str
    version: int
    at: float
    records: int


@dataclass(frozen=True)
class PoolStats:
    """One pool of a running ingest. Counts are since the ingest started."""

    pool: str
    topics: tuple[str, ...]
    version: int | None = None
    records: int = 0
    dead_letters: int = 0
    skipped: int = 0
    commits: int = 0
    last_commit_at: float | None = None
    last_commit_records: int = 0
    rate: float = 0.0
    group: str | None = None
    group_error: str | None = None
    partitions: tuple[PartitionStats, ...] = ()

    @property
    def lag(self) -> int | None:
        lags = [p.lag for p in self.partitions]
        return None if not lags or any(lag is None for lag in lags) else sum(lags)  # type: ignore[misc]

    def topic_lag(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        for p in self.partitions:
            lag = p.lag
            if p.topic not in out:
                out[p.topic] = lag
            else:
                prev = out[p.topic]
                out[p.topic] = None if prev is None or lag is None else prev + lag
        return out


@dataclass(frozen=True)
class IngestStats:
    """A snapshot of an :class:`Ingest` (``state``: idle, starting, running, stopping,
    stopped or failed)."""

    state: str
    pools: tuple[PoolStats, ...] = ()
    started_at: float | None = None
    consumed: int = 0
    last_commit: CommitRef | None = None
    rate: float = 0.0
    error: str | None = None
    idle_seconds: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def records(self) -> int:
        return sum(p.records for p in self.pools)

    @property
    def dead_letters(self) -> int:
        return sum(p.dead_letters for p in self.pools)

    @property
    def lag(self) -> int | None:
        lags = [p.lag for p in self.pools]
        return None if not lags or any(lag is None for lag in lags) else sum(lags)  # type: ignore[misc]

    def pool(self, name: str) -> PoolStats | None:
        return next((p for p in self.pools if p.pool == name), None)


@dataclass(frozen=True)
class CommitInfo:
    """One commit of one pool, as ``on_commit`` receives it (from the committer thread).

    ``seconds``: the batch's time in the committer; ``timings``: its parts (extract,
    decode, build, commit — the commit includes recording types and re-planning).
    """

    pool: str
    version: int
    records: int
    dead_letters: int
    skipped: int
    positions: Mapping[tuple[str, int], int]
    seconds: float
    timings: Mapping[str, float]
    upkeep: tuple[str, ...]
    stats: IngestStats

    def topic_lag(self) -> dict[str, int | None]:
        pool = self.stats.pool(self.pool)
        return pool.topic_lag() if pool else {}


# --------------------------------------------------------------------------- decoding


_AUTO_SAMPLE = 200


def _sniff(datas: Sequence[bytes | None]) -> Format | None:
    """The format most of the first records look like (None: only tombstones seen)."""
    votes: Counter[Format] = Counter()
    for data in datas:
        if data is None or not len(data):
            continue
        if data[0] == 0 and len(data) >= 5:
            votes[Format.AVRO] += 1
        elif data.lstrip()[:1] == b"{" and b'"payload"' in data and b'"schema"' in data:
            votes[Format.CONNECT_JSON] += 1
        else:
            votes[Format.JSON] += 1
        if sum(votes.values()) >= _AUTO_SAMPLE:
            break
    return votes.most_common(1)[0][0] if votes else None


class _Part:
    """Decodes the keys or the values of one topic, and knows their Spark type."""

    def __init__(self, topic: str, part: str, fmt: str, lookup: Callable[[], Any]) -> None:
        self.topic = topic
        self.part = part
        self.fixed = None if fmt == "auto" else Format.parse(fmt)
        self.format: Format | None = self.fixed
        self._lookup = lookup
        self._decoder: RecordDecoder | None = None
        self._types: dict[Any, Any] = {}  # schema id / connect schema text -> Spark type

    def decoder(self, datas: Sequence[bytes | None]) -> RecordDecoder:
        if self.format is None:
            self.format = _sniff(datas)
            if self.format is None:  # tombstones only so far: any decoder reads them
                return RecordDecoder(Format.JSON)
        if self._decoder is None:
            lookup = self._lookup() if self.format is Format.AVRO else None
            self._decoder = RecordDecoder(self.format, lookup)
        return self._decoder

    def decode(self, datas: Sequence[bytes | None]) -> tuple[list[Any], Any]:
        """Per record: JSON text, None (null) or a DecodeError; and the batch's Spark type."""
        decoder = self.decoder(datas)
        fmt = decoder.format
        if fmt is Format.AVRO:
            texts = None
            try:  # the 5-byte Confluent headers (magic byte, schema id) of the batch
                headers = {d[:5] for d in datas}  # type: ignore[index]
                texts = self._avro_one_schema(decoder, datas, headers)
            except TypeError:  # tombstones in the batch
                headers = {d[:5] for d in datas if d is not None}
            if texts is None:
                texts = decoder.decode_batch_json(datas)
            return texts, self._avro_type(decoder, headers)
        if fmt is Format.CONNECT_JSON:
            texts = decoder.decode_batch_json(datas)
            return texts, self._connect_type(datas, texts)
        return self._json(datas)

    @staticmethod
    def _avro_one_schema(
        decoder: RecordDecoder, datas: Sequence[bytes | None], headers: set[bytes]
    ) -> list[Any] | None:
        """The common case, fast: every record written with one schema and no tombstone
        (one vectorised batch, none of the per-record splitting). None: not the case."""
        if len(headers) != 1:
            return None
        header = next(iter(headers))
        if len(header) != 5 or header[0] != 0:
            return None
        try:
            schema = decoder.avro_schema(int.from_bytes(header[1:5], "big"))
        except DecodeError:
            return None  # the general path makes the dead letters
        batch = schema.decode_batch_to_json([d[5:] for d in datas])  # type: ignore[index]
        texts: list[Any] = list(batch.texts)
        for j, error in batch.errors:
            texts[j] = error
        return texts

    def _avro_type(self, decoder: RecordDecoder, headers: set[bytes]) -> Any:
        from engine.kafka.typemap.to_spark import avro_to_spark
        from engine.sparktypes import merge_spark_types

        merged = None
        for raw in sorted(h[1:5] for h in headers if len(h) == 5 and h[0] == 0):
            schema_id = int.from_bytes(raw, "big")
            spark_type = self._types.get(schema_id)
            if spark_type is None:
                try:  # cached by the decoder; an unknown id made dead letters already
                    spark_type = avro_to_spark(decoder.avro_schema(schema_id).schema)
                except DecodeError:
                    continue
                self._types[schema_id] = spark_type
            merged = spark_type if merged is None else merge_spark_types(merged, spark_type)
        return merged

    def _connect_type(self, datas: Sequence[bytes | None], texts: list[Any]) -> Any:
        from engine.kafka.codecs import connect_json
        from engine.kafka.typemap.to_spark import connect_to_spark
        from engine.sparktypes import merge_spark_types

        merged = None
        seen: set[bytes] = set()
        for data, text in zip(datas, texts, strict=True):
            if data is None or isinstance(text, DecodeError):
                continue
            # JsonConverter writes the schema first: the bytes before "payload" name it
            cut = data.rfind(b'"payload"')
            head = bytes(data[:cut]) if cut > 0 else bytes(data)
            if head in seen:
                continue
            seen.add(head)
            spark_type = self._types.get(head)
            if spark_type is None:
                spark_type = connect_to_spark(connect_json.decode(data).schema)
                self._types[head] = spark_type
            merged = spark_type if merged is None else merge_spark_types(merged, spark_type)
        return merged

    def _json(self, datas: Sequence[bytes | None]) -> tuple[list[Any], Any]:
        from engine.kafka.codecs import plain_json
        from engine.kafka.typemap.to_spark import json_value_to_spark

        out: list[Any] = [None] * len(datas)
        samples: list[Any] = []
        step = max(1, len(datas) // JSON_TYPE_SAMPLES)
        for i, data in enumerate(datas):
            if data is None:
                continue
            try:
                value = plain_json.decode(data)
            except DecodeError as exc:
                if self.part == "key":
                    try:  # a plain-text key: keep it as a JSON string
                        value = bytes(data).decode("utf-8")
                    except UnicodeDecodeError:
                        out[i] = exc
                        continue
                else:
                    out[i] = exc
                    continue
            out[i] = plain_json.dumps(value)
            if i % step == 0 and len(samples) < JSON_TYPE_SAMPLES:
                samples.append(value)
        return out, (json_value_to_spark(samples) if samples else None)


# --------------------------------------------------------------------------- batches


@dataclass
class _Buffer:
    pool: str
    messages: list[Message] = field(default_factory=list)
    nbytes: int = 0
    first_at: float = 0.0

    def add(self, messages: list[Message], now: float) -> None:
        if not self.messages:
            self.first_at = now
        self.messages.extend(messages)
        self.nbytes += sum(map(len, messages))

    def take(self) -> list[Message]:
        messages, self.messages, self.nbytes = self.messages, [], 0
        return messages

    def drop(self, gone: set[tuple[str, int]]) -> int:
        """Forget the messages of partitions this worker no longer owns; how many."""
        keep = [m for m in self.messages if (m.topic(), m.partition()) not in gone]
        dropped = len(self.messages) - len(keep)
        if dropped:
            self.messages = keep
            self.nbytes = sum(map(len, keep))
        return dropped


@dataclass
class _Batch:
    pool: str
    messages: list[Message]
    #: the count of rebalances when the batch was cut (workers group)
    generation: int = 0


@dataclass
class _Prepared:
    """A batch decoded and shaped, ready for its commit."""

    pool: str
    rows: pa.Table
    positions: dict[tuple[str, int], int]
    wanted: dict[str, TopicTypes]
    dead: int
    started: float
    timings: dict[str, float]
    generation: int = 0


class _PoolState:
    """The committer's view of one pool (touched by the committer thread, read under lock)."""

    def __init__(self, pool: Pool, topics: list[str], group: str | None) -> None:
        self.pool = pool
        self.topics = topics
        self.group = group
        self.records = 0
        self.dead_letters = 0
        self.skipped = 0
        self.commits = 0
        self.version: int | None = pool.version
        self.last_commit_at: float | None = None
        self.last_commit_records = 0
        self.window: deque[tuple[float, int]] = deque()
        self.positions: dict[tuple[str, int], int | None] = {}
        self.next: dict[tuple[str, int], int] = {}
        self.recorded: dict[str, TopicTypes] = {}
        self.upkeep: Any = None

    def rate(self, now: float) -> float:
        while self.window and now - self.window[0][0] > RATE_WINDOW:
            self.window.popleft()
        if not self.window:
            return 0.0
        span = max(now - self.window[0][0], 1.0)
        return sum(n for _, n in self.window) / span


class _GroupMirror:
    """Mirrors committed positions to a consumer group, off the commit path.

    A thread holding an assign()-mode consumer with the group's id commits the latest
    positions it was given (older ones are superseded, never queued). A failed group
    commit is only reported: the Delta log is the source of truth.
    """

    def __init__(self, profile: KafkaProfile, group: str) -> None:
        self.group = group
        self._profile = profile
        self._latest: dict[tuple[str, int], int] = {}
        self._pending = False
        self._cond = threading.Condition()
        self._closing = False
        self.error: str | None = None
        self.committed: dict[tuple[str, int], int] = {}
        self._thread = threading.Thread(target=self._run, name=f"zync-mirror-{group}", daemon=True)
        self._thread.start()

    def publish(self, positions: Mapping[tuple[str, int], int]) -> None:
        with self._cond:
            self._latest.update(positions)
            self._pending = True
            self._cond.notify()

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        from engine.kafka.clients import consumer

        client = None
        try:
            client = consumer(self._profile, group=self.group)
            while True:
                with self._cond:
                    while not self._pending and not self._closing:
                        self._cond.wait()
                    if not self._pending and self._closing:
                        return
                    todo = dict(self._latest)
                    self._pending = False
                offsets = [TopicPartition(t, p, off + 1) for (t, p), off in sorted(todo.items())]
                try:
                    client.commit(offsets=offsets, asynchronous=False)
                    self.committed.update(todo)
                    self.error = None
                except KafkaException as exc:
                    self.error = f"group {self.group}: {exc.args[0].str()}"
                    log.warning("cannot mirror positions to %s", self.error)
        except Exception as exc:  # noqa: BLE001 - a mirror never stops the ingest
            self.error = f"group {self.group}: {exc}"
            log.warning("group mirror stopped: %s", self.error)
        finally:
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001, S110
                    pass


class _SubscribedMirror:
    """Mirrors committed positions to the workers group, through the subscribing consumer.

    A group with active members rejects commits from a consumer that is not one of them
    (an assign-mode consumer has no member id or generation), so in a workers group the
    consumer thread itself commits, asynchronously and at most every :attr:`EVERY`
    seconds, the latest positions of the partitions it owns. As with
    :class:`_GroupMirror`, a failed commit is only reported (and retried with the next
    positions): the Delta log is the source of truth.
    """

    EVERY = 0.5

    def __init__(self, group: str) -> None:
        self.group = group
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, int], int] = {}
        self._dirty = False
        self._next_at = 0.0
        self.error: str | None = None
        self.committed: dict[tuple[str, int], int] = {}

    def publish(self, positions: Mapping[tuple[str, int], int]) -> None:
        """The pool's positions: after a commit (writer thread; partitions this worker
        may no longer own too), when partitions are assigned (consumer thread)."""
        with self._lock:
            for tp, off in positions.items():
                if off > self._latest.get(tp, -1):  # positions only grow
                    self._latest[tp] = off
                    self._dirty = True

    def flush(self, client: Consumer, owned: set[tuple[str, int]], *, final: bool = False) -> None:
        """From the consumer thread: commit what changed for the partitions it owns
        (``final``: now and synchronously, before the consumer closes; everything not
        confirmed yet, as an asynchronous commit still on its way may be lost then)."""
        from confluent_kafka import KafkaException, TopicPartition

        now = time.monotonic()
        with self._lock:
            if not final and (not self._dirty or now < self._next_at):
                return
            todo = {
                tp: off
                for tp, off in self._latest.items()
                if tp in owned and self.committed.get(tp) != off
            }
            self._dirty = False
            self._next_at = now + self.EVERY
        if not todo:
            return
        offsets = [TopicPartition(t, p, off + 1) for (t, p), off in sorted(todo.items())]
        try:
            if final:
                self.on_commit(None, client.commit(offsets=offsets, asynchronous=False))
            else:
                client.commit(offsets=offsets, asynchronous=True)  # -> on_commit
        except KafkaException as exc:
            self._failed(exc.args[0].str())

    def on_commit(self, error: Any, partitions: Sequence[Any] | None) -> None:
        """The consumer's ``on_commit`` callback (served by its poll calls)."""
        if error is not None:
            self._failed(error.str() if hasattr(error, "str") else str(error))
            return
        failed = [tp for tp in partitions or () if tp.error is not None]
        with self._lock:
            for tp in partitions or ():
                if tp.error is None and tp.offset >= 0:
                    self.committed[(tp.topic, tp.partition)] = tp.offset - 1
        if failed:
            self._failed(failed[0].error.str())
        else:
            self.error = None

    def _failed(self, reason: str) -> None:
        self.error = f"group {self.group}: {reason}"
        with self._lock:
            self._dirty = True  # retried with the next flush
        log.warning("cannot mirror positions to %s", self.error)

    def close(self, timeout: float = 5.0) -> None:
        """Nothing to stop: the consumer thread flushes before closing its consumer."""


# --------------------------------------------------------------------------- the loop


class Ingest:
    """from-kafka for a set of topic → pool inputs (see the module doc).

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
    ) -> None:
        self.inputs = list(inputs)
        if not self.inputs:
            raise IngestError("nothing to ingest: give at least one topic and pool")
        seen: dict[str, str] = {}
        for item in self.inputs:
            if item.topic in seen and seen[item.topic] != item.pool:
                raise IngestError(
                    f"topic {item.topic!r} is an input of two pools ({seen[item.topic]}, "
                    f"{item.pool}): run one from-kafka per pool for it"
                )
            seen[item.topic] = item.pool
        self.inputs = [IngestInput(t, p) for t, p in seen.items()]
        self.lake = lake
        self.kafka = kafka
        self.options = options or IngestOptions()
        self._registry_profile = registry
        self._spark = spark
        self._shaper: Shaper | None = None
        if self.options.shaper is not None:
            from engine.lake.shaper import Shaper

            self._shaper = Shaper(self.options.shaper, source=self.options.shaper_source)

        self._lock = threading.Lock()
        self._state = "idle"
        self._error: BaseException | None = None
        self._started_at: float | None = None
        self._consumed = 0
        self._last_commit: CommitRef | None = None
        self._last_record_at: float | None = None
        self._notes: deque[str] = deque(maxlen=20)
        self._pools: dict[str, _PoolState] = {}
        self._route: dict[str, str] = {}
        self._parts: dict[tuple[str, str], _Part] = {}
        self._watermarks: dict[tuple[str, int], tuple[int, int]] = {}
        self._mirrors: dict[str, _GroupMirror | _SubscribedMirror] = {}
        self._seeks: dict[tuple[str, int], int] = {}
        # workers group: what the group gave this process (consumer thread writes, under
        # the lock), rebalances so far, the consumer thread's views of the Delta logs
        self._grouped = self.options.workers_group is not None
        self._owned: set[tuple[str, int]] = set()
        self._rebalances = 0
        self._views: dict[str, Any] = {}
        self._buffers: dict[str, _Buffer] = {}
        self._queue: queue.Queue[_Batch | None] = queue.Queue(maxsize=1)
        self._prepared: queue.Queue[_Prepared | None] = queue.Queue(maxsize=1)
        self._inflight = 0
        self._handed = 0
        self._partition_counts: dict[str, int] = {}
        self._lookup: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._on_commit: Callable[[CommitInfo], None] | None = None
        self._gc_paused = False
        self._full_gc_at = 0.0

    # -- service API --------------------------------------------------------------------

    def start(self, on_commit: Callable[[CommitInfo], None] | None = None) -> None:
        """Run in a background thread; :meth:`status` tells how it goes."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop = threading.Event()

        def target() -> None:
            try:
                self.run(self._stop, on_commit=on_commit)
            except BaseException:  # noqa: BLE001 - kept in the status
                pass

        with self._lock:
            self._state = "starting"
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
        return self._state in ("starting", "running", "stopping")

    def status(self) -> IngestStats:
        """A consistent snapshot of the loop (cheap; safe from any thread)."""
        with self._lock:
            pools = []
            total_rate = 0.0
            for name, st in self._pools.items():
                rate = st.rate(time.monotonic())
                total_rate += rate
                mirror = self._mirrors.get(name)
                partitions = tuple(
                    PartitionStats(
                        t,
                        p,
                        off,
                        *(self._watermarks.get((t, p)) or (None, None)),
                    )
                    for (t, p), off in sorted(st.positions.items())
                )
                pools.append(
                    PoolStats(
                        pool=name,
                        topics=tuple(st.topics),
                        version=st.version,
                        records=st.records,
                        dead_letters=st.dead_letters,
                        skipped=st.skipped,
                        commits=st.commits,
                        last_commit_at=st.last_commit_at,
                        last_commit_records=st.last_commit_records,
                        rate=rate,
                        group=st.group,
                        group_error=mirror.error if mirror else None,
                        partitions=partitions,
                    )
                )
            idle = None
            if self._last_record_at is not None:
                idle = max(0.0, time.monotonic() - self._last_record_at)
            error = self._error
            return IngestStats(
                state=self._state,
                pools=tuple(pools),
                started_at=self._started_at,
                consumed=self._consumed,
                last_commit=self._last_commit,
                rate=total_rate,
                error=_describe(error) if error is not None else None,
                idle_seconds=idle if self._state == "running" else None,
                notes=tuple(self._notes),
            )

    stats = status

    # -- the loop -----------------------------------------------------------------------

    def run(
        self,
        stop: threading.Event | None = None,
        on_commit: Callable[[CommitInfo], None] | None = None,
    ) -> IngestStats:
        """Ingest until ``stop`` is set, ``exit_after`` seconds pass without a record, or
        something fails (raised: :class:`IngestError`, :class:`BadRecord`,
        ``KafkaUnavailable``, ...). A stop commits what was consumed first.

        ``on_commit`` is called from the committer thread after each commit.
        """
        stop = stop or threading.Event()
        self._on_commit = on_commit
        with self._lock:  # a fresh run (the console may start a stopped loop again)
            self._state = "starting"
            self._error = None
            self._started_at = time.time()
            self._consumed = 0
            self._last_record_at = None
            self._pools = {}
            self._mirrors = {}
            self._seeks = {}
            self._watermarks = {}
            self._owned = set()
            self._views = {}
            self._inflight = 0
            self._queue = queue.Queue(maxsize=1)
            self._prepared = queue.Queue(maxsize=1)
        consumer = None
        committer = None
        graceful = False
        gc_paused = self.options.pause_gc and gc.isenabled()
        try:
            self._open_pools()
            if self._shaper is not None:
                self._shaper.check_syntax(self._get_spark())
            consumer = self._subscribe() if self._grouped else self._assign()
            committer = (
                threading.Thread(target=self._decode_loop, name="zync-decode", daemon=True),
                threading.Thread(target=self._write_loop, name="zync-write", daemon=True),
            )
            for thread in committer:
                thread.start()
            with self._lock:
                self._state = "running"
            if gc_paused:
                # batches are millions of short-lived objects and no cycles: automatic
                # collections cost more than they find (DESIGN.md, measured). Collect
                # between commits instead (see _collect), so a long run stays bounded.
                gc.disable()
                self._gc_paused = True
                self._full_gc_at = time.monotonic()
            graceful = self._consume(consumer, stop)
        except BaseException as exc:
            self._fail(exc)
        finally:
            with self._lock:
                if self._state == "running":
                    self._state = "stopping"
            if committer is not None:
                self._finish(committer, graceful)
            if gc_paused:
                self._gc_paused = False
                gc.enable()
            if consumer is not None:
                if self._grouped and graceful:
                    self._flush_mirror(consumer, final=True)
                try:
                    consumer.close()  # a workers group: leaves it (the others rebalance)
                except Exception:  # noqa: BLE001, S110
                    pass
            for mirror in set(self._mirrors.values()):
                mirror.close()
            with self._lock:
                self._state = "failed" if self._error is not None else "stopped"
        if self._error is not None:
            raise self._error
        return self.status()

    # setup

    def _open_pools(self) -> None:
        by_pool: dict[str, list[str]] = {}
        for item in self.inputs:
            by_pool.setdefault(item.pool, []).append(item.topic)
            self._route[item.topic] = item.pool
        from engine.lake.maintenance import Upkeep

        for name, topics in by_pool.items():
            if self.options.create_pools:
                pool = self.lake.create_pool(name, exist_ok=True)
            else:
                pool = self.lake.open_pool(name)
            if pool.kind != "raw":
                raise IngestError(
                    f"pool {name!r} is a {pool.kind} pool: from-kafka writes raw pools"
                )
            group = self.options.group
            if group is None:
                group = self.options.workers_group or default_group(name)
            state = _PoolState(pool, topics, group or None)
            state.upkeep = Upkeep(
                checkpoint_every=self.options.checkpoint_every,
                compact_small_files=self.options.compact_small_files,
            )
            with self._lock:
                self._pools[name] = state
            for topic in topics:
                lookup = self._registry_lookup
                self._parts[(topic, "key")] = _Part(topic, "key", self.options.key_format, lookup)
                self._parts[(topic, "value")] = _Part(
                    topic, "value", self.options.value_format, lookup
                )

    def _registry_lookup(self) -> Any:
        if self._lookup is None:
            from engine.kafka.registry_client import RegistrySchemas
            from engine.settings.registry import load_registry_profile

            profile = self._registry_profile or load_registry_profile()
            self._lookup = RegistrySchemas(profile)
        return self._lookup

    def _get_spark(self) -> SparkSession:
        spark = self._spark
        if spark is None:
            from engine.settings.spark import load_spark_settings
            from engine.spark import get_spark

            spark = get_spark(load_spark_settings())
        elif callable(spark) and not hasattr(spark, "sql"):
            spark = spark()
        self._spark = spark
        return spark  # type: ignore[return-value]

    def _topics(self) -> dict[str, int]:
        """{topic: partition count} of the inputs; every one must exist."""
        from engine.kafka.clients import check_reachable, where

        topics = check_reachable(self.kafka)
        missing = [i.topic for i in self.inputs if not topics.get(i.topic)]
        if missing:
            known = ", ".join(sorted(t for t in topics if not t.startswith("__"))) or "none"
            raise IngestError(
                f"topic {missing[0]!r} does not exist on {where(self.kafka)} (topics: {known})"
            )
        return {i.topic: topics[i.topic] for i in self.inputs}

    def _assign(self) -> Consumer:
        from engine.kafka.clients import consumer

        topics = self._topics()
        client = consumer(self.kafka)
        assignment = []
        for item in self.inputs:
            state = self._pools[item.pool]
            for partition in range(topics[item.topic]):
                assignment.append(self._start_at(state, item.topic, partition))
        client.assign(assignment)
        self._partition_counts = {i.topic: topics[i.topic] for i in self.inputs}
        return client

    def _start_at(
        self,
        state: _PoolState,
        topic: str,
        partition: int,
        *,
        own_table: bool = False,
        table: Any = None,
    ) -> Any:
        """Where (topic, partition) starts: right after the pool's position.

        ``own_table``: read the Delta log with a table object of its own (the writer
        thread owns the pool's while the loop runs); ``table``: with this one."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        from engine.lake import delta
        from engine.lake.pools import ingest_app

        if own_table and table is None:
            table = delta.open_table(state.pool.path)
        if table is not None:
            position = table.transaction_version(ingest_app(topic, partition))
        else:
            position = state.pool.position(topic, partition)
        tp = (topic, partition)
        with self._lock:
            state.positions[tp] = position
            if position is None:
                state.next.pop(tp, None)
            else:
                state.next[tp] = position + 1
        if position is None:
            return TopicPartition(topic, partition, OFFSET_BEGINNING)
        return TopicPartition(topic, partition, position + 1)

    # workers group (consumer thread: the callbacks run inside consumer.consume())

    def _subscribe(self) -> Consumer:
        from engine.kafka.clients import consumer

        group = self.options.workers_group
        assert group is not None
        topics = self._topics()
        extra: dict[str, Any] = {"partition.assignment.strategy": WORKERS_ASSIGNMENT}
        mirrors = {st.group for st in self._pools.values() if st.group == group}
        if mirrors:
            mirror = _SubscribedMirror(group)
            extra["on_commit"] = mirror.on_commit
            for name, st in self._pools.items():
                if st.group == group:
                    self._mirrors[name] = mirror
        client = consumer(self.kafka, group=group, extra=extra)
        client.subscribe(
            list(topics),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        self._partition_counts = topics
        with self._lock:
            self._notes.append(f"joining workers group {group}")
        return client

    def _view(self, pool: str) -> Any:
        """The consumer thread's own, fresh view of a pool's Delta log."""
        from engine.lake import delta

        view = self._views.get(pool)
        if view is None:
            view = self._views[pool] = delta.open_table(self._pools[pool].pool.path)
        else:
            view.update_incremental()
        return view

    def _on_assign(self, client: Consumer, partitions: list[Any]) -> None:
        """The group gave us partitions: start each right after the pool's position
        (never at the group's committed offsets: the Delta log holds the positions)."""
        views: dict[str, Any] = {}
        starts = []
        for tp in partitions:
            name = self._route.get(tp.topic)
            if name is None:  # not an input (cannot happen: we subscribe to inputs only)
                continue
            if name not in views:
                views[name] = self._view(name)
            state = self._pools[name]
            starts.append(self._start_at(state, tp.topic, tp.partition, table=views[name]))
        with self._lock:
            self._rebalances += 1
            self._owned.update((s.topic, s.partition) for s in starts)
            for s in starts:
                self._seeks.pop((s.topic, s.partition), None)
            if starts:
                self._notes.append("assigned " + _tp_list(starts))
        # the pool's positions (a start is position + 1; OFFSET_BEGINNING is negative)
        held = {(s.topic, s.partition): s.offset - 1 for s in starts if s.offset >= 0}
        for mirror in set(self._mirrors.values()):
            if isinstance(mirror, _SubscribedMirror):
                mirror.publish(held)  # the group's offsets catch up with the pool's
        client.assign(starts)  # eager (WORKERS_ASSIGNMENT): the whole new assignment
        log.info("workers group %s: assigned %s", self.options.workers_group, _tp_list(starts))

    def _on_revoke(self, client: Consumer, partitions: list[Any]) -> None:
        self._give_up(client, partitions, "revoked")

    def _on_lost(self, client: Consumer, partitions: list[Any]) -> None:
        self._give_up(client, partitions, "lost")

    def _give_up(self, client: Consumer, partitions: list[Any], how: str) -> None:
        """Partitions went to another worker: drop their buffered (uncommitted) rows and
        forget where they were. A batch already handed to the committer is safe: rows the
        pool holds are dropped when it is planned, and see :meth:`_write` for the rest."""
        gone = {(tp.topic, tp.partition) for tp in partitions}
        dropped = sum(buffer.drop(gone) for buffer in self._buffers.values())
        with self._lock:
            self._rebalances += 1
            self._owned -= gone
            for tp in gone:
                self._seeks.pop(tp, None)
                for state in self._pools.values():
                    state.next.pop(tp, None)
                    state.positions.pop(tp, None)
            if gone:
                more = f" ({dropped:,} buffered records dropped)" if dropped else ""
                self._notes.append(f"{how} {_tp_list(partitions)}{more}")
        try:
            client.unassign()  # eager (WORKERS_ASSIGNMENT): everything goes back
        except Exception as exc:  # noqa: BLE001 - the client unassigns them anyway
            log.debug("unassign after %s partitions failed: %s", how, exc)
        log.info("workers group %s: %s %s", self.options.workers_group, how, _tp_list(partitions))

    def _flush_mirror(self, client: Consumer, *, final: bool = False) -> None:
        mirror = next((m for m in self._mirrors.values() if isinstance(m, _SubscribedMirror)), None)
        if mirror is None:
            return
        with self._lock:
            owned = set(self._owned)
        try:
            mirror.flush(client, owned, final=final)
        except Exception as exc:  # noqa: BLE001 - a mirror never stops the ingest
            log.warning("cannot mirror positions to %s: %s", mirror.group, exc)

    # consumer thread

    def _consume(self, consumer: Consumer, stop: threading.Event) -> bool:
        """Poll and cut batches until stopped (True) or idle for exit_after (True)."""
        opts = self.options
        buffers = self._buffers = {name: _Buffer(name) for name in self._pools}
        single = next(iter(buffers.values())) if len(buffers) == 1 else None
        in_group = self._grouped
        route = self._route
        started = time.monotonic()
        last_record = started
        next_watermarks = started
        next_metadata = started + METADATA_EVERY
        want = min(opts.max_records, 50_000)
        handed = self._handed
        while not stop.is_set():
            if self._error is not None:
                return False
            rebalances = self._rebalances
            messages = consumer.consume(want, _POLL)
            now = time.monotonic()
            if messages:
                good = [m for m in messages if m.error() is None]
                if len(good) != len(messages):
                    self._message_errors([m for m in messages if m.error() is not None])
                if in_group and self._rebalances != rebalances:
                    # partitions moved during this call: keep only what is still ours
                    with self._lock:
                        owned = set(self._owned)
                    good = [m for m in good if (m.topic(), m.partition()) in owned]
                if good:
                    last_record = now
                    with self._lock:
                        self._consumed += len(good)
                        self._last_record_at = now
                    if single is not None:
                        self._fill(single, good, now)
                    else:
                        grouped: dict[str, list[Message]] = {}
                        for m in good:
                            grouped.setdefault(route[m.topic()], []).append(m)
                        for name, msgs in grouped.items():
                            self._fill(buffers[name], msgs, now)
            if in_group and (self._rebalances != rebalances or not self._rebalances):
                # joining the group or taking partitions over is not idleness: exit_after
                # counts from the latest rebalance
                last_record = max(last_record, now)
            for buffer in buffers.values():
                if buffer.messages and now - buffer.first_at >= opts.interval:
                    self._hand_over(buffer)
            if self._seeks:
                self._apply_seeks(consumer)
            if now >= next_watermarks or self._handed != handed:
                # fresh before a batch is committed, so its commit reports a current lag
                handed = self._handed
                self._read_watermarks(consumer)
                next_watermarks = now + WATERMARK_EVERY
            if in_group:
                self._flush_mirror(consumer)
            if now >= next_metadata:
                if not in_group:  # a subscription picks new partitions up by itself
                    self._new_partitions(consumer)
                next_metadata = now + METADATA_EVERY
                if self._gc_paused and time.monotonic() - self._full_gc_at >= FULL_GC_EVERY:
                    self._collect()  # idle for long: no commit collects
            if (
                opts.exit_after is not None
                and now - last_record >= opts.exit_after
                and not any(b.messages for b in buffers.values())
                and self._inflight == 0
            ):
                with self._lock:
                    self._notes.append(f"idle for {opts.exit_after:g}s: exiting")
                return True
        for buffer in buffers.values():  # stopped: commit what we hold
            if buffer.messages and self._error is None:
                self._hand_over(buffer)
        return True

    def _fill(self, buffer: _Buffer, messages: list[Message], now: float) -> None:
        opts = self.options
        while messages:
            room = opts.max_records - len(buffer.messages)
            take, messages = messages[:room], messages[room:]
            buffer.add(take, now)
            if len(buffer.messages) >= opts.max_records or buffer.nbytes >= opts.max_bytes:
                self._hand_over(buffer)

    def _hand_over(self, buffer: _Buffer) -> None:
        batch = _Batch(buffer.pool, buffer.take(), self._rebalances)
        self._handed += 1
        with self._lock:
            self._inflight += 1
        while True:
            if self._error is not None:
                with self._lock:
                    self._inflight -= 1
                return
            try:
                self._queue.put(batch, timeout=0.2)
                return
            except queue.Full:
                continue

    def _message_errors(self, messages: list[Message]) -> None:
        from engine.kafka.clients import KafkaUnavailable

        for m in messages:
            error = m.error()
            if error.fatal():
                raise KafkaUnavailable(f"Kafka reported a fatal error: {error.str()}")
            with self._lock:
                self._notes.append(f"{m.topic()}[{m.partition()}]: {error.str()}")
            log.warning("consumer error on %s[%s]: %s", m.topic(), m.partition(), error.str())

    def _apply_seeks(self, consumer: Consumer) -> None:
        """Skip ahead to where another writer's commits got (only ever forward)."""
        from confluent_kafka import KafkaException, TopicPartition

        with self._lock:
            seeks, self._seeks = self._seeks, {}
            if self._grouped:  # only partitions this worker still owns
                seeks = {tp: off for tp, off in seeks.items() if tp in self._owned}
        for (topic, partition), offset in seeks.items():
            try:
                current = consumer.position([TopicPartition(topic, partition)])[0].offset
                if current < 0 or current < offset:
                    consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException as exc:  # only an optimisation: rows are dropped anyway
                log.debug("seek %s[%s] to %s failed: %s", topic, partition, offset, exc)

    def _read_watermarks(self, consumer: Consumer) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        marks = {}
        if self._grouped:
            with self._lock:
                partitions = sorted(self._owned)
        else:
            partitions = [
                (item.topic, partition)
                for item in self.inputs
                for partition in range(self._partition_counts.get(item.topic, 0))
            ]
        for topic, partition in partitions:
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), cached=True
                )
            except KafkaException:
                continue
            if high >= 0:
                marks[(topic, partition)] = (max(low, 0), high)
        with self._lock:
            self._watermarks.update(marks)

    def _new_partitions(self, consumer: Consumer) -> None:
        from confluent_kafka import KafkaException

        try:
            metadata = consumer.list_topics(timeout=5)
        except KafkaException:
            return
        added = []
        for item in self.inputs:
            topic = metadata.topics.get(item.topic)
            if topic is None or topic.error is not None:
                continue
            have = self._partition_counts.get(item.topic, 0)
            if len(topic.partitions) > have:
                state = self._pools[item.pool]
                for partition in range(have, len(topic.partitions)):
                    added.append(self._start_at(state, item.topic, partition, own_table=True))
                self._partition_counts[item.topic] = len(topic.partitions)
        if added:
            consumer.incremental_assign(added)
            with self._lock:
                self._notes.append(
                    "new partitions: " + ", ".join(f"{tp.topic}[{tp.partition}]" for tp in added)
                )

    # decoder and writer threads

    def _decode_loop(self) -> None:
        """Batches → rows ready to commit (decoded, shaped, dead letters in place)."""
        while True:
            batch = self._queue.get()
            if batch is None:
                self._put(self._prepared, None, force=True)
                return
            prepared = None
            try:
                if self._error is None:
                    prepared = self._prepare(batch)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer thread
                self._fail(exc)
            if prepared is None or not self._put(self._prepared, prepared):
                with self._lock:
                    self._inflight -= 1

    def _write_loop(self) -> None:
        """Prepared rows → Delta commits, in order; then stats, mirror, upkeep."""
        while True:
            prepared = self._prepared.get()
            if prepared is None:
                return
            try:
                if self._error is None:
                    self._write(prepared)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer thread
                self._fail(exc)
            finally:
                with self._lock:
                    self._inflight -= 1

    def _put(self, target: queue.Queue[Any], item: Any, *, force: bool = False) -> bool:
        """Put ``item`` on ``target`` unless the loop failed meanwhile (``force``: even
        then, making room by dropping what waits there)."""
        while True:
            try:
                target.put(item, timeout=0.2)
                return True
            except queue.Full:
                if self._error is None:
                    continue
                if not force:
                    return False
                try:
                    dropped = target.get_nowait()
                except queue.Empty:
                    continue
                if dropped is not None:
                    with self._lock:
                        self._inflight -= 1

    def _finish(self, threads: tuple[threading.Thread, threading.Thread], graceful: bool) -> None:
        if not graceful:
            # interrupted (Ctrl-C) or failed: finish the commit under way, drop the rest
            for waiting in (self._queue, self._prepared):
                while True:
                    try:
                        dropped = waiting.get_nowait()
                    except queue.Empty:
                        break
                    if dropped is not None:
                        with self._lock:
                            self._inflight -= 1
        self._put(self._queue, None, force=True)
        for thread in threads:
            thread.join()

    def _collect(self) -> None:
        """With automatic collection paused: the young generations after every commit,
        everything once a minute."""
        now = time.monotonic()
        if now - self._full_gc_at >= FULL_GC_EVERY:
            gc.collect()
            self._full_gc_at = now
        else:
            gc.collect(1)

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = exc

    def _prepare(self, batch: _Batch) -> _Prepared:
        started = time.monotonic()
        batch_pool = batch.pool
        generation = batch.generation
        state = self._pools[batch_pool]
        messages = batch.messages
        n = len(messages)
        if len(state.topics) == 1:
            topic_of = [state.topics[0]] * n
            by_topic = {state.topics[0]: range(n)}
        else:
            topic_of = [m.topic() for m in messages]
            groups: dict[str, list[int]] = {}
            for i, t in enumerate(topic_of):
                groups.setdefault(t, []).append(i)
            by_topic = groups  # type: ignore[assignment]
        partitions = [m.partition() for m in messages]
        offsets = [m.offset() for m in messages]
        millis = [m.timestamp()[1] for m in messages]  # -1: the broker gave none
        keys = [m.key() for m in messages]
        values = [m.value() for m in messages]
        del messages, batch
        timings = {"extract": time.monotonic() - started}

        key_text: list[Any] = [None] * n
        value_text: list[Any] = [None] * n
        bad: dict[int, tuple[str, str]] = {}  # row -> (stage, error)
        wanted: dict[str, TopicTypes] = {}
        for topic, rows in by_topic.items():
            whole = len(rows) == n
            tkeys = keys if whole else [keys[i] for i in rows]
            tvalues = values if whole else [values[i] for i in rows]
            ktexts, ktype = self._parts[(topic, "key")].decode(tkeys)
            vtexts, vtype = self._parts[(topic, "value")].decode(tvalues)
            failed = [j for j, v in enumerate(vtexts) if isinstance(v, DecodeError)]
            failed += [j for j, k in enumerate(ktexts) if isinstance(k, DecodeError)]
            for j in failed:
                i = rows[j]
                if i not in bad:
                    v, k = vtexts[j], ktexts[j]
                    part, error = ("value", v) if isinstance(v, DecodeError) else ("key", k)
                    bad[i] = (DECODE_STAGE, f"{part}: {error}")
                ktexts[j] = vtexts[j] = None
            if whole:
                key_text, value_text = ktexts, vtexts
            else:
                for j, i in enumerate(rows):
                    key_text[i] = ktexts[j]
                    value_text[i] = vtexts[j]
            wanted[topic] = TopicTypes(
                key=ktype.json() if ktype is not None else None,
                value=vtype.json() if vtype is not None else None,
            )
        if bad and self.options.on_error == "fail":
            self._refuse(state, bad, topic_of, partitions, offsets)
        timings["decode"] = time.monotonic() - started - sum(timings.values())

        ms = pa.array(millis, pa.int64())
        micros = pc.if_else(pc.less(ms, 0), pa.scalar(None, pa.int64()), pc.multiply(ms, 1000))
        if len(by_topic) == 1:
            topics = pa.repeat(pa.scalar(topic_of[0], pa.string()), n)
        else:
            topics = pa.array(topic_of, pa.string())
        part_arr = pa.array(partitions, pa.int32())
        off_arr = pa.array(offsets, pa.int64())
        kafka = pa.StructArray.from_arrays(
            [topics, part_arr, off_arr, micros.cast(KAFKA_TYPE.field("timestamp").type)],
            fields=list(KAFKA_TYPE),
        )
        rows_table = record_rows(kafka, key_text, value_text)
        del key_text, value_text
        order: list[int] | None = None
        if self._shaper is not None:
            rows_table, order, wanted = self._shape(rows_table, bad, by_topic, wanted)
            if bad and self.options.on_error == "fail":
                self._refuse(state, bad, topic_of, partitions, offsets)
        if bad or order is not None:
            rows_table = _with_dead_letters(rows_table, order, kafka, bad, keys, values)

        positions = _positions(topics, part_arr, off_arr)
        timings["build"] = time.monotonic() - started - sum(timings.values())
        return _Prepared(
            batch_pool, rows_table, positions, wanted, len(bad), started, timings, generation
        )

    def _write(self, prepared: _Prepared) -> None:
        state = self._pools[prepared.pool]
        pool = state.pool
        rows_table, positions, wanted = prepared.rows, prepared.positions, prepared.wanted
        started, timings = prepared.started, prepared.timings
        timings["queued"] = time.monotonic() - started - sum(timings.values())
        with self._lock:  # the consumer thread changes `next` when partitions move
            starts = {tp: n for tp in positions if (n := state.next.get(tp)) is not None}
        # the types first: they only grow, so a lost data commit leaves them harmless
        changed = {
            t: ty
            for t, ty in wanted.items()
            if (ty.key or ty.value) and state.recorded.get(t) != ty
        }
        if changed:
            pool.record_types(changed)
            state.recorded.update(changed)

        metadata = {"zync.app": "from-kafka", "zync.pid": _WRITER}
        moved: set[tuple[str, int]] = set()
        try:
            result = pool.append_records(rows_table, positions, starts=starts, metadata=metadata)
        except PoolError:
            moved = self._moved_away(state, prepared, starts)
            if not moved:
                raise
            # a workers group gave these partitions to another worker after the batch
            # was cut, and their pool position is no longer where the batch starts: skip
            # them (their owner ingests them from the pool's position), commit the rest
            rows_table = _without_partitions(rows_table, moved)
            positions = {tp: off for tp, off in positions.items() if tp not in moved}
            starts = {tp: off for tp, off in starts.items() if tp not in moved}
            with self._lock:
                self._notes.append(f"skipped {_tp_list(moved)}: another worker owns them now")
            log.info("skipped %s of a batch: another worker owns them now", _tp_list(moved))
            if not positions:
                return
            result = pool.append_records(rows_table, positions, starts=starts, metadata=metadata)
        timings["commit"] = time.monotonic() - started - sum(timings.values())
        held = {tp: pool.position(*tp) for tp in positions}
        # dead letters of this batch that went in (when another writer committed part
        # of the batch first, the count is an estimate)
        exact = result.skipped == 0 and not moved
        dead = prepared.dead if exact else min(prepared.dead, result.rows)
        now = time.time()
        with self._lock:
            # a workers group: only the partitions this worker still owns (the consumer
            # thread reset the others' state when they were revoked)
            mine = set(positions) & self._owned if self._grouped else set(positions)
            for tp in mine:
                state.next[tp] = positions[tp] + 1
            state.positions.update({tp: held[tp] for tp in mine})
            state.skipped += result.skipped
            if result.version is not None:
                state.version = result.version
                state.commits += 1
                state.records += result.rows
                state.dead_letters += dead
                state.last_commit_at = now
                state.last_commit_records = result.rows
                state.window.append((time.monotonic(), result.rows))
                self._last_commit = CommitRef(pool.name, result.version, now, result.rows)
            for tp in mine:
                off = held[tp]
                if off is not None and off + 1 > state.next[tp]:
                    # another writer got further: skip what it committed
                    self._seeks[tp] = off + 1
                    state.next[tp] = off + 1
        if state.group is not None:
            mirror = self._mirrors.get(pool.name)
            if mirror is None:
                mirror = _GroupMirror(self.kafka, state.group)
                self._mirrors[pool.name] = mirror
            # every partition committed, owned or not: a commit of a partition revoked
            # meanwhile may be its last (the mirror commits only what this worker owns)
            mirror.publish({tp: off for tp, off in held.items() if off is not None})
        if result.version is None:
            return
        try:
            upkeep = state.upkeep.after_commit(pool)
        except Exception as exc:  # noqa: BLE001 - upkeep never stops the ingest
            upkeep = [f"upkeep failed (retried later): {_describe(exc).splitlines()[0]}"]
            log.warning("%s: %s", pool.name, upkeep[0])
        if self._gc_paused:
            self._collect()
        if upkeep:
            with self._lock:
                self._notes.extend(f"{pool.name}: {u}" for u in upkeep)
        if self._on_commit is not None:
            self._on_commit(
                CommitInfo(
                    pool=pool.name,
                    version=result.version,
                    records=result.rows,
                    dead_letters=dead,
                    skipped=result.skipped,
                    positions=dict(positions),
                    seconds=time.monotonic() - started,
                    timings=timings,
                    upkeep=tuple(upkeep),
                    stats=self.status(),
                )
            )

    def _moved_away(
        self,
        state: _PoolState,
        prepared: _Prepared,
        starts: Mapping[tuple[str, int], int],
    ) -> set[tuple[str, int]]:
        """After a refused commit: the partitions whose batch rows start past the pool's
        position (the ``starts`` guard) and that moved to another worker since the batch
        was cut. Empty when the refusal is anything else, or a real seeking bug."""
        if not self._grouped:
            return set()
        pool = state.pool
        pool.refresh()
        gapped = {
            tp for tp, start in starts.items()
            if (have := pool.position(*tp)) is not None and start > have + 1
        }  # fmt: skip
        with self._lock:
            owned = set(self._owned)
            rebalanced = self._rebalances != prepared.generation
        moved = {tp for tp in gapped if tp not in owned or rebalanced}
        return moved if moved == gapped else set()

    def _refuse(
        self,
        state: _PoolState,
        bad: Mapping[int, tuple[str, str]],
        topic_of: Sequence[str],
        partitions: Sequence[int],
        offsets: Sequence[int],
    ) -> None:
        i = min(bad)
        stage, error = bad[i]
        topic, partition, offset = topic_of[i], partitions[i], offsets[i]
        with self._lock:
            held = state.positions.get((topic, partition))
        what = "decode" if stage == DECODE_STAGE else "shape"
        raise BadRecord(
            f"cannot {what} {topic}[{partition}] offset {offset}: {error} "
            f"(--on-error fail: this batch was not committed; pool {state.pool.name!r} holds "
            f"{topic}[{partition}] up to offset {held if held is not None else '-'}; "
            f"{len(bad)} bad record(s) in the batch)",
            topic,
            partition,
            offset,
        )

    def _shape(
        self,
        rows_table: pa.Table,
        bad: dict[int, tuple[str, str]],
        by_topic: Mapping[str, Sequence[int]],
        wanted: dict[str, TopicTypes],
    ) -> tuple[pa.Table, list[int], dict[str, TopicTypes]]:
        """The shaped good rows, the batch row each came from, and the output types."""
        from pyspark.sql.types import _parse_datatype_json_string

        from engine.lake.shaper import STAGE

        assert self._shaper is not None
        spark = self._get_spark()
        pieces: list[pa.Table] = []
        order: list[int] = []
        shaped_types: dict[str, TopicTypes] = {}
        for topic, rows in by_topic.items():
            good = [i for i in rows if i not in bad]
            if not good:
                continue
            types = wanted.get(topic) or TopicTypes()
            key_type = _parse_datatype_json_string(types.key) if types.key else None
            value_type = _parse_datatype_json_string(types.value) if types.value else None
            result = self._shaper.apply(
                spark, rows_table.take(pa.array(good, pa.int64())), key_type, value_type
            )
            for j, error in result.failures:
                bad[good[j]] = (STAGE, error)
            pieces.append(result.rows)
            order.extend(good[j] for j in result.index)
            shaped_types[topic] = TopicTypes(
                key=result.key_type.json() if result.key_type is not None else None,
                value=result.value_type.json() if result.value_type is not None else None,
            )
        table = pa.concat_tables(pieces) if pieces else ROW_SCHEMA.empty_table()
        return table, order, shaped_types


def _with_dead_letters(
    good: pa.Table,
    order: list[int] | None,
    kafka: pa.StructArray,
    bad: Mapping[int, tuple[str, str]],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
) -> pa.Table:
    """The good rows (``order``: the batch row of each; None: every row of the batch,
    bad ones included) and the dead letters, in arrival order."""
    if order is None:
        keep = [i for i in range(len(kafka)) if i not in bad]
        good = good.take(pa.array(keep, pa.int64()))
        order = keep
    idx = sorted(bad)
    dead = pa.table(
        {
            "kafka": kafka.take(pa.array(idx, pa.int64())),
            "key": pa.nulls(len(idx), pa.string()),
            "value": pa.nulls(len(idx), pa.string()),
            "deadletter": pa.array(
                [
                    {
                        "stage": bad[i][0],
                        "error": bad[i][1],
                        "key_bytes": keys[i],
                        "value_bytes": values[i],
                    }
                    for i in idx
                ],
                DEADLETTER_TYPE,
            ),
            "marker": pa.nulls(len(idx), MARKER_TYPE),
        },
        schema=ROW_SCHEMA,
    )
    both = pa.concat_tables([good.cast(ROW_SCHEMA), dead])
    arrival = pa.array(order + idx, pa.int64())
    return both.take(pc.sort_indices(arrival))


def _positions(topics: pa.Array, partitions: pa.Array, offsets: pa.Array) -> dict[tuple[str, int], int]:
    """The last offset per (topic, partition) of a batch."""
    agg = (
        pa.table({"t": topics, "p": partitions, "o": offsets})
        .group_by(["t", "p"])
        .aggregate([("o", "max")])
    )
    return {
        (t, p): o
        for t, p, o in zip(
            agg.column("t").to_pylist(),
            agg.column("p").to_pylist(),
            agg.column("o_max").to_pylist(),
            strict=True,
        )
    }


def _without_partitions(rows: pa.Table, gone: set[tuple[str, int]]) -> pa.Table:
    """``rows`` without the rows (records and dead letters) of partitions ``gone``."""
    kafka = rows.column("kafka")
    topics = pc.struct_field(kafka, "topic")
    partitions = pc.struct_field(kafka, "partition")
    drop = None
    for topic, partition in gone:
        hit = pc.and_(pc.equal(topics, topic), pc.equal(partitions, partition))
        drop = hit if drop is None else pc.or_(drop, hit)
    return rows if drop is None else rows.filter(pc.invert(drop))


def _tp_list(partitions: Iterable[Any]) -> str:
    """``t[0], t[1]`` for (topic, partition) pairs or TopicPartitions."""
    pairs = sorted(
        (p.topic, p.partition) if hasattr(p, "topic") else (p[0], p[1]) for p in partitions
    )
    return ", ".join(f"{t}[{p}]" for t, p in pairs) or "nothing"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, ZyncError | PoolError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
