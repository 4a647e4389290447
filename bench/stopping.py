"""Benchmarks stop what they start, also when they are stopped.

A benchmark starts brokers, registries or S3 servers and stops them by PID in a
``finally``. Python's default SIGTERM ends the process without running it, so a
benchmark stopped with ``kill`` (or ``timeout``) left its children behind.
:func:`stop_on_sigterm` makes SIGTERM end the benchmark as ``sys.exit`` does, through
its ``finally`` blocks.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


def stop_on_sigterm() -> None:
    """SIGTERM raises SystemExit (status 143) in the main thread."""

    def _exit(signum: int, frame: FrameType | None) -> None:
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)
