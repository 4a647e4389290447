"""Many outputs' routine lines, folded into one line every few seconds.

A process delivering a whole database has hundreds of outputs, and each says, at every
start and every pass, that it found its topic, where it resumes, what it delivered and
that it caught up: a wall of lines in which an operator misses the one that matters.
With more than :data:`FOLD_OUTPUTS` outputs, text lines fold those routine events into
one summary every :data:`FOLD_SECONDS` ("to-kafka   400 output(s): 1,200 record(s)
delivered, staging versions 3..5; 400 caught up"); whatever is not routine (a failure, a
retry, an outage, another owner) still prints at once, on a line of its own. JSON lines
never fold: a log pipeline filters them itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

#: Above this many outputs, the routine lines of to-kafka are folded.
FOLD_OUTPUTS = 20
#: How often a folded summary is printed (when something happened).
FOLD_SECONDS = 5.0
#: The per-output events that are routine (anything else prints on its own line).
ROUTINE = frozenset({"waiting", "started", "resumed", "delivered", "caught-up", "stopped"})


@dataclass
class _Tally:
    outputs: set[str] = field(default_factory=set)
    waiting: int = 0
    started: int = 0
    resumed: int = 0
    delivered: set[str] = field(default_factory=set)
    records: int = 0
    versions: tuple[int, int] | None = None
    caught_up: int = 0
    stopped: int = 0

    def add(self, kind: str, topic: str, records: int, version: int | None) -> None:
        self.outputs.add(topic)
        if kind == "waiting":
            self.waiting += 1
        elif kind == "started":
            self.started += 1
        elif kind == "resumed":
            self.resumed += 1
        elif kind == "caught-up":
            self.caught_up += 1
        elif kind == "stopped":
            self.stopped += 1
        elif kind == "delivered":
            self.delivered.add(topic)
            self.records += records
            if version is not None:
                low, high = self.versions or (version, version)
                self.versions = (min(low, version), max(high, version))

    def text(self) -> str:
        parts = []
        if self.waiting:
            parts.append(f"{self.waiting} waiting")
        if self.started:
            parts.append(f"{self.started} started")
        if self.resumed:
            parts.append(f"{self.resumed} resumed")
        if self.delivered:
            where = ""
            if self.versions is not None:
                low, high = self.versions
                where = f", staging version {low}" if low == high else f", staging versions {low}..{high}"
            parts.append(
                f"{self.records:,} record(s) delivered to {len(self.delivered)} output(s){where}"
            )
        if self.caught_up:
            parts.append(f"{self.caught_up} caught up")
        if self.stopped:
            parts.append(f"{self.stopped} stopped")
        return f"{len(self.outputs)} output(s): " + "; ".join(parts)


class EventFold:
    """Folds one loop's routine per-output events; ``say(message, at)`` prints a line.
    :meth:`take` is given every event of the loop and says whether it folded it;
    :meth:`close` prints what is left and stops the timer."""

    def __init__(self, say: Callable[[str], None], every: float = FOLD_SECONDS) -> None:
        self._say = say
        self._every = every
        self._lock = threading.Lock()
        self._tally = _Tally()
        self._closed = threading.Event()
        self._timer = threading.Thread(target=self._tick, name="zync-event-fold", daemon=True)
        self._timer.start()

    def take(self, kind: str, fields: dict[str, object]) -> bool:
        topic = fields.get("topic")
        if kind not in ROUTINE or not isinstance(topic, str) or not topic:
            return False
        records = fields.get("records")
        version = fields.get("version")
        with self._lock:
            self._tally.add(
                kind,
                topic,
                records if isinstance(records, int) else 0,
                version if isinstance(version, int) else None,
            )
        return True

    def flush(self) -> None:
        """Print the summary of what was folded since the last one (nothing: nothing)."""
        with self._lock:
            tally, self._tally = self._tally, _Tally()
        if tally.outputs:
            self._say(tally.text())

    def close(self) -> None:
        self._closed.set()
        self._timer.join(timeout=self._every + 1)
        self.flush()

    def _tick(self) -> None:
        while not self._closed.wait(self._every):
            self.flush()
