"""Child processes of the embedded stack: start, readiness, identity and stop by PID.

A process started here runs in its own session (it outlives the command that started
it) and logs to ``<dir>/<component>.log``. A PID counts as ours only while
``/proc/PID/cmdline`` is exactly the command line we started, so a stale PID (the
process died, or the number now belongs to someone else) is never signalled; once
signalled, it counts as stopped when its PID is gone, a zombie, or started at another
time (an exiting process's command line reads empty before that). Ports are
on 127.0.0.1; a preferred port that is taken falls back to one the OS picks.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from engine.errors import ZyncError

HOST: Final = "127.0.0.1"
STOP_TIMEOUT: Final = 10.0
_AUTO_PORT_ATTEMPTS: Final = 3

# Popen objects of the children this process started, so they are reaped (no zombies)
# and Python does not warn about them; processes started by another zync process are
# found through /proc.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class DevStackError(ZyncError):
    """The embedded stack cannot be started, stopped or inspected; one line, with a fix."""


@dataclass(frozen=True)
class Process:
    """A broker or registry process started by this module."""

    component: str
    pid: int
    port: int
    argv: tuple[str, ...]
    log_file: Path

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` for the broker, ``http://127.0.0.1:PORT`` for the registry."""
        if self.component == "registry":
            return f"http://{HOST}:{self.port}"
        return f"{HOST}:{self.port}"

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "port": self.port,
            "argv": list(self.argv),
            "log_file": str(self.log_file),
        }

    @classmethod
    def from_json(cls, component: str, data: Any) -> Process:
        """Raises ValueError/KeyError/TypeError when ``data`` is not what to_json wrote."""
        argv = tuple(data["argv"])
        if not all(isinstance(arg, str) for arg in argv):
            raise TypeError("argv must hold strings")
        return cls(component, int(data["pid"]), int(data["port"]), argv, Path(data["log_file"]))


def _cmdline(pid: int) -> tuple[str, ...] | None:
    """The command line of a live (non-zombie) process, or None."""
    if pid <= 0:
        return None
    proc = Path("/proc") / str(pid)
    if not Path("/proc/self").exists():  # no procfs (macOS): ask ps
        result = subprocess.run(
            ["ps", "-o", "stat=,command=", "-p", str(pid)],
            capture_output=True,
            text=True,
            check=False,
        )
        line = result.stdout.strip()
        if result.returncode != 0 or not line or line.startswith("Z"):
            return None
        return tuple(line.split()[1:])
    fields = _stat_fields(pid)
    if not fields or fields[0] in _EXITED:
        return None
    try:
        raw = (proc / "cmdline").read_bytes()
    except OSError:
        return None
    return tuple(part.decode(errors="replace") for part in raw.split(b"\0")[:-1])


#: States of /proc/PID/stat of a process that has exited (zombie, dead).
_EXITED = ("Z", "X")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def _matches(actual: tuple[str, ...] | None, expected: tuple[str, ...]) -> bool:
    if actual is None:
        return False
    if Path("/proc/self").exists():
        return actual == expected
    return " ".join(actual) == " ".join(" ".join(expected).split())


def process_running(proc: Process) -> bool:
    """True while ``proc.pid`` is alive and runs exactly ``proc.argv`` (so it is ours)."""
    child = _CHILDREN.get(proc.pid)
    if child is not None:
        # Our own child: its PID cannot be reused before we reap it. (Asking /proc right
        # after the fork is racy: until exec has set up the new image, cmdline is empty.)
        if child.poll() is None:
            return True
        del _CHILDREN[proc.pid]
        return False
    return _matches(_cmdline(proc.pid), proc.argv)


def memory_bytes(pid: int) -> int | None:
    try:
        for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        if os.getpgid(pid) == pid:  # a session leader we started: its whole group
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)


def _live_start_time(pid: int) -> str | None:
    """When ``pid`` started (clock ticks after boot), or None once it is gone or a zombie.

    An exiting process drops its command line before it becomes a zombie, so "the command
    line is no longer ours" alone would call a process that is still tearing down gone.
    The start time tells that moment from a PID reused by someone else.
    """
    fields = _stat_fields(pid)
    if not fields or fields[0] in _EXITED or len(fields) <= 19:
        return None
    return fields[19]


