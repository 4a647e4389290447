"""The console's heap, out of the garbage collector's way once the console has started.

At 200 topics each poll brings hundreds of rows, and Python's full collections walked
the whole app — its widgets, the modules, the engine's client — holding the screen's
thread 100–400 ms, a key's p95 five times the invoice configuration's
(bench/console_latency.py --wide). Once the first snapshots are in, what is in memory
leaves the collector's watch (``gc.freeze``) and the young generation is collected every
10,000 new objects, not 700: collections walk what was made since, a tenth as often.
When the console ends, all of it is collectable again, at the usual pace.
"""

from __future__ import annotations

import gc

#: The young generation's collection threshold once the console has started.
SETTLED_GC_THRESHOLD = 10_000


class Heap:
    """:meth:`settle` once started (again: nothing), :meth:`thaw` at the end."""

    def __init__(self) -> None:
        #: the thresholds before :meth:`settle` (None: not settled)
        self._before: tuple[int, int, int] | None = None

    def settle(self) -> None:
        if self._before is not None:
            return
        self._before = gc.get_threshold()
        gc.collect()
        gc.freeze()
        gc.set_threshold(SETTLED_GC_THRESHOLD, 10, 10)

    def thaw(self) -> None:
        if self._before is None:
            return
        gc.unfreeze()
        gc.set_threshold(*self._before)
        self._before = None
