"""`zync dev up|down|status` and the process helpers, with the real broker and registry."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.local import processes, stack
from engine.settings.files import write_private_json
from engine.settings.kafka import load_kafka_profile
from engine.settings.registry import load_registry_profile
from zync_tui.commands.dev import app

pytestmark = pytest.mark.integration

runner = CliRunner()


def _alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return not stat[stat.rfind(")") + 2 :].startswith("Z")


def _state(home: Path) -> dict:
    return json.loads((home / "dev" / stack.STATE_FILE).read_text())


def _pids(home: Path) -> dict[str, int]:
    return {name: c["pid"] for name, c in _state(home)["components"].items()}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "home"
    monkeypatch.setenv("ZYNC_HOME", str(path))
    for name in ("ZYNC_KAFKA_BOOTSTRAP_SERVERS", "ZYNC_REGISTRY_URL"):
        monkeypatch.delenv(name, raising=False)
    yield path
    stack.down(home=path)  # whatever a failed test left running


@pytest.fixture
def listening() -> Iterator[int]:
    """A port someone else listens on."""
    with socket.socket() as sock:
        sock.bind((processes.HOST, 0))
        sock.listen()
        yield sock.getsockname()[1]


def _up(*ports: int) -> list[str]:
    broker, registry = ports
    return ["up", "--broker-port", str(broker), "--registry-port", str(registry)]


def test_up_twice_status_down(home: Path) -> None:
    ports = processes.free_port(), processes.free_port()
    first = runner.invoke(app, _up(*ports))
    assert first.exit_code == 0, first.output
    assert "started broker" in first.output
    assert "started registry" in first.output
    pids = _pids(home)
    assert all(_alive(pid) for pid in pids.values())

    second = runner.invoke(app, _up(*ports))
    assert second.exit_code == 0, second.output
    assert second.output.count("already running") == 2
    assert _pids(home) == pids  # nothing started twice

    status = runner.invoke(app, ["status", "--json"])
    assert status.exit_code == 0, status.output
    rows = {row["component"]: row for row in json.loads(status.stdout)}
    assert rows["broker"] == rows["broker"] | {
        "address": f"127.0.0.1:{ports[0]}",
        "pid": pids["broker"],
        "healthy": True,
    }
    assert rows["registry"]["address"] == f"http://127.0.0.1:{ports[1]}"
    assert rows["registry"]["healthy"] is True

    # the written profiles reach the stack
    from confluent_kafka.admin import AdminClient

    kafka = load_kafka_profile()
    assert kafka.bootstrap_servers == f"127.0.0.1:{ports[0]}"
    assert AdminClient(kafka.librdkafka_config()).list_topics(timeout=10).brokers
    with urllib.request.urlopen(load_registry_profile().url + "/subjects", timeout=5) as answer:
        assert json.load(answer) == []

    down = runner.invoke(app, ["down"])
    assert down.exit_code == 0, down.output
    assert "stopped broker" in down.output
    assert not any(_alive(pid) for pid in pids.values())
    assert not (home / "kafka.json").exists()
    assert not (home / "schema_registry.json").exists()
    assert not (home / "dev" / stack.STATE_FILE).exists()

    again = runner.invoke(app, ["down"])
    assert again.exit_code == 0
    assert "nothing to stop" in again.output


def test_status_when_nothing_runs(home: Path) -> None:
    table = runner.invoke(app, ["status"])
    assert table.exit_code == 1
    assert "not running" in table.output
    rows = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert [(r["component"], r["healthy"], r["pid"]) for r in rows] == [
        ("broker", False, None),
        ("registry", False, None),
    ]


def test_a_users_profile_is_kept(home: Path) -> None:
    home.mkdir()
    theirs = {
        "bootstrap_servers": "kafka.example.com:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanisms": "PLAIN",
        "sasl_username": "alice",
        "sasl_password": "s3cret-pw",
    }
    (home / "kafka.json").write_text(json.dumps(theirs))
    up = runner.invoke(app, _up(processes.free_port(), processes.free_port()))
    assert up.exit_code == 0, up.output
    assert "kept" in up.output
    assert "kafka.example.com:9093" in up.output
    assert "s3cret-pw" not in up.output
    assert json.loads((home / "kafka.json").read_text()) == theirs
    assert (home / "schema_registry.json").exists()

    down = runner.invoke(app, ["down"])
    assert down.exit_code == 0, down.output
    assert json.loads((home / "kafka.json").read_text()) == theirs
    assert not (home / "schema_registry.json").exists()


def test_stale_state_is_replaced_and_strangers_left_alone(home: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stranger = subprocess.Popen(["sleep", "300"])  # alive, but not our registry
    try:
        log = home / "dev" / "x.log"
        write_private_json(
            home / "dev" / stack.STATE_FILE,
            {
                "version": 1,
                "components": {
                    "broker": {"pid": dead.pid, "port": 1, "argv": ["tansu"], "log_file": str(log)},
                    "registry": {
                        "pid": stranger.pid,
                        "port": 2,
                        "argv": [sys.executable, "-m", "engine.registry"],
                        "log_file": str(log),
                    },
                },
                "profiles": {},
            },
        )
        status = stack.status()
        assert [(s.pid, s.healthy) for s in status] == [(dead.pid, False), (stranger.pid, False)]
        assert all("stale" in s.detail for s in status)

        up = runner.invoke(app, _up(processes.free_port(), processes.free_port()))
        assert up.exit_code == 0, up.output
        assert up.output.count("(stale)") == 2
        pids = _pids(home)
        assert stranger.pid not in pids.values()
        assert _alive(stranger.pid)

        assert runner.invoke(app, ["down"]).exit_code == 0
        assert _alive(stranger.pid)
        assert not any(_alive(pid) for pid in pids.values())
    finally:
        stranger.kill()
        stranger.wait()


def test_a_taken_port_is_a_one_line_error(home: Path, listening: int) -> None:
    result = runner.invoke(app, _up(listening, processes.free_port()))
    assert result.exit_code == 1
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert f"port {listening} on 127.0.0.1 is already in use" in result.stderr
    assert "Traceback" not in result.output
    assert not (home / "dev" / stack.STATE_FILE).exists()


def test_a_failed_registry_stops_the_broker_it_started(home: Path, listening: int) -> None:
    broker_port = processes.free_port()
    result = runner.invoke(app, _up(broker_port, listening))
    assert result.exit_code == 1
    assert f"port {listening}" in result.stderr
    assert not (home / "dev" / stack.STATE_FILE).exists()
    assert processes.port_is_free(broker_port)  # the broker started first is gone again


def test_the_default_port_is_preferred_when_free(listening: int) -> None:
    free = processes.free_port()
    assert processes.choose_port(free) == free
    assert processes.choose_port(listening) != listening
    assert not processes.port_is_free(listening)


def test_missing_broker_artifacts(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNC_JVM_CACHE", str(home / "empty-cache"))
    result = runner.invoke(app, ["up"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: the JVM artifacts for the embedded broker")
    assert "run `zync setup`" in result.stderr
    assert " ".join(result.stderr.split()).count("error:") == 1
    assert not (home / "dev" / stack.STATE_FILE).exists()


def test_topics_survive_down_and_up(home: Path) -> None:
    """The broker keeps its log dirs under $ZYNC_HOME/dev: `down` then `up` keeps topics."""
    from confluent_kafka import Consumer, Producer

    ports = processes.free_port(), processes.free_port()
    assert runner.invoke(app, _up(*ports)).exit_code == 0
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{ports[0]}"})
    producer.produce("kept", key=b"k", value=b"v1")
    assert producer.flush(30) == 0
    assert runner.invoke(app, ["down"]).exit_code == 0
    assert (home / "dev" / "kafka-data").is_dir()
    assert runner.invoke(app, _up(*ports)).exit_code == 0
    consumer = Consumer(
        {"bootstrap.servers": f"127.0.0.1:{ports[0]}", "group.id": "t", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe(["kept"])
        message = None
        deadline = time.monotonic() + 60
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error():
                message = None
        assert message is not None
        assert message.value() == b"v1"
    finally:
        consumer.close()


def test_unwritable_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ZYNC_HOME", str(tmp_path / "file" / "home"))
    result = runner.invoke(app, ["up"])
    assert result.exit_code == 1
    assert "cannot write to" in result.stderr
    assert "set ZYNC_HOME to a writable directory" in result.stderr


def test_the_stack_outlives_the_command_that_started_it(home: Path) -> None:
    """Started by another process (not our children): found and stopped through /proc."""
    ports = processes.free_port(), processes.free_port()
    subprocess.run(
        [sys.executable, "-m", "zync_tui.commands.dev", *_up(*ports)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    pids = _pids(home)
    assert all(s.healthy for s in stack.status())
    report = stack.down()
    assert "stopped registry" in report.notes[0]
    assert not any(_alive(pid) for pid in pids.values())


@contextlib.contextmanager
def _python_child(code: str) -> Iterator[tuple[subprocess.Popen[bytes], tuple[str, ...]]]:
    """A Python process in its own session running ``code``, once it printed its first
    line (its signal handlers are set by then); killed and reaped at the end."""
    argv = (sys.executable, "-c", code)
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline()
        yield child, argv
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stdout:
            child.stdout.close()


def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"
    with _python_child(code) as (child, argv):  # SIGTERM is ignored from now on
        proc = processes.Process("broker", child.pid, 0, argv, tmp_path / "log")
        started = time.monotonic()
        assert processes.stop_process(proc, timeout=0.5) is True
        assert time.monotonic() - started >= 0.5
        assert child.wait(timeout=5) == -9
        assert processes.stop_process(proc) is False  # already gone: nothing to do


def test_stop_waits_for_a_process_that_lost_its_command_line_while_exiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exiting process reads as an empty command line before it is a zombie: not gone yet."""
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(0.5), sys.exit(0)))\n"
        "print(1, flush=True); time.sleep(60)"
    )
    signalled: list[int] = []
    real_signal, real_cmdline = processes._signal, processes._cmdline

    def signal_and_note(pid: int, signum: int) -> None:
        signalled.append(signum)
        real_signal(pid, signum)

    def cmdline(pid: int) -> tuple[str, ...] | None:
        return () if signalled else real_cmdline(pid)  # the window between exit_mm and zombie

    monkeypatch.setattr(processes, "_signal", signal_and_note)
    monkeypatch.setattr(processes, "_cmdline", cmdline)
    with _python_child(code) as (child, argv):
        # Not registered as our child: found through /proc, as `zync dev down` finds it.
        proc = processes.Process("registry", child.pid, 0, argv, tmp_path / "log")
        assert processes.stop_process(proc, timeout=10) is True
        assert not _alive(child.pid)
        assert signalled == [15]


def test_session_helpers_start_and_stop(tmp_path: Path) -> None:
    from engine.local.broker import broker_ready
    from engine.local.registry import registry_ready
    from tests.stack import start_broker, start_registry

    broker = start_broker(tmp_path / "broker")
    registry = start_registry(tmp_path / "registry")
    try:
        assert broker_ready(broker.address)
        assert registry_ready(registry.url)
        assert registry.url == f"http://{registry.address}"
        assert (tmp_path / "registry" / "registry.db").exists()
    finally:
        broker.stop()
        registry.stop()
    assert not _alive(broker.pid)
    assert not _alive(registry.pid)
    broker.stop()  # twice is fine
    assert os.path.exists(broker.log_file)
