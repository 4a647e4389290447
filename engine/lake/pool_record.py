"""The shape of a pool row, as Arrow (what delta-rs writes) and as Spark sees it.

Every pool (raw or staging) is one Delta table with these columns:

``seqno``
    long, assigned when the row is committed: monotonic in commit order within the
    pool, never reused (docs/design.md#ordering).
``kafka``
    ``struct<topic, partition, offset, timestamp>``: where a record came from (raw
    pools) or where it goes (staging outputs: output topic, partition 0, contiguous
    output offset). NULL on completion-marker rows.
``key``, ``value``
    the record's key and value as JSON text (NULL value = tombstone). SQL sees them as
    typed structs: :mod:`engine.lake.pools` parses them with ``from_json`` using each
    topic's type, recorded in the pool's metadata.
``deadletter``
    NULL for good records. For a record that could not be decoded or shaped:
    ``struct<stage, error, key_bytes, value_bytes>`` with the raw bytes kept, so the
    dead letter is committed in the same Delta commit as the records around it.
``marker``
    NULL except on completion-marker rows of staging pools:
    ``struct<etl, rule, topic, partition, offset, status>`` says input record
    (topic, partition, offset) was consumed by rule ``rule`` of ETL ``etl`` with status
    ``processed`` or ``expired``.

Staging pools have one more column:

``avro``
    ``struct<key_schema, value_schema, key, value>``: the output's key and value as Avro
    bodies, encoded by the ETL's executors, with the fingerprint of the schema each was
    written with (:func:`engine.kafka.typemap.from_spark.avro_fingerprint`). to-kafka
    ships them as they are when the fingerprint is that of the schema it registered, and
    encodes the JSON text otherwise (docs/design.md#staged-avro). A part is NULL where
    the ETL does not encode it (a type Spark's Avro writer does not take), the whole
    column on markers, dead letters and rows written before it.

Keeping the three row kinds (record, dead letter, marker) in one table is what lets a
single Delta commit hold all of them (docs/design.md#exactly-once-etl).
"""

from __future__ import annotations

from typing import Any, Final

import pyarrow as pa

KAFKA_TYPE: Final = pa.struct(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)

DEADLETTER_TYPE: Final = pa.struct(
    [
        pa.field("stage", pa.string()),
        pa.field("error", pa.string()),
        pa.field("key_bytes", pa.binary()),
        pa.field("value_bytes", pa.binary()),
    ]
)

