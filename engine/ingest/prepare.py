"""A batch of consumed messages made into pool rows, in the decoder thread: the Kafka
coordinates, keys and values decoded per topic (:mod:`engine.ingest.decode`), the topics'
Spark types, the optional shaper, dead letters in place, and the last offset per
partition the commit records (:class:`Prepared`)."""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import pyarrow as pa
import pyarrow.compute as pc

from engine.ingest.dead_letters import DECODE_STAGE, Bad, refuse, with_dead_letters
from engine.ingest.decode import type_json
from engine.lake.batch_shaper import STAGE
from engine.lake.pool_record import KAFKA_TYPE, ROW_SCHEMA, record_rows
from engine.lake.topic_types import TopicTypes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.ingest.buffer import Batch
    from engine.ingest.decode import PartDecoder, RegistryLookup
    from engine.ingest.options import IngestOptions
    from engine.ingest.state import LoopState
    from engine.lake.batch_shaper import Shaper


@dataclass
class Prepared:
    """A batch decoded and shaped, ready for its commit."""

    pool: str
    rows: pa.Table
    positions: dict[tuple[str, int], int]
    wanted: dict[str, TopicTypes]
    dead: int
    started: float
    timings: dict[str, float]
    generation: int = 0
    #: per topic: the batch's records and their values' bytes; dead letters per stage
    topic_records: dict[str, int] = field(default_factory=dict)
    topic_bytes: dict[str, int] = field(default_factory=dict)
    dead_stages: dict[str, int] = field(default_factory=dict)


class Preparer:
    """Makes batches into rows; ``decoders``: per (topic, "key"|"value")."""

    def __init__(
        self,
        shared: LoopState,
        options: IngestOptions,
        decoders: Mapping[tuple[str, str], PartDecoder],
        shaper: Shaper | None,
        spark: Callable[[], SparkSession],
        registry: RegistryLookup | None = None,
    ) -> None:
        self._shared = shared
        self._options = options
        self._decoders = decoders
        self._shaper = shaper
        self._spark = spark
        self._registry = registry

    def warm(self) -> None:
        """What the first batch would otherwise wait for, made beforehand: the batch
        Schema Registry client (:meth:`PartDecoder.warm`), the topics' latest schemas
        (looked up in the background: :meth:`RegistryLookup.warm`) and the batch
        decoders' modules (polars, ~0.25 s to import; pyspark's types). Best effort:
        decoding reports anything that fails."""
        for decoder in self._decoders.values():
            decoder.warm()
        if self._registry is not None:
            self._registry.warm(self._decoders.values())
        for module in ("polars", "pyspark.sql.types"):
            with contextlib.suppress(ImportError):
                importlib.import_module(module)

    def prepare(self, batch: Batch) -> Prepared:
        started = time.monotonic()
        batch_pool = batch.pool
        generation = batch.generation
        state = self._shared.pools[batch_pool]
        messages = batch.messages
        n = len(messages)
        by_topic: Mapping[str, Sequence[int]]
        if len(state.topics) == 1:
            topic_of = [state.topics[0]] * n
            by_topic = {state.topics[0]: range(n)}
        else:
            topic_of = cast("list[str]", [m.topic() for m in messages])
            groups: dict[str, list[int]] = {}
            for i, t in enumerate(topic_of):
                groups.setdefault(t, []).append(i)
            by_topic = groups
        # len(message) is its value's size (what --max-bytes counts)
        if len(by_topic) == 1:
            topic_bytes = {next(iter(by_topic)): sum(map(len, messages))}
        else:
            topic_bytes = {t: sum(len(messages[i]) for i in rows) for t, rows in by_topic.items()}
        partitions = cast("list[int]", [m.partition() for m in messages])
        offsets = cast("list[int]", [m.offset() for m in messages])
        millis = [m.timestamp()[1] for m in messages]  # -1: the broker gave none
        keys = [m.key() for m in messages]
        values = [m.value() for m in messages]
        del messages, batch
        timings = {"extract": time.monotonic() - started}

        if self._registry is not None and len(by_topic) > 1:
            # a batch of many topics: their writer schemas fetched at once, not one
            # request after the other as each topic's turn comes
            self._registry.prefetch(_schema_ids(by_topic, keys, values))
        key_parts: list[pa.Array] = []
        value_parts: list[pa.Array] = []
        bad: Bad = {}  # row -> (stage, error)
        wanted: dict[str, TopicTypes] = {}
        for topic, rows in by_topic.items():
            whole = len(rows) == n
            tkeys = keys if whole else [keys[i] for i in rows]
            tvalues = values if whole else [values[i] for i in rows]
            kdecoded, ktype = self._decoders[(topic, "key")].decode(tkeys)
            vdecoded, vtype = self._decoders[(topic, "value")].decode(tvalues)
            ktexts, vtexts = kdecoded.texts, vdecoded.texts
            failed = sorted(vdecoded.errors.keys() | kdecoded.errors.keys())
            if failed:  # a record whose key or value failed is a dead letter, whole
                for j in failed:
                    if j in vdecoded.errors:
                        bad[rows[j]] = (DECODE_STAGE, f"value: {vdecoded.errors[j]}")
                    else:
                        bad[rows[j]] = (DECODE_STAGE, f"key: {kdecoded.errors[j]}")
                ktexts, vtexts = _without(ktexts, failed), _without(vtexts, failed)
            key_parts.append(ktexts)
            value_parts.append(vtexts)
            wanted[topic] = TopicTypes(
                key=type_json(ktype) if ktype is not None else None,
                value=type_json(vtype) if vtype is not None else None,
            )
        key_text, value_text = _in_batch_order(key_parts, value_parts, by_topic)
        if bad and self._options.on_error == "fail":
            refuse(self._shared, state, bad, topic_of, partitions, offsets)
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
            if bad and self._options.on_error == "fail":
                refuse(self._shared, state, bad, topic_of, partitions, offsets)
        if bad or order is not None:
            rows_table = with_dead_letters(rows_table, order, kafka, bad, keys, values)

        positions = batch_positions(topics, part_arr, off_arr)
        timings["build"] = time.monotonic() - started - sum(timings.values())
        stages: dict[str, int] = {}
        for stage, _error in bad.values():
            stages[stage] = stages.get(stage, 0) + 1
        return Prepared(
            batch_pool, rows_table, positions, wanted, len(bad), started, timings, generation,
            topic_records={t: len(rows) for t, rows in by_topic.items()},
            topic_bytes=topic_bytes,
            dead_stages=stages,
        )  # fmt: skip

    def _shape(
        self,
        rows_table: pa.Table,
        bad: Bad,
        by_topic: Mapping[str, Sequence[int]],
        wanted: dict[str, TopicTypes],
    ) -> tuple[pa.Table, list[int], dict[str, TopicTypes]]:
        """The shaped good rows, the batch row each came from, and the output types."""
        # deferred: pyspark is heavy, and only a shaper needs it
        from pyspark.sql.types import _parse_datatype_json_string

        assert self._shaper is not None
        spark = self._spark()
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


