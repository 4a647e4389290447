"""Python's garbage collector paused while from-kafka runs: batches are millions of
short-lived objects and no cycles, so automatic collections cost more than they find
(docs/design.md#readers-and-writers, measured). Collected between commits instead (the
young generations after a commit at most every few seconds — each collection walks every
message still buffered, ~100 k objects —, everything once a minute), so a long run stays
bounded."""

from __future__ import annotations

import gc
import time

#: With the garbage collector paused, a full collection at most this often (seconds).
FULL_GC_EVERY = 60.0
#: ... and one of the young generations, after a commit, at most this often (seconds).
YOUNG_GC_EVERY = 5.0


class GcPause:
    """``wanted``: pause at all (``IngestOptions.pause_gc``; nothing to do when the
    collector is already off). Process-wide while paused."""

    def __init__(self, wanted: bool) -> None:
        self.wanted = wanted and gc.isenabled()
        self.paused = False
        self._full_at = 0.0
        self._young_at = 0.0

    def pause(self) -> None:
        if self.wanted:
            gc.disable()
            self.paused = True
            self._full_at = self._young_at = time.monotonic()

    def resume(self) -> None:
        if self.wanted:
            self.paused = False
            gc.enable()

    def after_commit(self) -> None:
        """From the writer thread, after each commit."""
        if self.paused and time.monotonic() - self._young_at >= YOUNG_GC_EVERY:
            self._collect()

    def when_idle(self) -> None:
        """From the consumer thread now and then: idle for long, no commit collects."""
        if self.paused and time.monotonic() - self._full_at >= FULL_GC_EVERY:
            self._collect()

    def _collect(self) -> None:
        now = time.monotonic()
        if now - self._full_at >= FULL_GC_EVERY:
            gc.collect()
            self._full_at = now
        else:
            gc.collect(1)
        self._young_at = now
