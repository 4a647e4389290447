"""One delivery per topic on this machine: an ``flock`` under ``<zync home>/locks/``.

A second to-kafka on the same topic is refused at once here; one on another host is
fenced by Kafka (the transactional id, see :mod:`engine.deliver.transactions`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from engine.deliver.errors import DeliveryBusy
from engine.settings.home import zync_home
from engine.settings.kafka import KafkaProfile


def lock_path(kafka: KafkaProfile, topic: str, home: Path | None = None) -> Path:
    digest = hashlib.sha1(f"{kafka.bootstrap_servers}\0{topic}".encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in topic)[:80]
    return (home or zync_home()) / "locks" / f"to-kafka-{safe}-{digest}.lock"


@contextmanager
def topic_lock(kafka: KafkaProfile, topic: str, owner: str) -> Iterator[Path]:
    """Hold the machine-wide lock of delivering to ``topic``; :class:`DeliveryBusy` if
    another process (or thread) holds it."""
    path = lock_path(kafka, topic)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            with suppress(OSError):
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
            who = f" ({holder})" if holder else ""
            raise DeliveryBusy(
                f"another zync to-kafka is delivering to topic {topic!r}{who}; "
                "stop it first (one delivery per topic)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, {owner}\n".encode(), 0)
        _held_locks.add(str(path))
        try:
            yield path
        finally:
            _held_locks.discard(str(path))
            with suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# flock is per open file description: a second Delivery in the same process would get
# its own and be refused, which is what we want; this set only serves messages.
_held_locks: set[str] = set()