def _without(texts: pa.Array, rows: list[int]) -> pa.Array:
    """``texts`` with NULL at ``rows``."""
    drop = pa.array(range(len(texts)), pa.int64())
    hit = pc.is_in(drop, pa.array(rows, pa.int64()))
    return pc.if_else(hit, pa.scalar(None, texts.type), texts)


def _in_batch_order(
    keys: list[pa.Array], values: list[pa.Array], by_topic: Mapping[str, Sequence[int]]
) -> tuple[pa.Array, pa.Array]:
    """Per-topic texts (each in the order of its topic's rows) as the batch's."""
    if len(keys) == 1:
        return keys[0], values[0]
    if not keys:
        return pa.array([], pa.string()), pa.array([], pa.string())
    batch_rows = pa.array([i for rows in by_topic.values() for i in rows], pa.int64())
    order = pc.sort_indices(batch_rows)  # where each batch row is among the topics'
    return pa.concat_arrays(keys).take(order), pa.concat_arrays(values).take(order)


def batch_positions(
    topics: pa.Array, partitions: pa.Array, offsets: pa.Array
) -> dict[tuple[str, int], int]:
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


def _schema_ids(
    by_topic: Mapping[str, Sequence[int]],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
) -> set[int]:
    """The schema ids in the Confluent wire-format headers of each topic's first and
    last key and value (a schema rarely changes within a topic's part of a batch; the
    decoders look up any other)."""
    ids = set()
    for rows in by_topic.values():
        for i in {rows[0], rows[-1]}:
            for data in (keys[i], values[i]):
                if data is not None and len(data) >= 5 and data[0] == 0:
                    ids.add(int.from_bytes(data[1:5], "big"))
    return ids
