"""An outage of Kafka or of the Schema Registry, as a loop tells it.

A loop that finds a dependency unreachable does not fail: it waits, retries, and says so
twice — once when the outage begins ("Kafka at 127.0.0.1:9092 unreachable since 12:00:01
(no answer within 5s), waiting") and once when it ends ("Kafka at 127.0.0.1:9092 back
after 21s, resuming"). :class:`Outage` keeps that state and makes those lines; each loop
decides what counts as an outage (:mod:`engine.ingest.faults`, :mod:`engine.deliver.faults`)
and where its lines go.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: The kind of the line that begins an outage, and of the one that ends it.
UNREACHABLE = "unreachable"
BACK = "back"

#: Where an outage's lines go: ``report(kind, message)``.
Report = Callable[[str, str], None]


class Outage:
    """Whether ``what`` (``"Kafka at host:port"``, ``"Schema Registry at URL"``) is out,
    since when, and the two lines that say so (``prefix`` starts each, e.g. a topic).
    Safe to use from any thread; ``report`` is called outside the lock."""

    def __init__(self, what: str, report: Report, *, prefix: str = "") -> None:
        self.what = what
        self._report = report
        self._prefix = prefix
        self._lock = threading.Lock()
        self._since: float | None = None  # wall clock
        self._started: float | None = None  # monotonic
        #: outages so far (a caller compares it before and after a call)
        self.count = 0

    @property
    def down(self) -> bool:
        return self._started is not None

    @property
    def since(self) -> float | None:
        """When the current outage began (``time.time()``), or None."""
        return self._since

    def begin(self, reason: str, since: float | None = None) -> bool:
        """``what`` does not answer (``reason``, in a few words) since ``since`` (a
        ``time.monotonic()`` time, e.g. when an unanswered request was sent; None: now).
        The first call of an outage says so; True then."""
        with self._lock:
            if self._started is not None:
                return False
            now = time.monotonic()
            self._started = now if since is None else min(since, now)
            self._since = time.time() - (now - self._started)
            self.count += 1
            stamp = time.strftime("%H:%M:%S", time.localtime(self._since))
        self._report(
            UNREACHABLE, f"{self._prefix}{self.what} unreachable since {stamp} ({reason}), waiting"
        )
        return True

    def end(self) -> float | None:
        """``what`` answers again: after an outage, says so and returns how long it
        lasted, in seconds; None when there was none."""
        with self._lock:
            if self._started is None:
                return None
            lasted = time.monotonic() - self._started
            self._started = self._since = None
        self._report(BACK, f"{self._prefix}{self.what} back after {lasted:.0f}s, resuming")
        return lasted
