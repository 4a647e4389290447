"""How the native allocators of from-kafka's libraries keep freed memory.

polars (the batch decoders) and delta-rs (the Delta writes) allocate with jemalloc,
which by default gives pages freed for ten seconds back to the kernel bit by bit, so
every batch touched pages the kernel had to hand out again: ~4 page faults per kB of a
batch, at a few µs each on a virtual machine — a tenth of from-kafka's CPU
(bench/RESULTS.md, "Peers"). Kept 30 s, a batch's memory serves the next; an idle
process still gives it back.

jemalloc reads its settings when its library loads: :func:`keep_freed_pages` must run
before polars or deltalake is imported to reach them (``zync from-kafka`` calls it first
thing; in a process that imported them already it changes nothing). A value set in the
environment wins.
"""

from __future__ import annotations

import os

#: The environment variable jemalloc (as Rust's tikv-jemallocator builds it) reads.
JEMALLOC_ENV = "_RJEM_MALLOC_CONF"
#: Freed pages kept 30 s before they are given back (dirty), then lazily (muzzy).
KEEP_FREED_PAGES = "dirty_decay_ms:30000,muzzy_decay_ms:30000"


def keep_freed_pages() -> None:
    """Have jemalloc keep freed pages 30 s (unless the environment says otherwise)."""
    os.environ.setdefault(JEMALLOC_ENV, KEEP_FREED_PAGES)