MARKER_TYPE: Final = pa.struct(
    [
        pa.field("etl", pa.string()),
        pa.field("rule", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("status", pa.string()),
    ]
)

POOL_SCHEMA: Final = pa.schema(
    [
        pa.field("seqno", pa.int64(), nullable=False),
        pa.field("kafka", KAFKA_TYPE),
        pa.field("key", pa.string()),
        pa.field("value", pa.string()),
        pa.field("deadletter", DEADLETTER_TYPE),
        pa.field("marker", MARKER_TYPE),
    ]
)

#: The columns of a row before the pool assigns its seqno.
ROW_SCHEMA: Final = pa.schema([f for f in POOL_SCHEMA if f.name != "seqno"])


def _nullable(type_: pa.DataType) -> pa.DataType:
    """``type_`` with every field of every struct in it nullable."""
    if not pa.types.is_struct(type_):
        return type_
    return pa.struct([pa.field(f.name, _nullable(f.type), nullable=True) for f in type_])


#: The Delta schema a pool is created with: :data:`POOL_SCHEMA` with the fields of
#: ``kafka`` nullable. Rows zync writes still always fill them when ``kafka`` is there;
#: but a marker row has no ``kafka``, and delta-spark enforces a nested NOT NULL even
#: where the parent struct is NULL (delta-io/delta#860), so a table declaring
#: ``kafka.topic`` NOT NULL fails every delta-spark write that rewrites marker rows (a
#: user's OPTIMIZE, DELETE or MERGE on a staging pool).
TABLE_SCHEMA: Final = pa.schema(
    [pa.field("kafka", _nullable(KAFKA_TYPE)) if f.name == "kafka" else f for f in POOL_SCHEMA]
)

#: The ``avro`` column of staging pools (see the module's docstring).
AVRO_TYPE: Final = pa.struct(
    [
        pa.field("key_schema", pa.string()),
        pa.field("value_schema", pa.string()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
    ]
)
AVRO_FIELD: Final = pa.field("avro", AVRO_TYPE)

#: The Delta schema a staging pool is created with: :data:`TABLE_SCHEMA` and ``avro``.
STAGING_TABLE_SCHEMA: Final = pa.schema([*TABLE_SCHEMA, AVRO_FIELD])

#: Rows of a staging pool before it assigns their seqnos.
STAGING_ROW_SCHEMA: Final = pa.schema([*ROW_SCHEMA, AVRO_FIELD])

PROCESSED: Final = "processed"
EXPIRED: Final = "expired"

#: Spark SQL predicates selecting each row kind.
IS_RECORD: Final = "deadletter IS NULL AND marker IS NULL"
IS_DEADLETTER: Final = "deadletter IS NOT NULL"
IS_MARKER: Final = "marker IS NOT NULL"


def shape_problems(schema: pa.Schema) -> list[str]:
    """What makes ``schema`` differ from a pool's, in words (empty when it is a pool)."""
    problems = []
    have = {field.name: field for field in schema}
    for field in POOL_SCHEMA:
        got = have.get(field.name)
        if got is None:
            problems.append(f"column `{field.name}` is missing")
        elif not _nullable(got.type).equals(_nullable(field.type)):
            # nested nullability aside: pools made before TABLE_SCHEMA say NOT NULL
            problems.append(f"column `{field.name}` is {got.type}, a pool needs {field.type}")
    avro = have.get(AVRO_FIELD.name)
    if avro is not None and not avro.type.equals(AVRO_TYPE):
        problems.append(f"column `avro` is {avro.type}, a staging pool needs {AVRO_TYPE}")
    for name in have.keys() - {field.name for field in POOL_SCHEMA} - {AVRO_FIELD.name}:
        problems.append(f"column `{name}` is not part of a pool")
    return problems


def record_rows(kafka: Any, keys: Any, values: Any, avro: Any = None) -> pa.Table:
    """Record rows (:data:`ROW_SCHEMA`, no dead letter, no marker) from the ``kafka``
    structs (an Arrow array, or dicts) and the key and value JSON texts; with ``avro``
    (staging outputs' Avro bodies, :data:`AVRO_TYPE`), :data:`STAGING_ROW_SCHEMA`."""
    def arrow(values: Any, type_: pa.DataType) -> Any:
        if isinstance(values, pa.Array | pa.ChunkedArray):
            return values if values.type == type_ else values.cast(type_)
        return pa.array(values, type_)

    kafka = arrow(kafka, KAFKA_TYPE)
    n = len(kafka)
    rows = pa.Table.from_arrays(
        [
            kafka,
            arrow(keys, pa.string()),
            arrow(values, pa.string()),
            pa.nulls(n, DEADLETTER_TYPE),
            pa.nulls(n, MARKER_TYPE),
        ],
        schema=ROW_SCHEMA,
    )
    return rows if avro is None else rows.append_column(AVRO_FIELD, arrow(avro, AVRO_TYPE))


def rows_for(table_columns: list[str]) -> pa.Schema:
    """The rows a pool's table with these columns takes: :data:`STAGING_ROW_SCHEMA`
    when it has ``avro`` (a staging pool), else :data:`ROW_SCHEMA`."""
    return STAGING_ROW_SCHEMA if AVRO_FIELD.name in table_columns else ROW_SCHEMA


def with_seqno(rows: pa.Table, first: int) -> pa.Table:
    """``rows`` (:func:`fit_rows`) with seqnos ``first, first+1, ...`` in front."""
    seqno = pa.array(range(first, first + rows.num_rows), type=pa.int64())
    schema = POOL_SCHEMA
    if AVRO_FIELD.name in rows.column_names:
        schema = pa.schema([*POOL_SCHEMA, AVRO_FIELD])
    return rows.add_column(0, POOL_SCHEMA.field("seqno"), seqno).cast(schema)


def fit_rows(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with the columns of ``schema`` (:data:`ROW_SCHEMA` or
    :data:`STAGING_ROW_SCHEMA`): an ``avro`` column is added as NULLs, or dropped."""
    if AVRO_FIELD.name in schema.names and AVRO_FIELD.name not in rows.column_names:
        rows = rows.append_column(AVRO_FIELD, pa.nulls(rows.num_rows, AVRO_TYPE))
    return rows.select(schema.names).cast(schema)


def empty_rows() -> pa.Table:
    """An empty table of :data:`ROW_SCHEMA`."""
    return ROW_SCHEMA.empty_table()
