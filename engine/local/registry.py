"""The embedded Schema Registry as a child process: zync's own Confluent-compatible
service (:mod:`engine.registry`), durable in SQLite, on 127.0.0.1."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path
from typing import Final

from engine.local.processes import Process, start
from engine.registry.launch import start_registry_process

REGISTRY: Final = "registry"
DEFAULT_REGISTRY_PORT: Final = 8081


def registry_ready(url: str, timeout: float = 2.0) -> bool:
    """True when the registry at ``url`` answers ``GET /subjects`` with 200."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url.rstrip("/") + "/subjects", timeout=timeout) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


def start_registry(
    log_dir: Path,
    port: int | None = None,
    *,
    db: Path | None = None,
    timeout: float = 60.0,
) -> Process:
    """Start zync's Schema Registry on 127.0.0.1 and wait until ``GET /subjects`` is 200.

    ``port``: None prefers 8081 (else a free port), 0 takes any free port, another number
    is used as given. ``db`` defaults to ``log_dir/registry.db``; the log goes to
    ``log_dir/registry.log``. The caller stops it with ``stop_process``.
    """
    database = db or log_dir / "registry.db"

    def launch(chosen: int, log_file: Path) -> subprocess.Popen[bytes]:
        return start_registry_process(chosen, database, log_file, host="127.0.0.1", detach=True)

    def ready(proc: Process, wait: float) -> bool:
        return registry_ready(proc.address, wait)

    return start(REGISTRY, log_dir, port, DEFAULT_REGISTRY_PORT, launch, ready, timeout)
