"""What an ETL pass and its inspection give back: :class:`PassResult` (what one pass did,
in words and as JSON), :class:`PendingRecord` and :class:`ExpiredRecord` (records still
waiting, and records a rule gave up on).

A pass result is put in words here and nowhere else: :meth:`PassResult.summary` for the
CLI, logs and a loop's event log, :func:`counts_line` for the console's one line of totals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from engine.etl.cursors import TopicPartition
from engine.etl.timings import Timings

if TYPE_CHECKING:
    import pyarrow as pa

    from engine.etl.plan import ReadFrom

NOTHING_NEW = "nothing new to ETL"

#: How :meth:`PassResult.summary` puts a pass in words: ``lines`` (the CLI and logs: a
#: line per topic) or ``line`` (one line, for a loop's event log).
SummaryForm = Literal["lines", "line"]

#: A pass slower than this says its longest phases in its line.
SLOW_PASS = 2.0


@dataclass
class PassResult:
    """What one pass did (or, with ``dry_run``, would do)."""

    etl: str
    dry_run: bool = False
    committed: bool = False
    #: The staging version the (last) plan read, and the version after the pass.
    read_version: int = -1
    staging_version: int = -1
    consumed: dict[str, int] = field(default_factory=dict)
    processed: dict[str, int] = field(default_factory=dict)
    expired: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, int] = field(default_factory=dict)
    #: Per rule (its label): the records this pass expired, and those still pending.
    expired_rules: dict[str, int] = field(default_factory=dict)
    pending_rules: dict[str, int] = field(default_factory=dict)
    #: Output offsets given, per output topic: (first, last).
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Cursors after the pass, and those this pass moved.
    cursors: dict[TopicPartition, int] = field(default_factory=dict)
    moved: dict[TopicPartition, int] = field(default_factory=dict)
    attempts: int = 1
    seconds: float = 0.0
    #: Where its input came from: ``spark`` (delta-spark), ``window`` (kept from the
    #: last pass) or ``log`` (a small input read by delta-rs, no Spark read).
    read_from: ReadFrom = "spark"
    #: Where the pass spent its time (engine.etl.timings).
    timings: Timings = field(default_factory=Timings)
    #: The output rows (``topic, offset, timestamp, key, value``), for dry runs.
    rows: pa.Table | None = None

    @property
    def warm(self) -> bool:
        """True when the pass read from the ETL's window (engine.etl.window)."""
        return self.read_from == "window"

    @property
    def nothing_new(self) -> bool:
        return not self.consumed and not self.outputs and not self.moved

    def summary(self, form: SummaryForm = "lines") -> str:
        """The pass in words: ``lines`` for the CLI and logs, ``line`` (one line) for a
        loop's event log. A pass with nothing new is one line either way."""
        if form == "line" and not self.nothing_new:
            return self._line()
        return self._lines()

    def _lines(self) -> str:
        mode = " (dry run: nothing committed)" if self.dry_run else ""
        if self.nothing_new:
            waiting = sum(self.pending.values())
            tail = f"; {waiting} record(s) still pending" if waiting else ""
            return f"{self.etl}: {NOTHING_NEW}{tail} (staging version {self.staging_version}){mode}"
        lines = [f"{self.etl}: one pass in {self.seconds:.2f}s{mode}"]
        topics = sorted(set(self.consumed) | set(self.pending))
        ins = []
        for topic in topics:
            bits = [f"{self.processed.get(topic, 0)} processed"]
            if self.expired.get(topic):
                bits.append(f"{self.expired[topic]} expired")
            if self.pending.get(topic):
                bits.append(f"{self.pending[topic]} pending")
            ins.append(f"  in  {topic}: " + ", ".join(bits))
        lines += _shown(ins, "input topic")
        outs = []
        for topic, count in sorted(self.outputs.items()):
            first, last = self.offsets.get(topic, (0, 0))
            outs.append(f"  out {topic}: {count} record(s), offsets {first}..{last}")
        lines += _shown(outs, "output topic")
        moved = [f"  cursor {t}/{p} → {c}" for (t, p), c in sorted(self.moved.items())]
        lines += _shown(moved, "cursor")
        if self.committed:
            lines.append(f"  staging version {self.read_version} → {self.staging_version}")
        else:
            lines.append(f"  staging version {self.staging_version}")
        if self.attempts > 1:
            lines.append(f"  re-planned {self.attempts - 1} time(s) after conflicting commits")
        return "\n".join(lines)

    def _line(self) -> str:
        if len(self.outputs) > LINE_TOPICS:  # a connector's hundreds of tables
            outs = f"{sum(self.outputs.values())} record(s) to {len(self.outputs)} topics"
        else:
            outs = ", ".join(
                f"{topic} +{n} (offsets {self.offsets[topic][0]}..{self.offsets[topic][1]})"
                if topic in self.offsets
                else f"{topic} +{n}"
                for topic, n in sorted(self.outputs.items())
            )
        consumed = sum(self.consumed.values())
        pending = sum(self.pending.values())
        bits = [f"{consumed} consumed"]
        if outs:
            bits.append(f"out {outs}")
        if pending:
            bits.append(f"{pending} pending")
        expired = sum(self.expired.values())
        if expired:
            bits.append(f"{expired} expired")
        version = f"staging v{self.staging_version}" if self.committed else "nothing committed"
        how = "" if self.timings.row_refusal is None else f", by Spark: {self.timings.row_refusal}"
        return f"pass: {', '.join(bits)}; {version} ({self.seconds:.2f}s{self._slowest()}{how})"

    def _slowest(self) -> str:
        """A slow pass's two longest phases (``; check 9.1s, evaluate 1.2s``): where an
        operator looks first."""
        if self.seconds < SLOW_PASS:
            return ""
        phases = sorted(self.timings.seconds.items(), key=lambda p: p[1], reverse=True)[:2]
        return "".join(
            f"{'; ' if i == 0 else ', '}{name} {secs:.1f}s" for i, (name, secs) in enumerate(phases)
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "etl": self.etl,
            "dry_run": self.dry_run,
            "committed": self.committed,
            "nothing_new": self.nothing_new,
            "read_version": self.read_version,
            "staging_version": self.staging_version,
            "consumed": self.consumed,
            "processed": self.processed,
            "expired": self.expired,
            "pending": self.pending,
            "outputs": self.outputs,
            "expired_rules": self.expired_rules,
            "pending_rules": self.pending_rules,
            "offsets": {t: list(v) for t, v in self.offsets.items()},
            "cursors": _tp_json(self.cursors),
            "moved": _tp_json(self.moved),
            "attempts": self.attempts,
            "seconds": round(self.seconds, 3),
            "warm": self.warm,
            "read_from": self.read_from,
            "phases": {k: round(v, 4) for k, v in self.timings.seconds.items()},
            "spark_jobs": self.timings.spark_jobs,
            "evaluated_by": self.timings.evaluated_by,
        }
        if self.rows is not None:
            data["rows"] = [
                {**row, "timestamp": row["timestamp"].isoformat() if row["timestamp"] else None}
                for row in self.rows.to_pylist()
            ]
        return data


