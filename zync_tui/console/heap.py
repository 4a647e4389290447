"""The console's heap, out of the garbage collector's way once the console has started.

At 200 topics each poll brings hundreds of rows, and Python's full collections walked
the whole app — its widgets, the modules, the engine's client — holding the screen's
thread 100–400 ms, a key's p95 five times the invoice configuration's
(bench/console_latency.py --wide). Once the first snapshots are in, what is in memory
leaves the collector's watch (``gc.freeze``) and the young generation is collected every
10,000 new objects, not 700: collections walk what was made since, a tenth as often.
When the console ends, all of it is collectable again, at the usual pace.

Those collections still fell where the objects were made, and at 200 topics that is a
key: drawing a full table of 400 rows makes ~6,000 objects, so one Topics key in two
paid a collection (5 ms and more, 15 of 20 presses in one run). So the console also
collects when it has nothing else to do: :meth:`Heap.tidy` after each poll has been
shown, the young generation (and every tenth time the next), which leaves the automatic
collections little to do during a key (bench/console_latency.py --wide, the Topics
key's p50 18 → 12 ms).
"""

from __future__ import annotations

import gc

#: The young generation's collection threshold once the console has started.
SETTLED_GC_THRESHOLD = 10_000
#: One :meth:`Heap.tidy` in this many also collects the generation after the young one.
TIDY_OLDER_EVERY = 10


class Heap:
    """:meth:`settle` once started (again: nothing), :meth:`tidy` when idle, :meth:`thaw`
    at the end."""

    def __init__(self) -> None:
        #: the thresholds before :meth:`settle` (None: not settled)
        self._before: tuple[int, int, int] | None = None
        #: :meth:`tidy` calls since :meth:`settle`
        self.tidied = 0

    def settle(self) -> None:
        if self._before is not None:
            return
        self._before = gc.get_threshold()
        gc.collect()
        gc.freeze()
        gc.set_threshold(SETTLED_GC_THRESHOLD, 10, 10)

    def tidy(self) -> None:
        """Collect what the last poll left, while the screen's thread has nothing else to
        do (settled consoles only: before that, the usual pace)."""
        if self._before is None:
            return
        self.tidied += 1
        gc.collect(1 if self.tidied % TIDY_OLDER_EVERY == 0 else 0)

    def thaw(self) -> None:
        if self._before is None:
            return
        gc.unfreeze()
        gc.set_threshold(*self._before)
        self._before = None
