"""The console's engine in a child process (zync_tui.console.hosted): the real
EngineBackend over a lake with no Kafka, reached through EngineProcess as the console
reaches it — results, errors in words, priority, and the child's end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from zync_tui.console.backend import EngineSettings
from zync_tui.console.hosted import ENGINE_NICENESS, EngineFailure, EngineProcess

ROOT = Path(__file__).resolve().parents[2]
NO_KAFKA = {"bootstrap_servers": "127.0.0.1:1"}
NO_REGISTRY = {"url": "http://127.0.0.1:1"}


def settings(lake: Path, **kwargs: object) -> EngineSettings:
    return EngineSettings(
        lake_root=lake, kafka_overrides=NO_KAFKA, registry_overrides=NO_REGISTRY, **kwargs
    )


def gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for its new parent counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def wait_until(predicate: Callable[[], bool], limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {limit:g} s waiting for {what}"
        time.sleep(0.05)


def test_the_engine_answers_from_its_own_process_below_the_screens_priority(tmp_path: Path) -> None:
    engine = EngineProcess(settings(tmp_path / "lake", read_only=True))
    try:
        assert engine.pid != os.getpid()
        assert engine.running_child()
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, engine.pid) == min(19, ours + ENGINE_NICENESS)
        notes = engine.start()
        assert f"lake {tmp_path / 'lake'}" in notes
        assert engine.title == "zync"
        loops = engine.loops()
        assert [(v.name, v.state) for v in loops] == [
            ("from-kafka", "not run"), ("etl", "not run"), ("to-kafka", "not run")
        ]
        assert engine.etl().error == "no ETL configuration loaded"
        assert engine.topics().kafka_error is not None  # Kafka at 127.0.0.1:1: in words
        assert any("lake" in entry.message for entry in engine.drain_log())
        # the engine's own errors come back with its words
        with pytest.raises(EngineFailure, match="read-only console: starting and stopping"):
            engine.start_loop("etl")
        with pytest.raises(EngineFailure, match="read-only console: running an ETL pass"):
            engine.run_etl_pass()
        with pytest.raises(EngineFailure, match="not a demo"):
            engine.next_batch()
    finally:
        engine.close()
    assert not engine.running_child()
    with pytest.raises(EngineFailure, match="stopped"):
        engine.loops()


def test_the_engine_ends_with_the_console_killed(tmp_path: Path) -> None:
    """kill -9 of the console: its engine stops its loops and exits by itself."""
    code = (
        "import time\n"
        "from zync_tui.console.backend import EngineSettings\n"
        "from zync_tui.console.hosted import EngineProcess\n"
        f"engine = EngineProcess(EngineSettings(lake_root={str(tmp_path / 'lake')!r}, read_only=True))\n"
        "engine.start()\n"
        "print(engine.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    console = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert console.stdout is not None
        child = int(console.stdout.readline())
        assert not gone(child)
    finally:
        console.kill()
        console.wait(30)
    wait_until(lambda: gone(child), 30, "the engine's process to end")
