"""The staging feed: one reader of a staging pool's Delta log shared by every output a
process delivers from that pool (docs/design.md#exactly-once-to-kafka, "Many outputs").

Each output's delivery runs in a thread of its own and used to look at the pool's
version every poll, and to read each new staging commit's change data feed for its own
topic: with hundreds of outputs, one staging commit was read hundreds of times.
:class:`StagingFeed` does both once for all of them:

- :meth:`StagingFeed.version` looks at the pool's newest version once for every
  delivery that asks at the same moment: a caller gets the result of a look that began
  after it asked (so a delivery woken by a commit sees the commit) — or, polling, at
  most half a poll interval before — and the callers that waited while one look ran
  share it.
- :meth:`StagingFeed.changes` reads the records that versions ``first..last`` added to
  the feed's topics from the change data feed (``load_cdf``) once, split by topic, and
  keeps the last few ranges read: the next output asking for the same versions gets
  its topic's records from memory.

The feed only reads; where each output stands stays each delivery's own (its
positions in Kafka, its ledger), so what it delivers is decided exactly as before.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Collection
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.deliver.errors import DeliveryError
from engine.lake.change_feed import ChangeFeedError, MetadataVersion, inserted_records
from engine.lake.pool_record import AVRO_FIELD, AVRO_TYPE

if TYPE_CHECKING:
    from engine.lake.pools import Lake, Pool

#: Version ranges whose records a feed keeps (the outputs of one pool usually ask for
#: the same one; one lagging behind asks for another).
KEPT = 4


class StagingFeed:
    """Reads the records of ``topics`` (never markers or dead letters) that versions of
    a staging pool added, for the deliveries of those topics (see the module's
    docstring). Thread-safe. The pool is ``pool``, or opened from ``lake`` (by
    ``name``) when first needed: the feed keeps a pool object of its own, so that its
    reads never move another thread's snapshot."""

    def __init__(
        self,
        topics: Collection[str],
        *,
        pool: Pool | None = None,
        lake: Lake | None = None,
        name: str | None = None,
    ) -> None:
        if pool is None and (lake is None or name is None):
            raise ValueError("a staging feed needs a pool, or a lake and a pool name")
        self.topics = sorted(set(topics))
        self._lake = lake
        self._name = name
        # looks and reads each have a pool object and a lock of their own: a delivery
        # waiting for a read never waits behind the others' looks
        self._looker = pool
        self._looks = threading.Lock()
        self._version = -1
        self._looked_at = float("-inf")  # when the last look at the version began
        self._pool = pool
        self._reads = threading.Lock()
        self._read: OrderedDict[tuple[int, int], dict[str, pa.Table]] = OrderedDict()

    def _open(self) -> Pool:
        assert self._lake is not None
        assert self._name is not None
        return self._lake.open_pool(self._name)

    @property
    def pool(self) -> Pool:
        """The pool object the feed reads changes with."""
        if self._pool is None:
            self._pool = self._open()
        return self._pool

    def version(self, max_age: float = 0.0) -> int:
        """The pool's newest version, as a look that began at most ``max_age`` seconds
        before this call saw it (0: a look that began after it; the Delta log is looked
        at once for the callers that came meanwhile)."""
        asked = time.monotonic()
        with self._looks:
            if self._looked_at < asked - max_age:
                if self._looker is None:
                    self._looker = self._open()
                self._looked_at = time.monotonic()
                self._version = self._looker.refresh()
            return self._version

    def changes(self, topic: str, first: int, last: int, *, alone: bool = False) -> pa.Table:
        """Records of ``topic`` added by versions ``first..last``, with their version
        (column ``time``): columns ``offset, key, value[, avro], time``, in the order
        the versions added them. ``alone``: a range only this topic's delivery reads
        (one resuming from far back): read for the topic alone, and not kept.

        delta-rs refuses a feed that starts at a version holding a metaData action
        (table creation, a change of the pool's recorded types): such a version is read
        by comparing its file list with the previous version's instead.
        """
        if topic not in self.topics:
            raise ValueError(f"topic {topic!r} is not one of this staging feed's")
        with self._reads:
            found = self._read.get((first, last))
            if found is None:
                if self.pool.table.version() < last:
                    self.pool.refresh()
                topics = [topic] if alone else self.topics
                found = _split(self._changes(first, last, topics), topics)
                if alone:
                    table = found.get(topic)
                    return table if table is not None else self.rows_schema().empty_table()
                self._read[(first, last)] = found
                while len(self._read) > KEPT:
                    self._read.popitem(last=False)
            else:
                self._read.move_to_end((first, last))
            table = found.get(topic)
            return table if table is not None else self.rows_schema().empty_table()

    def _changes(self, first: int, last: int, topics: list[str]) -> pa.Table:
        """Records of ``topics`` added by versions ``first..last``, with a ``topic``
        column."""
        parts = []
        version = first
        while version <= last:
            try:
                parts.append(self._change_feed(version, last, topics))
                break
            except MetadataVersion:
                parts.append(self._version_rows(version, topics))
                version += 1
        if not parts:  # no version: nothing added
            return self.rows_schema(topic=True).empty_table()
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    @staticmethod
    def _predicate(topics: list[str]) -> str:
        names = ", ".join(f"'{_sql_string(t)}'" for t in topics)
        if len(topics) == 1:
            return f"kafka.topic = {names}"
        return f"kafka.topic IN ({names})"

    def _change_feed(self, first: int, last: int, topics: list[str]) -> pa.Table:
        from engine.lake.delta import arrow_schema  # deferred: deltalake

        pool = self.pool
        avro = has_avro(arrow_schema(pool.table))
        columns = ["kafka", "key", "value", *(["avro"] if avro else []), "_commit_version"]

        def shaped(table: pa.Table) -> pa.Table:
            kafka = table.column("kafka")
            return pa.table(
                {
                    "topic": pc.struct_field(kafka, "topic").cast(pa.string()),
                    "offset": pc.struct_field(kafka, "offset").cast(pa.int64()),
                    "key": table.column("key").cast(pa.string()),
                    "value": table.column("value").cast(pa.string()),
                    **({"avro": table.column("avro").cast(AVRO_TYPE)} if avro else {}),
                    "time": table.column("_commit_version").cast(pa.int64()),
                }
            )

        try:
            return inserted_records(pool, first, last, self._predicate(topics), columns, shaped)
        except ChangeFeedError as exc:
            raise DeliveryError(str(exc)) from None

    def rows_schema(self, *, topic: bool = False) -> pa.Schema:
        """The columns of the changes read (with ``topic`` first, when asked): those of
        the newest table's rows."""
        from engine.lake.delta import arrow_schema  # deferred: deltalake

        avro = has_avro(arrow_schema(self.pool.table))
        return pa.schema(
            [
                *([("topic", pa.string())] if topic else []),
                ("offset", pa.int64()),
                ("key", pa.string()),
                ("value", pa.string()),
                *([("avro", AVRO_TYPE)] if avro else []),
                ("time", pa.int64()),
            ]
        )

    def _version_rows(self, version: int, topics: list[str]) -> pa.Table:
        """Records of ``topics`` in the files that ``version`` added."""
        # deferred: deltalake
        from engine.lake.delta import arrow_schema, parquet_dataset

        pool = self.pool
        table = pool.snapshot(version)
        before = set(pool.snapshot(version - 1).file_uris()) if version > 0 else set()
        added = [uri for uri in table.file_uris() if uri not in before]
        schema = self.rows_schema(topic=True)
        if not added:
            return schema.empty_table()
        table_schema = arrow_schema(table)
        dataset = parquet_dataset(pool.location, added, table_schema)
        condition = (
            pc.field("kafka", "topic").isin(topics) & pc.field("deadletter", "stage").is_null()
        )
        columns = {"topic": pc.field("kafka", "topic"), **record_columns(table_schema)}
        rows = dataset.to_table(columns=columns, filter=condition)
        if "avro" in schema.names and "avro" not in rows.column_names:  # before the upgrade
            rows = rows.append_column("avro", pa.nulls(rows.num_rows, AVRO_TYPE))
        return rows.append_column(
            "time", pa.array([version] * rows.num_rows, type=pa.int64())
        ).cast(schema)


