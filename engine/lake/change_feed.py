"""The records staging versions inserted, read from a pool's change data feed
(delta-rs' ``load_cdf``): what to-kafka delivers and the apply loop folds into tables.

delta-rs refuses a feed that starts at a version holding a metaData action (the table's
creation, a change of the pool's recorded types): :class:`MetadataVersion` says so, and
the caller reads that one version from its added files instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import ZyncError

if TYPE_CHECKING:
    from engine.lake.pools import Pool


class MetadataVersion(Exception):
    """The change data feed cannot start at a version holding a metaData action."""


class ChangeFeedError(ZyncError):
    """A pool's changes cannot be read from its Delta log (files vacuumed, storage)."""


def inserted_records(
    pool: Pool,
    first: int,
    last: int,
    predicate: str,
    columns: Sequence[str],
    rows: Callable[[pa.Table], pa.Table],
) -> pa.Table:
    """The records — not markers or dead letters — that versions ``first..last`` of
    ``pool`` inserted where ``predicate`` holds, as ``rows`` makes them from the feed's
    ``columns`` (``_commit_version`` and ``_commit_timestamp`` may be asked for too);
    delta-rs gives view types Arrow cannot filter, so ``rows`` casts them first."""
    try:
        reader = pool.table.load_cdf(
            starting_version=first,
            ending_version=last,
            predicate=predicate,
            columns=[*columns, "deadletter", "marker", "_change_type"],
        )
        table = pa.RecordBatchReader.from_stream(reader).read_all()
    except Exception as exc:  # noqa: BLE001 - delta-rs raises several kinds
        if "does not have change data enabled" in str(exc):
            raise MetadataVersion from None
        raise ChangeFeedError(
            f"cannot read the changes of pool {pool.name!r} (versions {first}..{last}) "
            f"from its Delta log: {exc}"
        ) from None
    keep = pc.and_(
        pc.and_(pc.is_null(table.column("marker")), pc.is_null(table.column("deadletter"))),
        pc.equal(table.column("_change_type").cast(pa.string()), "insert"),
    )
    return rows(table).filter(keep)
