"""Killing `zync from-kafka` with SIGKILL at random moments while records arrive: the
loop both from-kafka crash tests run (a local lake and an ``s3://`` one)."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest


def sha(text: str | None) -> str | None:
    """The payload's hash, as the tests compare what was produced with the pool."""
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def kill_at_random_moments(
    cmd: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    producer: threading.Thread,
    version: Callable[[], int],
    rnd: random.Random,
    min_kills: int,
    random_wait: tuple[float, float],
    after_commit_wait: float,
    limit: float,
) -> tuple[int, int]:
    """Start ``cmd`` and kill it with SIGKILL, again and again, until ``producer`` has
    finished and at least ``min_kills`` kills were made. Odd rounds kill after a random
    moment (``random_wait`` seconds: starting up, consuming or committing), even rounds
    once the run has committed (``version`` moved) plus up to ``after_commit_wait``
    seconds: mid-ingest for sure. Returns (kills, kills of a process that had
    committed)."""
    kills = busy_kills = 0
    started = time.monotonic()
    while producer.is_alive() or kills < min_kills:
        before = version()
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        if kills % 2:
            time.sleep(rnd.uniform(*random_wait))
        else:
            deadline = time.monotonic() + 30
            while version() <= before and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.02)
            time.sleep(rnd.uniform(0.0, after_commit_wait))
        if proc.poll() is not None:
            assert proc.stderr is not None
            pytest.fail(f"from-kafka exited by itself ({proc.returncode}): {proc.stderr.read().decode()}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
        kills += 1
        busy_kills += version() > before  # killed while working, not while starting up
        assert time.monotonic() - started < limit, "the kill loop takes too long"
    return kills, busy_kills