def _split(table: pa.Table, topics: list[str]) -> dict[str, pa.Table]:
    """``table``'s rows by topic (each topic's in their order in ``table``), without the
    topic column."""
    table = table.filter(pc.is_valid(table.column("topic")))
    rows = table.drop_columns(["topic"])
    if not table.num_rows:
        return {}
    if len(topics) == 1:
        return {topics[0]: rows}
    encoded = pc.dictionary_encode(table.column("topic")).combine_chunks()
    codes = encoded.indices
    keyed = pa.table({"code": codes, "row": pa.array(range(len(codes)), pa.int64())})
    order = pc.sort_indices(keyed, sort_keys=[("code", "ascending"), ("row", "ascending")])
    ordered = rows.take(order)  # by topic, each topic's rows in their order
    counts = {c["values"]: c["counts"] for c in pc.value_counts(codes).to_pylist()}
    out = {}
    start = 0
    for code, name in enumerate(encoded.dictionary.to_pylist()):
        out[name] = ordered.slice(start, counts[code])
        start += counts[code]
    return out


def has_avro(schema: pa.Schema) -> bool:
    """Whether a staging pool's rows have the ``avro`` column (the ETL's Avro bodies)."""
    return AVRO_FIELD.name in schema.names


def record_columns(
    schema: pa.Schema, *, texts: bool = True, keys: bool = False
) -> dict[str, pc.Expression]:
    """What a record read projects: ``offset, key, value`` and, from a staging pool
    that has it, ``avro`` (the Avro bodies the ETL wrote); without ``texts`` (and with
    ``avro``), not ``key, value`` (but ``key`` with ``keys``)."""
    columns = {"offset": pc.field("kafka", "offset")}
    if texts or not has_avro(schema):
        columns |= {"key": pc.field("key"), "value": pc.field("value")}
    elif keys:
        columns["key"] = pc.field("key")
    if has_avro(schema):
        columns["avro"] = pc.field("avro")
    return columns


def _sql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