#: Output topics a pass's one-line summary names; more are counted.
LINE_TOPICS = 5
#: Lines per kind (input topics, output topics, cursors) a pass's summary shows.
SUMMARY_LINES = 20


def _shown(lines: list[str], what: str) -> list[str]:
    """``lines``, the first :data:`SUMMARY_LINES` of them and a count of the others
    (``--json`` has them all)."""
    if len(lines) <= SUMMARY_LINES:
        return lines
    rest = len(lines) - SUMMARY_LINES
    return [*lines[:SUMMARY_LINES], f"  … and {rest} more {what}(s) (--json lists them all)"]


def counts_line(
    consumed: int | None,
    outputs: int | None,
    expired: int | None,
    pending: int | None,
    version: int | None,
    *,
    nothing_new: bool,
) -> str:
    """A pass's totals on one line, as the console shows them (None: not known, ``?``)."""
    if nothing_new:
        return NOTHING_NEW

    def n(v: int | None) -> str:
        return "?" if v is None else str(v)

    shown = f" → staging v{version}" if version is not None else ""
    return (
        f"consumed {n(consumed)} · output {n(outputs)} · "
        f"expired {n(expired)} · pending {n(pending)}{shown}"
    )


def _record_json(record: PendingRecord | ExpiredRecord) -> dict[str, Any]:
    """A pending or expired record as JSON: its fields, the timestamp in ISO 8601 and
    the age in seconds (``age_seconds``)."""
    data: dict[str, Any] = {}
    for name, value in dataclasses.asdict(record).items():
        if name == "timestamp":
            data[name] = value.isoformat() if value else None
        elif name == "age":
            data["age_seconds"] = value.total_seconds() if value is not None else None
        else:
            data[name] = value
    return data


def _tp_json(values: Mapping[TopicPartition, int]) -> dict[str, int]:
    return {f"{t}/{p}": v for (t, p), v in sorted(values.items())}


@dataclass(frozen=True)
class PendingRecord:
    """An input record after its cursor that no rule has consumed yet."""

    topic: str
    partition: int
    offset: int
    key: str | None
    rule: str | None
    timestamp: datetime | None
    age: timedelta | None
    seqno: int

    def to_json(self) -> dict[str, Any]:
        return _record_json(self)


@dataclass(frozen=True)
class ExpiredRecord:
    """An input record a rule gave up on, with its full record from the raw pool."""

    topic: str
    partition: int
    offset: int
    key: str | None
    value: str | None
    rule: str | None
    timestamp: datetime | None
    age: timedelta | None
    seqno: int | None

    def to_json(self) -> dict[str, Any]:
        return _record_json(self)
