"""The API's parts without a broker (engine/serve): a process whose loop is a stand-in,
served on a real socket — liveness of a wedged loop, the peer check, the socket's path,
the journal's cursors, the token."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.heartbeat import Heartbeat
from engine.serve.auth import Guard, TokenError, load_token
from engine.serve.client import ApiClient, ApiError
from engine.serve.journal import Journal
from engine.serve.served_process import ServedProcess
from engine.serve.server import ApiServer, serve
from engine.serve.sockets import MAX_PATH, ListenError, socket_path
from engine.services.service import Service


class Stuck(Service[None]):
    """A loop that beats until told to hang, then hangs without waiting on purpose."""

    name = "stuck"

    def __init__(self) -> None:
        super().__init__()
        self.hang = threading.Event()

    def _run(self, stop: threading.Event) -> None:
        self._running()
        while not stop.is_set():
            if self.hang.is_set():
                stop.wait(0.05)  # no beat, no deliberate wait: wedged
                continue
            self.heartbeat.beat()
            with self.heartbeat.waiting("no work"):
                stop.wait(0.05)


@pytest.fixture
def served() -> Iterator[tuple[Stuck, ServedProcess, ApiServer]]:
    loop = Stuck()
    process = ServedProcess("unit", "run", loops=lambda: {"stuck": loop}, wedged_after=0.3)
    # a short directory: /tmp's own (the test's tmp_path may be too long for a socket)
    home = Path(tempfile.mkdtemp(prefix="zs-", dir="/tmp"))
    loop.start()
    server = serve(process, socket_path=home / "run" / "unit.run.sock", guard=Guard(None))
    try:
        yield loop, process, server
    finally:
        server.stop()
        loop.stop()


def test_a_wedged_loop_fails_liveness_a_waiting_one_does_not(served) -> None:
    loop, _process, server = served
    client = ApiClient(str(server.socket_path))
    time.sleep(0.5)
    assert client.get("/healthz") == {"status": "live"}  # waits on purpose between beats
    loop.hang.set()
    deadline = time.monotonic() + 10
    while client.request("GET", "/healthz", _raise=False).status_code == 200:
        assert time.monotonic() < deadline, "never wedged"
        time.sleep(0.1)
    with pytest.raises(ApiError, match="stuck is wedged: no progress for") as refused:
        client.get("/healthz")
    assert refused.value.status == 503
    assert client.get("/readyz") == {"status": "ready"}  # liveness and readiness differ


def test_another_user_gets_403_even_when_the_socket_is_opened_to_all(served) -> None:
    _loop, _process, server = served
    path = server.socket_path
    assert path is not None
    path.parent.chmod(0o711)
    path.parent.parent.chmod(0o711)
    path.chmod(0o666)
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.connect({str(path)!r})\n"
        "s.sendall(b'POST /v1/loops/stuck/stop HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0\\r\\n\\r\\n')\n"
        "print(s.recv(300).split(b'\\r\\n')[0].decode())\n"
    )
    if os.getuid() != 0:
        pytest.skip("needs root, to run a client as another user")
    done = subprocess.run(
        ["/usr/bin/python3", "-c", code], user=65534, capture_output=True, text=True, timeout=30,
        check=False,
    )  # fmt: skip
    assert done.stdout.strip() == "HTTP/1.1 403 Forbidden", done.stderr
    assert _loop.status().state == "running"


def test_socket_paths_fit_a_socket_address(tmp_path: Path) -> None:
    assert socket_path(Path("/h"), "invoices", "from-kafka+etl") == Path(
        "/h/run/invoices.from-kafka+etl.sock"
    )
    long_name = socket_path(Path("/h"), "x" * 200, "run")
    assert len(str(long_name)) <= MAX_PATH
    assert long_name.parent == Path("/h/run")
    with pytest.raises(ListenError, match="set ZYNC_HOME to a shorter directory"):
        socket_path(Path("/" + "d" * 120), "invoices", "run")


def test_the_journal_reads_since_a_cursor_and_says_what_was_dropped() -> None:
    journal = Journal(capacity=3)
    for n in range(5):
        journal.note(f"note {n}")
    entries, cursor, dropped = journal.since(0)
    assert [e.message for e in entries] == ["note 2", "note 3", "note 4"]
    assert (cursor, dropped) == (5, 2)
    assert journal.since(cursor) == ([], 5, 0)
    assert journal.since(99)[0][0].message == "note 2"  # a cursor of another life


def test_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZYNC_CONTROL_TOKEN", raising=False)
    assert load_token() is None
    monkeypatch.setenv("ZYNC_CONTROL_TOKEN", "short")
    with pytest.raises(TokenError, match="too short"):
        load_token()
    file = tmp_path / "token"
    file.write_text("a-token-long-enough-for-zync\n")
    file.chmod(0o644)
    with pytest.warns(UserWarning, match="can be read by other users"):
        assert load_token(file) == "a-token-long-enough-for-zync"
    guard = Guard("a-token-long-enough-for-zync")
    assert guard.check(unix=False, peer_uid=None, control=True, authorization=None).status == 401
    assert guard.check(unix=False, peer_uid=None, control=True, authorization="Bearer a-token-long-enough-for-zync") is None
    assert guard.check(unix=True, peer_uid=os.getuid(), control=True, authorization=None) is None


def test_heartbeat_pulses() -> None:
    now = [0.0]
    beat = Heartbeat("loop", clock=lambda: now[0])
    beat.start()
    one, two = beat.pulse("a"), beat.pulse("b")
    now[0] = 10.0
    one.beat()
    reading = beat.reading()
    assert reading.slowest == "b"
    assert reading.wedged(5.0)
    token = two.begin_wait("Kafka out of reach")
    assert not beat.reading().wedged(5.0)
    two.end_wait(token)
    assert beat.reading().since_progress == 0.0


def test_one_address_opens_a_burst_then_a_steady_rate_of_connections() -> None:
    from engine.serve.protocol import MAX_PER_PEER, NEW_PER_PEER, _Openings

    openings = _Openings()
    allowed = [openings.allow("127.0.0.2", 100.0) for _ in range(MAX_PER_PEER + 10)]
    assert allowed.count(True) == MAX_PER_PEER  # the burst, then closed as they come
    assert openings.allow("127.0.0.1", 100.0)  # another address: its own bucket
    assert not openings.allow("127.0.0.2", 100.0 + 0.5 / NEW_PER_PEER)
    assert openings.allow("127.0.0.2", 100.0 + 1.01 / NEW_PER_PEER)  # one more 1/rate later
    # a second later, a second's worth; a long quiet, no more than the burst
    assert sum(openings.allow("127.0.0.2", 101.06) for _ in range(100)) == int(NEW_PER_PEER)
    assert sum(openings.allow("127.0.0.2", 500.0) for _ in range(100)) == MAX_PER_PEER


def test_the_openings_forget_quiet_addresses_when_many_were_seen() -> None:
    from engine.serve.protocol import _Openings

    openings = _Openings()
    for n in range(_Openings.KEPT + 10):
        assert openings.allow(f"10.0.{n // 256}.{n % 256}", float(n))
    assert len(openings._buckets) < _Openings.KEPT


def test_the_listener_closes_refused_connections_as_it_accepts_them() -> None:
    """A connection the API refuses is closed by the listening socket's accept: asyncio
    never makes a transport or a protocol for it, and the next one is returned; a storm
    is refused a bounded number at a time, so that the event loop goes on."""
    import socket

    from engine.serve import sockets
    from engine.serve.sockets import GuardedListener, TcpAddress, bind_tcp

    listener = bind_tcp(TcpAddress("127.0.0.1", 0))
    assert isinstance(listener, GuardedListener)
    port = listener.getsockname()[1]
    seen: list[str] = []

    def admit(address: str) -> bool:
        seen.append(address)
        return address != "127.0.0.2"

    listener.admit = admit
    clients = []
    try:
        for source in ("127.0.0.2", "127.0.0.2", "127.0.0.1"):
            client = socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
            clients.append(client)
        listener.setblocking(True)
        listener.settimeout(5)
        conn, address = listener.accept()
        conn.close()
        assert address[0] == "127.0.0.1"
        assert seen == ["127.0.0.2", "127.0.0.2", "127.0.0.1"]
        clients[0].settimeout(5)
        assert clients[0].recv(10) == b""  # closed by the listener, nothing read or written

        listener.admit = lambda address: False
        for _ in range(sockets.REFUSED_AT_ONCE + 3):
            clients.append(socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0)))
        listener.setblocking(False)
        with pytest.raises(BlockingIOError, match="storm"):
            listener.accept()  # 256 refused, then the event loop's turn
        with pytest.raises(BlockingIOError):
            listener.accept()  # the 3 left, then none waiting
    finally:
        for client in clients:
            client.close()
        listener.close()
