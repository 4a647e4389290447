"""The API of running `zync run` processes (issue 35), on the test broker and registry.

One pipeline, the invoice scenario, runs as two processes as it would on two hosts:
``zync run --only from-kafka --only etl`` and ``zync run --only to-kafka``, each with its
Unix socket, a TCP port, a control token and JSON log lines. The module's tests share
them, in order: readiness (503, then 200), /metrics against the pool, the broker and
``zync pending``, control (who may, what changes), bad requests, a hostile client, the
JSON logs, the broker paused and resumed, and last the console attached to both (one of
them killed).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.local.processes import free_port

pytestmark = [
    pytest.mark.integration,
    pytest.mark.spark,
    pytest.mark.slow(seconds=150),
    pytest.mark.timeout(600),
]

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo" / "invoices"
TOKEN = "t0ken-for-the-tests-" + uuid.uuid4().hex
START = 240.0


@dataclass
class Proc:
    """A `zync run --only ...` process: its API over TCP and over its Unix socket."""

    name: str
    popen: subprocess.Popen[bytes]
    port: int
    socket: Path
    stdout: Path
    stderr: Path
    seen: list[int] = field(default_factory=list)  # /readyz codes while starting

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tcp(self, token: str | None = TOKEN, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def unix(self) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.socket))
        return httpx.Client(base_url="http://zync", transport=transport, timeout=30)

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        with self.unix() as client:
            text = client.get("/metrics").text
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def loops(self) -> dict[str, dict[str, Any]]:
        with self.unix() as client:
            doc = client.get("/v1/status", params={"sections": "loops"}).json()
        return {loop["name"]: loop for loop in doc["loops"]}

    def alive(self) -> None:
        if self.popen.poll() is not None:
            raise AssertionError(
                f"{self.name} exited ({self.popen.returncode}): "
                f"{self.stderr.read_text()[-3000:]}"
            )


@dataclass
class Stack:
    config: Path
    names: dict[str, str]
    lake: Path
    home: Path
    kafka: Any
    ingest: Proc
    deliver: Proc


def value(metrics: dict[Any, float], name: str, **labels: str) -> float | None:
    for (found, have), number in metrics.items():
        if found == name and set(labels.items()) <= set(have):
            return number
    return None


def total(metrics: dict[Any, float], name: str, **labels: str) -> float:
    return sum(
        n for (found, have), n in metrics.items()
        if found == name and set(labels.items()) <= set(have)
    )  # fmt: skip


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.2)


def publish(kafka: Any, names: dict[str, str], batch: int) -> None:
    from engine.kafka.clients import producer

    prod = producer(kafka)
    for line in (DEMO / f"batch{batch}.jsonl").read_text().splitlines():
        event = json.loads(line)
        prod.produce(
            names[event["topic"]],
            key=json.dumps(event["key"]).encode(),
            value=None if event["value"] is None else json.dumps(event["value"]).encode(),
        )
    assert prod.flush(30) == 0


def _start(name: str, config: Path, lake: Path, env: dict[str, str], tmp: Path, *args: str) -> Proc:
    port = free_port()
    out, err = tmp / f"{name}.out", tmp / f"{name}.err"
    argv = [
        sys.executable, "-m", "zync_tui.commands.run", "run", str(config), "--lake", str(lake),
        "--format", "json", "--http", f"127.0.0.1:{port}", "--log-format", "json", *args,
    ]  # fmt: skip
    popen = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=out.open("wb"), stderr=err.open("wb"),
        start_new_session=True,
    )  # fmt: skip
    loops = "+".join(a for a in args if a in ("from-kafka", "etl", "to-kafka"))
    home = Path(env["ZYNC_HOME"])
    return Proc(name, popen, port, home / "run" / f"{config.stem}.{loops}.sock", out, err)


def _ready_codes(proc: Proc) -> None:
    """/readyz over the socket from the start until 200, keeping the codes seen."""

    def ready() -> bool:
        proc.alive()
        if not proc.socket.exists():
            return False
        try:
            with proc.unix() as client:
                code = client.get("/readyz").status_code
        except httpx.HTTPError:
            return False
        proc.seen.append(code)
        return code == 200

    wait_for(ready, START, f"{proc.name} to be ready")


@pytest.fixture(scope="module")
def stack(broker: Any, registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    from engine.kafka.clients import ensure_topic
    from engine.settings.kafka import load_kafka_profile

    tmp = tmp_path_factory.mktemp("serve")
    suffix = uuid.uuid4().hex[:8]
    names = {
        n: f"{n}_{suffix}" for n in ("Invoices", "InvoiceStatus", "NewInvoices", "InvoiceChanges")
    }
    text = (DEMO / "etl.yaml").read_text()
    for name, renamed in names.items():
        text = re.sub(rf"\b{name}\b", renamed, text)
    text = re.sub(r"^name: .*$", "name: served", text, count=1, flags=re.M)
    config = tmp / "served.yaml"
    config.write_text(text)
    kafka = load_kafka_profile({"bootstrap_servers": broker.address})
    for topic in ("Invoices", "InvoiceStatus"):
        ensure_topic(kafka, names[topic], partitions=1)
    lake, home = tmp / "lake", tmp / "home"
    lake.mkdir()
    env = {
        **os.environ, "ZYNC_HOME": str(home), "ZYNC_KAFKA_BOOTSTRAP_SERVERS": broker.address,
        "ZYNC_REGISTRY_URL": registry.url, "ZYNC_CONTROL_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1",
    }  # fmt: skip
    ingest = _start(
        "ingest", config, lake, env, tmp, "--only", "from-kafka", "--only", "etl",
        "--spark-master", "local[1]",
    )  # fmt: skip
    deliver = _start("deliver", config, lake, env, tmp, "--only", "to-kafka", "--http-public-read")
    running = Stack(config, names, lake, home, kafka, ingest, deliver)
    try:
        _ready_codes(deliver)
        _ready_codes(ingest)
        yield running
    finally:
        for proc in (ingest, deliver):
            if proc.popen.poll() is None:
                os.killpg(proc.popen.pid, signal.SIGTERM)
        for proc in (ingest, deliver):
            try:
                proc.popen.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.popen.pid, signal.SIGKILL)
                proc.popen.wait(10)


# ----------------------------------------------------------------------------- the tests


def test_ready_once_every_loop_runs(stack: Stack) -> None:
    for proc in (stack.ingest, stack.deliver):
        assert proc.seen[-1] == 200
    assert 503 in stack.ingest.seen, stack.ingest.seen  # Spark starting: not ready yet
    with stack.ingest.unix() as client:
        assert client.get("/healthz").json() == {"status": "live"}
        doc = client.get("/v1/status").json()
    assert doc["schema"] == "zync.status/v1"
    assert doc["process"]["pipeline"] == "served"
    assert doc["process"]["loops"] == ["from-kafka", "etl"]
    assert [loop["state"] for loop in doc["loops"]] == ["running", "running"]
    assert doc["health"] == {"live": True, "live_reasons": [], "ready": True, "ready_reasons": []}
    assert stat.S_IMODE(stack.ingest.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(stack.ingest.socket.parent.stat().st_mode) == 0o700


def test_metrics_agree_with_the_pool_the_broker_and_zync_pending(stack: Stack, spark: Any) -> None:
    from deltalake import DeltaTable

    from engine.etl.config_file import load_config
    from engine.etl.run import pending
    from engine.kafka.clients import consumer
    from engine.kafka.watermarks import watermarks
    from engine.lake.pools import Lake

    names, ingest = stack.names, stack.ingest
    publish(stack.kafka, names, 1)
    publish(stack.kafka, names, 2)  # Dan's invoice waits for its status
    config = load_config(stack.config)
    lake = Lake(stack.lake)

    def pending_agrees() -> bool:
        metrics = ingest.metrics()
        shown = total(metrics, "zync_etl_pending_records")
        return shown > 0 and shown == len(pending(config, lake, spark))

    wait_for(pending_agrees, 120, "zync_etl_pending_records to equal `zync pending`'s count")
    publish(stack.kafka, names, 3)
    publish(stack.kafka, names, 4)
    out = names["NewInvoices"]

    def delivered() -> bool:
        got = value(stack.deliver.metrics(), "zync_delivery_delivered_offset", output=out)
        return got == 7  # the invoice scenario's 8 outputs, offsets 0..7

    wait_for(delivered, 180, "every output delivered")

    raw = DeltaTable(str(stack.lake / "Raw")).to_pyarrow_table(columns=["kafka"]).to_pylist()
    reader = consumer(stack.kafka)
    try:
        for topic in (names["Invoices"], names["InvoiceStatus"]):
            rows = sum(1 for r in raw if r["kafka"] and r["kafka"]["topic"] == topic)
            high = watermarks(reader, topic, [0])[0][1]

            def caught_up(topic: str = topic, rows: int = rows, high: int = high) -> bool:
                m = ingest.metrics()
                where = {"topic": topic, "partition": "0"}
                return (
                    value(m, "zync_records_in_total", loop="from-kafka", topic=topic) == rows
                    and value(m, "zync_consumer_high_watermark", **where) == high
                    and value(m, "zync_consumer_lag_records", **where)
                    == high - 1 - (value(m, "zync_consumer_committed_offset", **where) or 0)
                )

            wait_for(caught_up, 60, f"{topic}'s metrics to match the pool and the broker")
            assert value(ingest.metrics(), "zync_consumer_lag_records", topic=topic) == 0
    finally:
        reader.close()
    metrics = ingest.metrics()
    assert value(metrics, "zync_kafka_up", loop="from-kafka") == 1
    assert value(metrics, "zync_etl_pass_seconds_count", loop="etl") >= 1
    assert value(metrics, "zync_loop_state", loop="etl", state="running") == 1
    assert value(metrics, "zync_build_info") == 1
    assert value(metrics, "zync_pool_version", loop="from-kafka", pool="Raw") is not None
    # the delivery position is the topic's: its last message's zync.offset header
    from tests.integration.test_run_only import _topic_messages

    tail = _topic_messages(stack.kafka, out)[-1]
    assert int(dict(tail.headers() or [])["zync.offset"]) == 7
    m = stack.deliver.metrics()
    assert value(m, "zync_delivery_staged_offset", output=out) == 7
    assert value(m, "zync_delivery_lag_records", output=out) == 0
    assert value(m, "zync_records_out_total", loop="to-kafka", topic=out) == 8


def test_control_needs_the_token_over_tcp_and_the_socket_is_enough(stack: Stack) -> None:
    ingest = stack.ingest
    for token in (None, "not-the-token-at-all"):
        with ingest.tcp(token) as client:
            refused = client.post("/v1/loops/etl/stop")
            assert refused.status_code == 401
            assert set(refused.json()) == {"error_code", "message"}
            assert client.get("/metrics").status_code == 401  # reads need it too here
    assert ingest.loops()["etl"]["state"] == "running"  # nothing changed
    with stack.deliver.tcp(None) as client:  # --http-public-read: reads, never control
        assert client.get("/metrics").status_code == 200
        assert client.post("/v1/loops/to-kafka/stop").status_code == 401
    with ingest.tcp() as client:
        assert client.post("/v1/loops/etl/stop").json()["state"] == "stopped"
        not_ready = client.get("/readyz")
        assert not_ready.status_code == 503
        assert "etl is stopped" in not_ready.json()["message"]
        assert client.post("/v1/loops/etl/start").status_code == 200
        wait_for(lambda: ingest.loops()["etl"]["state"] == "running", 120, "the ETL again")
        done = client.post("/v1/etl/pass")
        assert done.status_code == 200, done.text
        assert done.json()["etl"] == "served"
    with ingest.unix() as client:  # the socket's owner: no token
        assert client.post("/v1/loops/from-kafka/stop").json()["state"] == "stopped"
        assert client.post("/v1/loops/from-kafka/start").status_code == 200
    wait_for(lambda: ingest.loops()["from-kafka"]["state"] == "running", 60, "from-kafka again")


def test_another_user_is_refused_the_socket(stack: Stack) -> None:
    path = stack.ingest.socket
    code = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({str(path)!r})\n"
        "except OSError as e:\n"
        "    print('refused', e.errno); sys.exit()\n"
        "s.sendall(b'GET /v1/status HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "print(s.recv(200).split(b'\\r\\n')[0].decode())\n"
    )

    def as_nobody() -> str:
        done = subprocess.run(
            ["/usr/bin/python3", "-c", code], user=65534, capture_output=True, text=True,
            timeout=30, check=False,
        )  # fmt: skip
        return done.stdout.strip() or done.stderr.strip()

    assert as_nobody().startswith("refused 13")  # EACCES: 0700 directory, 0600 socket
    # (the server's own check of the peer's user: tests/unit/test_serve.py)


def test_bad_requests_get_a_clear_4xx_and_change_nothing(stack: Stack) -> None:
    ingest = stack.ingest
    before = ingest.loops()
    with ingest.tcp() as client:
        cases = [
            (client.post("/v1/loops/nope/stop"), 404, "unknown loop 'nope'"),
            (client.post("/v1/loops/etl/pause"), 404, "start or stop"),
            (client.post("/v1/loops/etl/stop", content=b"{not json"), 400, "not JSON"),
            (client.post("/v1/loops/etl/stop", json=[1]), 400, "JSON object"),
            (client.post("/v1/loops/etl/stop", json={"force": True}), 400, "unknown field"),
            (client.post("/v1/loops/etl/stop", content=b"x" * 70_000), 413, "over"),
            (client.get("/v1/status", params={"sections": "everything"}), 400, "unknown section"),
            (client.get("/v2/status"), 404, "no such endpoint"),
            (client.put("/v1/loops/etl/stop"), 405, ""),
        ]
    for response, code, words in cases:
        assert response.status_code == code, (response.request.url, response.text)
        body = response.json()
        assert set(body) == {"error_code", "message"}
        assert body["error_code"] == code
        assert words in body["message"]
    after = ingest.loops()
    assert {n: loop["state"] for n, loop in after.items()} == {
        n: loop["state"] for n, loop in before.items()
    }


#: The hostile client's address: another client than the probes' (127.0.0.1).
HOSTILE = ("127.0.0.2", 0)


async def _storm(port: int, count: int) -> list[bytes]:
    """``count`` concurrent scrapes of /metrics from :data:`HOSTILE`, each on its own
    connection."""
    request = (
        f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()

    async def scrape() -> bytes:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=HOSTILE)
            writer.write(request)
            await writer.drain()
            status = await asyncio.wait_for(reader.readline(), 60)
            await reader.read()
            writer.close()
            return status
        except OSError as exc:
            return f"error {exc}".encode()

    return await asyncio.gather(*(scrape() for _ in range(count)))


def test_a_hostile_client_neither_stalls_the_api_nor_the_loops(stack: Stack) -> None:
    import socket
    import threading

    ingest = stack.ingest
    commits = ingest.loops()["from-kafka"]["commits"]
    slow = socket.create_connection(("127.0.0.1", ingest.port), source_address=HOSTILE)
    slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    cut_off: list[float] = []

    def trickle() -> None:  # slowloris: a byte a second, never a whole request
        began = time.monotonic()
        try:
            for _ in range(60):
                slow.sendall(b"X")
                time.sleep(1.0)
        except OSError:
            cut_off.append(time.monotonic() - began)

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    garbage = socket.create_connection(("127.0.0.1", ingest.port), source_address=HOSTILE)
    garbage.sendall(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
    answer = b""
    while chunk := garbage.recv(4096):  # the server closes the connection after it
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert b'"error_code": 400' in answer
    probes: list[float] = []
    storming = threading.Event()
    connected = threading.Event()

    def probe() -> None:  # another client, during the storms: answered at once
        with ingest.tcp() as client:
            # its connection made first: a new one waits its turn in the kernel's accept
            # queue behind the storm's (each accepted and closed, ~1 s for 1,000)
            assert client.get("/healthz").status_code == 200
            connected.set()
            while storming.is_set():
                began = time.monotonic()
                assert client.get("/healthz").status_code == 200
                probes.append(time.monotonic() - began)

    storming.set()
    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    assert connected.wait(30), "the probe's client did not connect"
    started = time.monotonic()
    statuses = asyncio.run(_storm(ingest.port, 1000)) + asyncio.run(_storm(ingest.port, 1000))
    storm = time.monotonic() - started
    storming.clear()
    prober.join(30)
    served = sum(1 for s in statuses if s.startswith(b"HTTP/1.1 200"))
    # one client holds at most 32 connections at once and opens 20 a second after a
    # burst of 32: the others are closed at once
    refused = sum(1 for s in statuses if s == b"" or s.startswith((b"error", b"HTTP/1.1 503")))
    assert served + refused == 2000, [s for s in statuses if s][:5]
    assert 16 <= served <= 32 + 20 * (storm + 1), f"{served} of 2000 scrapes served in {storm:.1f}s"
    assert probes, "no probe answered during the storms"
    assert max(probes) < 1.0, probes
    # and after them, a new connection: the probe answers at once, the loops commit
    with ingest.tcp() as client:
        began = time.monotonic()
        assert client.get("/healthz").status_code == 200
        assert time.monotonic() - began < 1.0
    publish(stack.kafka, stack.names, 1)  # replayed changes: records to commit all the same
    wait_for(lambda: ingest.loops()["from-kafka"]["commits"] > commits, 60, "a commit")
    # the slow client is cut off after the request deadline (10 s)
    trickler.join(40)
    assert cut_off, "the slowloris connection was never closed"
    assert cut_off[0] < 20, cut_off
    slow.close()
    garbage.close()
    print(f"\n[hostile] 2 x 1000 concurrent scrapes in {storm:.2f}s: {served} served, the rest refused; "
          f"{len(probes)} probes meanwhile, the slowest {max(probes) * 1000:.0f} ms")


def test_json_log_lines_each_carry_their_loop(stack: Stack) -> None:
    events: dict[str, set[str]] = {}
    for proc in (stack.ingest, stack.deliver):
        lines = proc.stdout.read_text().splitlines()
        assert lines, proc.name
        for line in lines:
            entry = json.loads(line)  # every line is one JSON object
            assert {"time", "level", "pipeline", "loop", "event", "message"} <= set(entry)
            assert entry["pipeline"] == "served"
            if entry["event"] not in ("note", "log"):
                assert entry["loop"] in ("from-kafka", "etl", "to-kafka"), entry
                events.setdefault(entry["loop"], set()).add(entry["event"])
    assert {"started", "commit"} <= events["from-kafka"]
    assert {"started", "pass"} <= events["etl"]
    assert {"started", "delivered"} <= events["to-kafka"]
    commit = next(
        json.loads(ln) for ln in stack.ingest.stdout.read_text().splitlines()
        if '"event":"commit"' in ln
    )  # fmt: skip
    assert commit["pool"] == "Raw"
    assert commit["records"] > 0
    assert "version" in commit


def test_the_broker_paused_makes_it_unready_not_dead(stack: Stack, broker: Any) -> None:
    ingest = stack.ingest
    os.kill(broker.pid, signal.SIGSTOP)
    try:

        def unready() -> dict[str, Any] | None:
            with ingest.unix() as client:
                response = client.get("/readyz")
            return response.json() if response.status_code == 503 else None

        said = wait_for(unready, 60, "/readyz to say Kafka is out of reach")
        assert "Kafka at" in said["message"], said
        assert "unreachable" in said["message"], said
        with ingest.unix() as client:
            assert client.get("/healthz").status_code == 200  # waiting on purpose: alive
        assert value(ingest.metrics(), "zync_kafka_up", loop="from-kafka") == 0
    finally:
        os.kill(broker.pid, signal.SIGCONT)

    def ready() -> bool:
        with ingest.unix() as client:
            return client.get("/readyz").status_code == 200

    wait_for(ready, 90, "/readyz to be 200 again")
    # /metrics renders a snapshot kept half a second; /readyz looks now
    wait_for(lambda: value(ingest.metrics(), "zync_kafka_up", loop="from-kafka") == 1, 10, "zync_kafka_up 1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_console_attached_to_both_shows_one_pipeline_and_a_process_gone(
    stack: Stack,
) -> None:
    """Last: it kills the to-kafka process."""
    from tests.console.conftest import until
    from zync_tui.console.app import make_app
    from zync_tui.console.widgets.loops import LoopsPanel

    app = make_app(
        attach=[str(stack.ingest.socket), stack.deliver.url], interval=0.2, token=None
    )
    async with app.run_test(size=(100, 30)) as pilot:
        panel = app.screen_stack[0].query_one(LoopsPanel)

        def states() -> dict[str, str]:
            return {loop.name: loop.state for loop in panel.loops}

        await until(pilot, lambda: app.ready, 60, "the console to attach")
        assert app.title == "zync · served"
        await until(
            pilot, lambda: states() == dict.fromkeys(("from-kafka", "etl", "to-kafka"), "running"),
            30, "the three loops running",
        )  # fmt: skip
        where = {loop.name: (loop.host, loop.pid) for loop in panel.loops}
        assert where["etl"][1] == stack.ingest.popen.pid
        assert where["to-kafka"][1] == stack.deliver.popen.pid
        # the ingest process over its socket: control; the deliver one over TCP, no token
        assert not app.backend.read_only
        with pytest.raises(PermissionError, match="without a token"):
            app.backend.stop_loop("to-kafka")
        os.killpg(stack.deliver.popen.pid, signal.SIGKILL)
        killed = time.monotonic()
        await until(pilot, lambda: states().get("to-kafka") == "unreachable", 5, "to-kafka unreachable")
        print(f"\n[attach] to-kafka unreachable {time.monotonic() - killed:.1f}s after the kill")
        gone = next(loop for loop in panel.loops if loop.name == "to-kafka")
        assert "unreachable since" in (gone.error or "")
        assert states()["etl"] == "running"
