"""Upgrades of pools made by earlier zync versions, applied when a pool is opened.
There are two.

The first is **nullable kafka fields**. Pools used to declare ``kafka.topic``,
``kafka.partition`` and ``kafka.offset`` NOT NULL inside the nullable ``kafka`` struct.
Marker rows have no ``kafka``, and delta-spark enforces a nested NOT NULL even where the
parent is NULL (delta-io/delta#860): a user's ``OPTIMIZE`` (or DELETE, MERGE) of a
staging pool failed with DELTA_NOT_NULL_CONSTRAINT_VIOLATED. New pools are created with
:data:`engine.lake.pool_record.TABLE_SCHEMA`; an older one gets the same schema in one
metadata-only commit (delta-rs cannot drop a nested NOT NULL directly: an overwrite whose
predicate matches no row, with the new schema, removes no file and keeps the table's
name, description and properties).

The second is **staged Avro**: staging pools made before it have no
``avro`` column (:data:`engine.lake.pool_record.AVRO_FIELD`). Their rows keep a NULL there,
which to-kafka encodes from the JSON text as before.

:func:`upgrade` makes whichever a pool needs in the same metadata-only commit.

Best effort: a pool that cannot take the commit (read-only storage, a writer that
committed at that very moment) keeps its old schema, which zync reads and writes as
before (a staging pool without ``avro`` gets its outputs without their Avro bodies); only
delta-spark's own rewrites need the nullable kafka fields. Another open tries again.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError

from engine.lake.delta import arrow_schema
from engine.lake.pool_record import AVRO_FIELD, TABLE_SCHEMA


def needs_nullable_kafka(schema: pa.Schema) -> bool:
    """True when a field of the schema's ``kafka`` struct is NOT NULL."""
    index = schema.get_field_index("kafka")
    if index < 0 or not pa.types.is_struct(schema.field(index).type):
        return False
    return any(not f.nullable for f in schema.field(index).type)


def upgrade(table: DeltaTable, *, staging: bool) -> list[str]:
    """Bring a pool's table to today's schema in one commit that changes no data: the
    ``kafka`` fields nullable and, for a staging pool (``staging``), the ``avro``
    column. The upgrades it committed, by name (none: nothing to do, or the commit
    failed); ``table`` is then updated."""
    schema = arrow_schema(table)
    done = []
    if needs_nullable_kafka(schema):
        schema = pa.schema(
            [TABLE_SCHEMA.field("kafka") if f.name == "kafka" else f for f in schema]
        )
        done.append("nullable-kafka")
    if staging and AVRO_FIELD.name not in schema.names:
        schema = schema.append(AVRO_FIELD)
        done.append("staged-avro")
    if not done:
        return []
    try:
        write_deltalake(
            table,
            schema.empty_table(),
            mode="overwrite",
            predicate="false",  # replaces no row: a metadata-only commit
            schema_mode="overwrite",
            commit_properties=CommitProperties(
                custom_metadata={"zync.op": "upgrade", "zync.upgrade": ",".join(done)},
                max_commit_retries=0,
            ),
        )
    except (DeltaError, OSError):
        return []
    table.update_incremental()
    return done
