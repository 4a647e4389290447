"""The console's engine in a child process (zync_tui/console/hosted.py and child.py): the
real EngineBackend over a lake with no Kafka, serving its API on a Unix socket, reached
through the ApiBackend as the console reaches it — results, errors in words, priority,
and the child's end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from zync_tui.console.backend import EngineSettings
from zync_tui.console.hosted import ENGINE_NICENESS, EngineProcess
from zync_tui.console.remote import ApiBackend

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


def test_the_engine_answers_through_its_api_below_the_screens_priority(tmp_path: Path) -> None:
    hosted = EngineProcess(settings(tmp_path / "lake", read_only=True))
    backend = ApiBackend([str(hosted.socket)], read_only=True, hosted=hosted)
    try:
        assert hosted.pid != os.getpid()
        notes = backend.start()
        assert hosted.running_child()
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, hosted.pid) == min(19, ours + ENGINE_NICENESS)
        group = Path(f"/proc/{hosted.pid}/autogroup")
        if group.exists():  # a kernel that shares the CPU between sessions first
            assert group.read_text().split()[-1] == str(ENGINE_NICENESS)
            ours_group = Path("/proc/self/autogroup").read_text().split()[:1]  # empty: the root group
            assert group.read_text().split()[:1] != ours_group
        assert f"lake {tmp_path / 'lake'}" in notes
        assert backend.title == "zync"
        loops = backend.loops()
        assert [(v.name, v.state) for v in loops] == [
            ("from-kafka", "not run"), ("etl", "not run"), ("to-kafka", "not run")
        ]
        assert backend.etl().error == "no ETL configuration loaded"
        assert backend.topics().kafka_error is not None  # Kafka at 127.0.0.1:1: in words
        assert any("lake" in entry.message for entry in backend.drain_log())
        with pytest.raises(PermissionError, match="read-only console"):
            backend.start_loop("etl")
        with pytest.raises(PermissionError, match="read-only console"):
            backend.run_etl_pass()
        assert backend.demo is None  # not a demo: no batches, no `n` key
        assert stat_mode(hosted.socket) == 0o600
    finally:
        backend.close()
    assert not hosted.running_child()
    assert not hosted.socket.exists()


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_engine_ends_with_the_console_killed(tmp_path: Path) -> None:
    """kill -9 of the console: its engine stops its loops and exits by itself."""
    code = (
        "import time\n"
        "from zync_tui.console.backend import EngineSettings\n"
        "from zync_tui.console.hosted import EngineProcess\n"
        f"engine = EngineProcess(EngineSettings(lake_root={str(tmp_path / 'lake')!r}, read_only=True))\n"
        "engine.wait_listening()\n"
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
