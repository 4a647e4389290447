"""HTTP/1.1 for the API: uvicorn's h11 protocol, with what it lacks against slow clients.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) and refuses oversized
headers (``h11_max_incomplete_event_size``), but it has no deadline for receiving a
request: its keep-alive timer restarts at every byte, so a client that sends one byte a
second (slowloris) holds a connection for ever (uvicorn issue #157). :class:`ApiProtocol`
gives every request :data:`REQUEST_DEADLINE` seconds to arrive whole (headers and
body), then closes the connection. One client address holds at most
:data:`MAX_PER_PEER` connections at once, and opens at most :data:`NEW_PER_PEER` a second
(after a burst of :data:`MAX_PER_PEER`): more are closed as the listening socket accepts
them (:func:`admit`), before asyncio makes a transport or a protocol for them. A storm
from one client then costs the process an accept and a close per connection, not a
request's parsing, routing and answer (1,000 concurrent scrapes a second, answered 32 at
a time, took a fifth of the interpreter lock the loops work under), and the others (a
probe, a scraper) still get in. Clients that keep their
connection open (the console, Prometheus) are not limited by the rate. It also tags each request with its peer — TCP, or the Unix socket
and the peer's user id (engine/serve/auth.py decides on it) — and answers a malformed
request with the API's JSON error instead of plain text.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from typing import TYPE_CHECKING, Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from engine.serve.sockets import peer_uid

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger("engine.serve")

#: Seconds a client has to send a whole request (headers and body).
REQUEST_DEADLINE = 10.0
#: The largest request head (request line and headers) accepted, in bytes.
MAX_HEAD = 16 * 1024
#: The key of the peer in a request's ASGI scope: ``{"unix": bool, "uid": int | None}``.
PEER = "zync.peer"
#: Connections one TCP client address may hold at once.
MAX_PER_PEER = 32

#: New connections one TCP client address may open per second, sustained.
NEW_PER_PEER = 20.0

#: Open connections per client address (the server's event loop thread only).
_per_peer: dict[str, int] = {}


class _Openings:
    """New connections per client address, a token bucket each: :data:`MAX_PER_PEER` at
    once, :data:`NEW_PER_PEER` a second after that (the server's event loop thread only)."""

    KEPT = 1024  # addresses remembered before the full buckets are forgotten

    def __init__(self) -> None:
        self._buckets: dict[str, tuple[float, float]] = {}  # address: (tokens, when)

    def allow(self, address: str, now: float) -> bool:
        tokens, when = self._buckets.get(address, (float(MAX_PER_PEER), now))
        tokens = min(float(MAX_PER_PEER), tokens + (now - when) * NEW_PER_PEER)
        if tokens < 1.0:
            self._buckets[address] = (tokens, now)
            return False
        if len(self._buckets) >= self.KEPT and address not in self._buckets:
            self._forget_full(now)
        self._buckets[address] = (tokens - 1.0, now)
        return True

    def _forget_full(self, now: float) -> None:
        refill = MAX_PER_PEER / NEW_PER_PEER
        self._buckets = {a: b for a, b in self._buckets.items() if now - b[1] < refill}


_openings = _Openings()

_last_note = [0.0]


def _note(text: str) -> None:
    """Log a closed connection, at most once a second."""
    now = time.monotonic()
    if now - _last_note[0] >= 1.0:
        _last_note[0] = now
        log.warning("%s", text)


def admit(address: str) -> bool:
    """Whether a new TCP connection from ``address`` is let in: refused when the address
    holds :data:`MAX_PER_PEER` connections already, or opens them faster than
    :data:`NEW_PER_PEER` a second. Called by the listening socket as it accepts
    (engine/serve/sockets.py, :class:`~engine.serve.sockets.GuardedListener`), so that a
    refused connection costs no transport or protocol; the server's event loop thread
    only."""
    if _per_peer.get(address, 0) >= MAX_PER_PEER:
        _note(f"API: {address} holds {MAX_PER_PEER} connections already: closed a new one")
        return False
    if not _openings.allow(address, time.monotonic()):
        _note(f"API: {address} opens more than {NEW_PER_PEER:g} connections a second: closed a new one")
        return False
    return True


class ApiProtocol(H11Protocol):
    """uvicorn's h11 protocol with a request deadline, peer tagging and JSON 400s."""

    _deadline: asyncio.TimerHandle | None = None
    _counted: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        unix = sock is not None and sock.family == socket.AF_UNIX
        if not unix and self.client is not None:
            address = self.client[0]
            if _per_peer.get(address, 0) >= MAX_PER_PEER:
                # admitted as one of a batch accepted at once (admit() saw the count
                # before their protocols were made): the count holds here
                _note(f"API: {address} holds {MAX_PER_PEER} connections already: closed a new one")
                transport.close()
                return
            _per_peer[address] = _per_peer.get(address, 0) + 1
            self._counted = address
        peer = {"unix": unix, "uid": peer_uid(sock) if unix else None}
        inner = self.app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            scope[PEER] = peer
            await inner(scope, receive, send)

        self.app = app  # an ASGI app, per connection
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(REQUEST_DEADLINE, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR):
            self._disarm()  # a whole request is in: the deadline was met

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this connection has its own deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._counted is not None:
            left = _per_peer.get(self._counted, 1) - 1
            if left > 0:
                _per_peer[self._counted] = left
            else:
                _per_peer.pop(self._counted, None)
            self._counted = None
        super().connection_lost(exc)

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        _note(f"API: closed a connection that sent no whole request within {REQUEST_DEADLINE:g}s")
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        body = json.dumps({"error_code": 400, "message": f"malformed HTTP request: {msg}"}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        try:
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:
            pass  # a response was under way: just close
        self._disarm()
        self.transport.close()