def _wait_gone(proc: Process, started: str | None, timeout: float) -> bool:
    """Wait until ``proc`` has exited (our child: reaped; another's: gone or a zombie)."""
    deadline = time.monotonic() + timeout
    child = _CHILDREN.get(proc.pid)
    while True:
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=max(0.0, min(0.1, deadline - time.monotonic())))
        gone = (
            not process_running(proc)
            if child is not None or started is None
            else _live_start_time(proc.pid) != started
        )
        if gone:
            _CHILDREN.pop(proc.pid, None)
            return True
        if time.monotonic() >= deadline:
            return False
        if child is None:
            time.sleep(0.05)


def stop_process(proc: Process, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop ``proc`` if it is still ours: SIGTERM, then SIGKILL after ``timeout`` seconds.

    Returns True when it stopped the process, False when the PID was no longer ours (it
    had exited, or now runs something else, which is left alone). Raises
    :class:`DevStackError` when the process survives SIGKILL.
    """
    if not process_running(proc):
        _CHILDREN.pop(proc.pid, None)
        return False
    started = _live_start_time(proc.pid)
    try:
        _signal(proc.pid, signal.SIGTERM)
        if _wait_gone(proc, started, timeout):
            return True
        _signal(proc.pid, signal.SIGKILL)
        if _wait_gone(proc, started, 5.0):
            return True
    except PermissionError:
        pass
    raise DevStackError(
        f"{proc.component} (pid {proc.pid}) does not stop: kill it yourself (kill -9 {proc.pid})"
    )


def log_tail(log_file: Path, offset: int) -> str:
    try:
        with log_file.open("rb") as fh:
            fh.seek(offset)
            lines = [ln.strip() for ln in fh.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    return lines[-1][:300] if lines else ""


def port_is_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:``port`` (so a server could bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that is free now (chosen by the OS)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def choose_port(preferred: int | None) -> int:
    """``preferred`` when it is free, else a free port chosen by the OS."""
    if preferred and port_is_free(preferred):
        return preferred
    return free_port()


def tcp_open(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_ready(proc: Process, ready: Callable[[Process, float], bool], timeout: float) -> bool:
    """Poll ``ready`` until ``timeout``; False as soon as the process has exited."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        if not process_running(proc):
            return False
        if ready(proc, min(2.0, max(0.2, deadline - time.monotonic()))):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def start(
    component: str,
    log_dir: Path,
    port: int | None,
    preferred: int,
    launch: Callable[[int, Path], subprocess.Popen[bytes]],
    ready: Callable[[Process, float], bool],
    timeout: float,
) -> Process:
    """Start ``component`` with ``launch(port, log_file)`` and wait until ``ready``.

    ``port``: None prefers ``preferred`` (else a free port, a few attempts when the
    chosen port is taken meanwhile), 0 takes any free port, another number is used as
    given (:class:`DevStackError` when taken).
    """
    if port:
        if not port_is_free(port):
            raise DevStackError(
                f"port {port} on {HOST} is already in use by another process: stop it, "
                f"or choose another port for the {component} (zync dev up --{component}-port N)"
            )
        attempts = 1
    else:
        attempts = _AUTO_PORT_ATTEMPTS
    log_file = log_dir / f"{component}.log"
    try:
        log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise DevStackError(
            f"cannot write to {log_dir}: {exc.strerror}; set ZYNC_HOME to a writable directory"
        ) from None
    reason = ""
    for attempt in range(attempts):
        chosen = port or choose_port(preferred if port is None and attempt == 0 else None)
        try:
            with log_file.open("ab") as log:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                log.write(f"--- {stamp} zync: starting the {component} on port {chosen}\n".encode())
                offset = log.tell()
            child = launch(chosen, log_file)
        except OSError as exc:
            raise DevStackError(f"cannot start the {component}: {exc}") from None
        _CHILDREN[child.pid] = child
        args = child.args  # the launchers pass a list
        argv = tuple(map(str, args)) if isinstance(args, list | tuple) else (str(args),)
        proc = Process(component, child.pid, chosen, argv, log_file)
        if wait_ready(proc, ready, timeout):
            return proc
        exited = not process_running(proc)
        stop_process(proc)
        tail = log_tail(log_file, offset)
        reason = f"{tail} " if tail else ""
        if not exited:
            raise DevStackError(
                f"the {component} did not answer at {proc.address} within {timeout:g} s "
                f"(see {log_file})"
            )
    raise DevStackError(f"the {component} exited at start: {reason}(see {log_file})")
