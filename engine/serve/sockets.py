"""Where a process listens: its Unix socket under the zync home, and TCP when asked.

The socket is ``<zync home>/run/<pipeline>.<role>.sock`` (``role``: ``run`` for every
loop, else the loops joined by ``+``, or ``console``), in a directory only its owner may
enter, with mode 0600: the file system is the guard, and the server also checks each
peer's user (:func:`peer_uid`). A Unix socket path holds at most :data:`MAX_PATH` bytes:
a longer one is replaced by a digest of its name, and when even that does not fit the
process stops with one line saying how to shorten it. A socket left by a process that
died is replaced; one that still answers (a second process of the same loops) makes the
newcomer add its pid to the name.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ZyncError

#: sun_path holds 108 bytes, the terminating NUL included.
MAX_PATH = 107
#: Connections the kernel queues for the server.
BACKLOG = 2048


class ListenError(ZyncError):
    """The API cannot listen where asked; the message says why and what to do."""


def run_dir(home: Path) -> Path:
    return home / "run"


def socket_name(pipeline: str, role: str) -> str:
    """``<pipeline>.<role>.sock``, with anything but letters, digits, ``.``, ``_``,
    ``+`` and ``-`` replaced by ``_``."""

    def clean(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9._+-]", "_", text) or "_"

    return f"{clean(pipeline)}.{clean(role)}.sock"


def socket_path(home: Path, pipeline: str, role: str) -> Path:
    """The socket's path, shortened to a digest when it would not fit a socket address;
    raises :class:`ListenError` when the zync home itself is too long."""
    directory = run_dir(home)
    path = directory / socket_name(pipeline, role)
    if len(os.fsencode(path)) <= MAX_PATH:
        return path
    short = directory / (hashlib.sha256(path.name.encode()).hexdigest()[:16] + ".sock")
    if len(os.fsencode(short)) <= MAX_PATH:
        return short
    raise ListenError(
        f"the API's Unix socket cannot live under {directory}: a socket path holds at most "
        f"{MAX_PATH} bytes and this one has {len(os.fsencode(short))}; set ZYNC_HOME to a "
        "shorter directory"
    )


def _private_dir(directory: Path) -> None:
    """``directory`` exists, is ours, and only we may enter it."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.stat()
    if info.st_uid != os.getuid():
        raise ListenError(
            f"{directory} belongs to another user (uid {info.st_uid}): the API's socket "
            "would not be private; set ZYNC_HOME to a directory of yours"
        )
    if info.st_mode & 0o077:
        directory.chmod(0o700)


def answers(path: Path, timeout: float = 1.0) -> bool:
    """Whether a server listens on the Unix socket ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(os.fspath(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def bind_unix(path: Path) -> tuple[socket.socket, Path]:
    """A listening Unix socket at ``path`` (mode 0600, its directory 0700); another
    process of the same name still serving: the path gets this pid. Returns the socket
    and the path it is bound to."""
    _private_dir(path.parent)
    if path.exists() or path.is_symlink():
        if answers(path):
            path = path.with_name(f"{path.name.removesuffix('.sock')}-{os.getpid()}.sock")
            if len(os.fsencode(path)) > MAX_PATH:
                path = path.with_name(f"{os.getpid()}.sock")
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by a process that is gone
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(os.fspath(path))
        os.chmod(path, 0o600)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock, path


@dataclass(frozen=True)
class TcpAddress:
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_address(text: str) -> TcpAddress:
    """``HOST:PORT`` (``[::1]:9000`` for IPv6; ``:9000`` listens on every address)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(f"--http {text!r}: give HOST:PORT, e.g. 127.0.0.1:9464 or :9464")
    host = host.strip("[]") or "0.0.0.0"
    return TcpAddress(host, int(port))


def _anyone(address: str) -> bool:
    return True


class GuardedListener(socket.socket):
    """A listening TCP socket whose ``accept`` closes at once the connections that
    :attr:`admit` refuses (by client address) and returns the next one.

    asyncio makes a transport, a task and a protocol for every connection it accepts
    before the protocol can refuse it; refused here, a connection costs an accept and a
    close (a storm of 1,000 connections a second kept the API's thread busy 13 % of the
    time refusing them, on the cores the loops work on). At most :data:`REFUSED_AT_ONCE`
    are refused per call, so that a storm never holds the event loop."""

    #: whether a connection from this address is let in (set by the server)
    admit: Callable[[str], bool] = staticmethod(_anyone)

    def accept(self) -> tuple[socket.socket, Any]:
        for _ in range(REFUSED_AT_ONCE):
            conn, address = super().accept()
            if self.admit(address[0]):
                return conn, address
            conn.close()
        raise BlockingIOError("refused a storm of connections: the rest on the next turn")


#: Connections :meth:`GuardedListener.accept` refuses in one call, at most.
REFUSED_AT_ONCE = 256


def bind_tcp(address: TcpAddress) -> GuardedListener:
    """A listening TCP socket on ``address`` (port 0: a free one), its connections
    admitted by :attr:`GuardedListener.admit` (everyone until the server sets it)."""
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = GuardedListener(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address.host, address.port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {address}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end of a Unix socket (None: not known)."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def listening_sockets(directory: Path) -> list[Path]:
    """The sockets under ``directory`` that answer (processes serving the API)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.sock") if answers(p, timeout=0.5))
