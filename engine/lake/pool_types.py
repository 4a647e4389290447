"""A pool's topic types: recorded (merged, only ever growing) in type files the table's
``zync.types`` property names, an earlier zync's types moved out of the description, and
the metadata read back (docs/design.md#where-a-pool-keeps-its-topics-types)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from deltalake import CommitProperties, DeltaTable

from engine.lake import delta
from engine.lake.appends import MAX_COMMIT_ATTEMPTS
from engine.lake.location import Location
from engine.lake.pool_errors import NotAPool, PoolError
from engine.lake.pool_record import shape_problems
from engine.lake.topic_types import (
    TYPES_PROPERTY,
    PoolMeta,
    TopicTypes,
    TypeFiles,
    merge_topic_types,
    pool_description,
    read_meta,
)

if TYPE_CHECKING:
    from engine.lake.pools import Pool


def record_types(pool: Pool, types: Mapping[str, TopicTypes]) -> bool:
    """Merge topic types into the pool's; True when that changed them.

    Types only grow (struct fields are merged), so recording them before the data
    commit that needs them is safe even if that commit is then retried or lost. A
    concurrent change of the pool's metadata is merged again; any other failure
    stops at once (:class:`PoolError`, naming the pool and the cause)."""
    if merge_topic_types(pool.meta.types, types) == pool.meta.types:
        return False
    pool.guard.require_safe_commits()
    for _ in range(MAX_COMMIT_ATTEMPTS):
        # merge into the newest types: another writer may have widened the same
        # topic's since this snapshot, and its widening must not be lost
        pool.refresh()
        merged = merge_topic_types(pool.meta.types, types)
        if merged == pool.meta.types:
            return False
        try:
            commit_types(pool, merged, op="types")
        except delta.CommitFailedError:
            continue  # another writer changed the metadata meanwhile: merge again
        return True
    raise PoolError(
        f"pool {pool.name!r}: gave up recording types after {MAX_COMMIT_ATTEMPTS} "
        "concurrent changes of its metadata"
    )


def move_legacy_types(pool: Pool) -> None:
    """Move the types an earlier zync kept in the table's description into type
    files (two metadata commits: the files' index, then the description). Best
    effort, as :func:`engine.lake.upgrade.upgrade`: a pool that cannot take the
    commits is read as before, and the next open tries again."""
    legacy = pool.meta
    try:
        pool.guard.require_safe_commits()
        if legacy.types:
            commit_types(pool, legacy.types, op="upgrade")
        pool.table.alter.set_table_description(
            pool_description(pool.kind),
            commit_properties=CommitProperties(
                custom_metadata={"zync.op": "upgrade", "zync.upgrade": "type-files"}
            ),
        )
    except (PoolError, delta.DeltaError, OSError):
        pass
    pool.refresh()
    pool.meta = read_meta_of(pool)


def commit_types(pool: Pool, types: Mapping[str, TopicTypes], *, op: str) -> None:
    """Write the type files of ``types`` and commit their index as the pool's
    (raises ``CommitFailedError`` when another writer changed the metadata first)."""
    try:
        index = pool.type_files.save(types)
    except OSError as exc:
        raise PoolError(f"pool {pool.name!r}: cannot write its type files: {exc}") from exc
    planned_on = pool.table.version()
    try:
        pool.table.alter.set_table_properties(
            {TYPES_PROPERTY: index},
            raise_if_not_exists=False,
            commit_properties=CommitProperties(custom_metadata={"zync.op": op}),
        )
    except delta.CommitFailedError:
        raise
    except delta.DeltaError as exc:
        raise PoolError(f"pool {pool.name!r}: cannot record its topics' types: {exc}") from exc
    # a metadata commit writes no txn: the positions known before it hold after it (a
    # first commit over 200 topics would otherwise look each up in delta-rs again)
    pool.committed(planned_on, {})
    pool.meta = read_meta_of(pool)  # the commit moved `table` itself: refresh saw no change


def read_meta_of(pool: Pool) -> PoolMeta:
    """The kind and types of the snapshot ``pool`` is at (its last known ones when the
    snapshot has none)."""
    try:
        meta = read_meta(pool.table, pool.type_files, pool.meta)
    except (OSError, ValueError, KeyError) as exc:
        raise PoolError(f"pool {pool.name!r}: cannot read its type files: {exc}") from exc
    return meta or pool.meta


def pool_meta(location: Location, table: DeltaTable, files: TypeFiles) -> PoolMeta:
    """The zync metadata of a Delta table, or :class:`NotAPool` saying what is missing."""
    try:
        meta = read_meta(table, files)
    except (OSError, ValueError, KeyError) as exc:
        raise PoolError(f"pool at {location}: cannot read its type files: {exc}") from exc
    problems = shape_problems(delta.arrow_schema(table))
    if meta is None:
        problems.insert(0, "its description has no zync metadata")
    if problems or meta is None:
        raise NotAPool(f"{location} is a Delta table but not a zync pool: " + "; ".join(problems))
    return meta
