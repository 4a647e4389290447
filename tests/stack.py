"""Private broker and registry processes for test sessions (see tests/conftest.py).

Each runs on a free port on 127.0.0.1, is ready when returned (readiness polled with a
timeout, no fixed sleeps) and is stopped by PID, through the same engine.local code
that `zync dev up|down` uses.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass
from pathlib import Path

from engine.local import broker, processes, registry

READY_TIMEOUT = 60.0

#: The session broker (tests/conftest.py) applies a topic's retention and compaction
#: within seconds, so that to-kafka's tests can give a topic a retention of seconds, or
#: have the tombstone at its end compacted away (retention.ms, segment.ms,
#: delete.retention.ms... are the topics' own settings): these are the broker-wide
#: ones, checked every 5 minutes, first 30 s after start, and every 15 s by default.
#: One more check a second costs the broker nothing measurable.
SESSION_BROKER = broker.BrokerOptions(
    properties={
        "log.retention.check.interval.ms": "1000",
        "log.initial.task.delay.ms": "1000",
        "log.cleaner.backoff.ms": "1000",
    }
)


@dataclass(frozen=True)
class Running:
    """A started broker or registry.

    ``address`` is ``127.0.0.1:PORT``; ``url`` is ``http://127.0.0.1:PORT`` for the
    registry and the same ``127.0.0.1:PORT`` as ``address`` for the broker (what
    ``bootstrap.servers`` takes).
    """

    process: processes.Process

    @property
    def address(self) -> str:
        return f"{processes.HOST}:{self.process.port}"

    @property
    def url(self) -> str:
        return self.process.address

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log_file(self) -> Path:
        return self.process.log_file

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL); does nothing when already stopped."""
        processes.stop_process(self.process, timeout=10.0)


def _started(process: processes.Process) -> Running:
    running = Running(process)
    atexit.register(running.stop)  # a safety net if a fixture's teardown never runs
    return running


def start_broker(tmp_dir: Path, options: broker.BrokerOptions | None = None) -> Running:
    """An Apache Kafka broker (KRaft) on a free port, its data and log in ``tmp_dir``;
    ``options`` adds listeners, properties and SCRAM users (the security tests)."""
    return _started(
        broker.start_broker(Path(tmp_dir), port=0, options=options, timeout=READY_TIMEOUT)
    )


def start_registry(tmp_dir: Path) -> Running:
    """zync's Schema Registry on a free port, its database and log in ``tmp_dir``."""
    return _started(registry.start_registry(Path(tmp_dir), port=0, timeout=READY_TIMEOUT))
