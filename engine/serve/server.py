"""The API's server: uvicorn in a thread of its own, so the loops never wait on a client.

:func:`serve` binds the listening sockets in the caller's thread (a socket path that is
too long or a port taken fails there, in one line, before any loop starts), then starts
uvicorn on them in a daemon thread with limits for hostile clients: at most
:data:`MAX_CONNECTIONS` connections and requests at once (more get 503), request heads of
at most 16 KiB, idle keep-alive connections closed after 5 s, every request given 10 s to
arrive (engine/serve/protocol.py); the process's limit of open files is raised so that
connections cannot take the loops' descriptors. :meth:`ApiServer.stop` ends it and
removes the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import ZyncError
from engine.serve.auth import Guard
from engine.serve.sockets import TcpAddress, bind_tcp, bind_unix

if TYPE_CHECKING:
    import uvicorn

    from engine.serve.served_process import ServedProcess

#: Connections and requests served at once; more are answered 503 at once.
MAX_CONNECTIONS = 2048
#: File descriptors the process asks for (its soft limit, raised up to the hard one), so
#: that many connections do not run it out of them.
WANTED_FILES = 8192
#: Seconds an idle keep-alive connection stays open.
KEEP_ALIVE = 5
#: Seconds :func:`serve` waits for the server to listen.
START_TIMEOUT = 30.0


class ServeError(ZyncError):
    """The API could not start; the message says why."""


@dataclass
class ApiServer:
    """A running API: its Unix socket, its TCP address (None: not asked), its thread."""

    socket_path: Path | None
    tcp: TcpAddress | None
    _sockets: list[socket.socket] = field(repr=False)
    _server: uvicorn.Server | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _failure: BaseException | None = field(default=None, repr=False)

    def where(self) -> str:
        """Where it listens, in words."""
        places = []
        if self.socket_path is not None:
            places.append(f"unix:{self.socket_path}")
        if self.tcp is not None:
            places.append(f"http://{self.tcp}")
        return " and ".join(places)

    def stop(self, timeout: float = 5.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        if self.socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()


def serve(
    process: ServedProcess,
    *,
    socket_path: Path | None,
    tcp: TcpAddress | None = None,
    guard: Guard | None = None,
) -> ApiServer:
    """Listen (Unix socket, TCP when given) and serve ``process``'s API from a thread."""
    _more_files()
    sockets: list[socket.socket] = []
    bound: Path | None = None
    try:
        if socket_path is not None:
            unix, bound = bind_unix(socket_path)
            sockets.append(unix)
        if tcp is not None:
            listener = bind_tcp(tcp)
            sockets.append(listener)
            host, port = listener.getsockname()[:2]
            tcp = TcpAddress(tcp.host, port)
    except BaseException:
        for sock in sockets:
            sock.close()
        if bound is not None:
            bound.unlink(missing_ok=True)
        raise
    server = ApiServer(bound, tcp, sockets)
    ready = threading.Event()
    process.attach_log()

    def main() -> None:
        try:
            import uvicorn  # deferred: the server's thread imports the web stack

            from engine.serve.app import make_app
            from engine.serve.metrics import Exposition
            from engine.serve.protocol import MAX_HEAD, ApiProtocol, admit
            from engine.serve.sockets import GuardedListener

            for sock in sockets:
                if isinstance(sock, GuardedListener):
                    sock.admit = admit

            app = make_app(process, guard or Guard(None), Exposition(process))
            config = uvicorn.Config(
                app,
                http=ApiProtocol,
                lifespan="off",
                log_config=None,
                access_log=False,
                limit_concurrency=MAX_CONNECTIONS,
                timeout_keep_alive=KEEP_ALIVE,
                h11_max_incomplete_event_size=MAX_HEAD,
                timeout_graceful_shutdown=2,
            )
            server._server = uvicorn.Server(config)
            logging.getLogger("uvicorn.error").setLevel(logging.ERROR)
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            task = loop.create_task(server._server.serve(sockets=sockets))
            loop.call_soon(_when_started, server._server, ready, loop)
            loop.run_until_complete(task)
        except BaseException as exc:  # noqa: BLE001 - told to the caller of serve()
            server._failure = exc
        finally:
            ready.set()

    thread = threading.Thread(target=main, name="zync-api", daemon=True)
    server._thread = thread
    thread.start()
    if not ready.wait(START_TIMEOUT) or server._failure is not None:
        server.stop()
        why = server._failure or "it did not start in time"
        raise ServeError(f"the API could not start: {why}")
    return server


def _more_files() -> None:
    """Raise the soft limit of open files towards :data:`WANTED_FILES` (never above the
    hard limit): a storm of connections must not leave the loops without descriptors."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = WANTED_FILES if hard == resource.RLIM_INFINITY else min(WANTED_FILES, hard)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (OSError, ValueError):
        pass  # as it is, then


def _when_started(server: uvicorn.Server, ready: threading.Event, loop: asyncio.AbstractEventLoop) -> None:
    if server.started:
        ready.set()
    elif not server.should_exit:
        loop.call_later(0.02, _when_started, server, ready, loop)
