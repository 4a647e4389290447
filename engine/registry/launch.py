"""Run the registry service as a child process and wait for it: for the dev stack and tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from engine.errors import ZyncError

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding engine/


class RegistryStartError(ZyncError):
    """The registry process did not start or did not become ready."""


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def registry_command(
    port: int, db_path: str | Path, log_path: str | Path | None = None, host: str = "127.0.0.1"
) -> list[str]:
    """The command line that runs the registry service."""
    command = [
        sys.executable,
        "-m",
        "engine.registry",
        "--host",
        host,
        "--port",
        str(port),
        "--db",
        str(db_path),
    ]
    if log_path is not None:
        command += ["--log-file", str(log_path)]
    return command


def start_registry_process(
    port: int,
    db_path: str | Path,
    log_path: str | Path,
    host: str = "127.0.0.1",
    detach: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``python -m engine.registry`` and return at once (see ``wait_until_ready``).

    The service logs to ``log_path``; the child's stderr (e.g. "port in use") is appended
    to the same file. ``detach`` starts it in its own session, so it outlives a Ctrl-C
    in the parent's terminal (for ``zync dev up``).
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p
    )
    with open(log_path, "ab") as stderr:
        return subprocess.Popen(
            registry_command(port, db_path, log_path, host),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
            start_new_session=detach,
        )


def wait_until_ready(
    url: str,
    timeout: float = 15.0,
    process: subprocess.Popen[bytes] | None = None,
    log_path: str | Path | None = None,
) -> None:
    """Poll ``{url}/config`` until the registry answers 200, or raise RegistryStartError.

    With ``process``, fail as soon as it exits (quoting the last line of ``log_path``).
    """
    probe = url.rstrip("/") + "/config"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    deadline = time.monotonic() + timeout
    delay = 0.02
    last_error = "no answer"
    while True:
        if process is not None and process.poll() is not None:
            raise RegistryStartError(
                f"schema registry exited with code {process.returncode} before it was ready"
                + _last_line(log_path)
            )
        try:
            with opener.open(probe, timeout=2) as response:
                if response.status == 200:
                    return
                last_error = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last_error = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last_error = str(getattr(exc, "reason", exc))
        if time.monotonic() >= deadline:
            raise RegistryStartError(
                f"schema registry at {url} not ready after {timeout:g}s ({last_error})"
                + _last_line(log_path)
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    """Stop a child by its PID: SIGTERM, then SIGKILL after ``timeout``; its exit code."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def _last_line(log_path: str | Path | None) -> str:
    if log_path is None:
        return ""
    try:
        lines = Path(log_path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return f": {lines[-1].strip()}" if lines else ""
