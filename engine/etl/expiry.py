"""Event-time expiry of pending records.

A pending record (a denorm side waiting for its partner, a record of an incomplete
transaction bundle) expires when the newest Kafka timestamp seen on its topic is more
than the rule's ``expire-after`` newer than its own timestamp (docs/design.md, "Words": expired).
The clock is the data, never the wall clock, so replaying the same records gives the
same result. Expired records are marked ``expired``, give no output, and no longer hold
their cursor back; ``zync expired`` shows them with their full record.

The newest timestamp per topic is the larger of the one stored with the ETL's positions
(``zync.etl/<name>/newest/<topic>``) and the newest among the records a pass reads.
Expiry is decided on the driver over the pass's collected fates (vectorized Arrow
compute), after Spark planned the rules, so the Spark plan does not depend on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.etl.config import TxnRule
from engine.lake.pool_record import EXPIRED

if TYPE_CHECKING:
    from engine.etl.config import EtlConfig

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(value: datetime) -> int:
    """Epoch microseconds of an aware (or UTC-naive) datetime."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(microseconds=1)


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def apply_expiry(fates: pa.Table, config: EtlConfig, newest: Mapping[str, int]) -> pa.Table:
    """``fates`` with pending records the rules expire turned ``expired``.

    A pending record of a rule with ``expire-after`` expires when its timestamp is more
    than that older than ``newest[topic]``. For a txn rule, one expired record expires
    its whole bundle (every fate row with the same rule index and ``bundle``).
    Vectorized over the rows: one mask per (rule, topic), none per record.
    """
    status = fates.column("status")
    pending = pc.equal(status, "pending")
    ri = fates.column("ri")
    topic = fates.column("topic")
    ts = fates.column("ts").cast(pa.timestamp("us", tz="UTC"))
    mask = pc.and_(pending, pa.scalar(False))
    bundles = []
    for index, rule in enumerate(config.transforms):
        if rule.expire is None:
            continue
        span = rule.expire // timedelta(microseconds=1)
        for name in rule.topics:
            if name not in newest:
                continue
            limit = pa.scalar(newest[name] - span, pa.timestamp("us", tz="UTC"))
            here = pc.and_(
                pc.and_(pending, pc.equal(ri, index)),
                pc.and_(pc.equal(topic, name), pc.less(ts, limit)),
            )
            mask = pc.or_(mask, pc.fill_null(here, False))
        if isinstance(rule, TxnRule):
            bundles.append(index)
    if bundles:
        key = pc.binary_join_element_wise(ri.cast(pa.string()), fates.column("bundle"), "\x00")
        in_txn = pc.is_in(ri, pa.array(bundles, pa.int32()))
        gone = pc.unique(pc.filter(key, pc.and_(mask, in_txn)))
        if len(gone):
            whole = pc.and_(pending, pc.fill_null(pc.is_in(key, gone), False))
            mask = pc.or_(mask, whole)
    if not pc.any(mask).as_py():
        return fates
    index_of = fates.schema.get_field_index("status")
    return fates.set_column(index_of, "status", pc.if_else(mask, EXPIRED, status))


def newest_timestamps(fates: pa.Table, stored: Mapping[str, int]) -> dict[str, int]:
    """Per topic, the newest Kafka timestamp (epoch µs) of ``stored`` and ``fates``."""
    newest = dict(stored)
    if fates.num_rows == 0:
        return newest
    stamped = fates.select(["topic", "ts"]).filter(pc.is_valid(fates.column("ts")))
    if stamped.num_rows == 0:
        return newest
    grouped = stamped.group_by("topic").aggregate([("ts", "max")])
    for name, value in zip(
        grouped.column("topic").to_pylist(), grouped.column("ts_max").to_pylist(), strict=True
    ):
        newest[name] = max(newest.get(name, 0), micros(value))
    return newest


def age(newest: int | None, timestamp: datetime | None) -> timedelta | None:
    """How much older a record is than the newest record seen on its topic."""
    if newest is None or timestamp is None:
        return None
    return from_micros(newest) - (timestamp if timestamp.tzinfo else timestamp.replace(tzinfo=UTC))


def format_age(value: timedelta | None) -> str:
    """``1h 2m``, ``45s``, ``3d 4h``; ``-`` when unknown."""
    if value is None:
        return "-"
    seconds = int(value.total_seconds())
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = [f"{n}{unit}" for n, unit in parts if n][:2]
    return sign + (" ".join(shown) if shown else "0s")
