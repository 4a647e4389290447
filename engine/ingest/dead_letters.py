"""Bad records: a record whose key or value cannot be decoded, or that the shaper fails
on, becomes a dead-letter row (stage, error, raw key and value bytes) committed with the
records around it, in arrival order (``--on-error deadletter``); or, with ``--on-error
fail``, the :class:`~engine.ingest.errors.BadRecord` that stops the batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn

import pyarrow as pa
import pyarrow.compute as pc

from engine.ingest.errors import BadRecord
from engine.lake.pool_record import DEADLETTER_TYPE, MARKER_TYPE, ROW_SCHEMA

if TYPE_CHECKING:
    from engine.ingest.state import LoopState, PoolState

#: The stage of a record that could not be decoded (the shaper's is its own ``STAGE``).
DECODE_STAGE = "decode"

#: Per batch row that failed: (stage, error).
Bad = dict[int, tuple[str, str]]


def with_dead_letters(
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


def refuse(
    shared: LoopState,
    state: PoolState,
    bad: Mapping[int, tuple[str, str]],
    topic_of: Sequence[str],
    partitions: Sequence[int],
    offsets: Sequence[int],
) -> NoReturn:
    """``--on-error fail``: the batch is not committed; name its first bad record."""
    i = min(bad)
    stage, error = bad[i]
    topic, partition, offset = topic_of[i], partitions[i], offsets[i]
    with shared.lock:
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
