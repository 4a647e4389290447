"""The console's own engine: a child process the console starts and stops, serving the
same API as any running zync (zync_tui/console/child.py).

The loops (from-kafka, the ETL, to-kafka, apply), the observer and Spark's Python side are
Python threads; in the console's process they would share the interpreter lock and the
cores with the screen, and a key would wait for them (bench/console_latency.py). So they
run in a child, below the screen's priority, and the console reaches them through the
child's Unix socket (:class:`~zync_tui.console.remote.ApiBackend`), exactly as it
reaches a `zync run` it attaches to. :class:`EngineProcess` starts the child (its socket
under the zync home, named after the console's pid), waits for it to listen, and stops
it: SIGTERM, after which the child stops its loops (each finishes its commit in flight).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from engine.api import ApiError, api_socket_path, zync_home
from zync_tui.console.backend import EngineSettings
from zync_tui.console.child import ENGINE_NICENESS, settings_json

#: Seconds the child has to listen on its socket.
LISTEN_TIMEOUT = 60.0
#: Seconds the child has to stop its loops once asked.
STOP_TIMEOUT = 150.0

__all__ = ["ENGINE_NICENESS", "EngineFailure", "EngineProcess"]


class EngineFailure(ApiError):
    """The engine's process could not be started, or has ended."""


class EngineProcess:
    """The console's engine in a child process, serving its API on a Unix socket."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.socket = api_socket_path(zync_home(), "console", str(os.getpid()))
        log = zync_home() / "console-engine.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = log.open("ab")
        # started before the app runs: Textual replaces sys.stdout and sys.stderr while it
        # runs, and the child's output goes to a file either way
        self._process = subprocess.Popen(
            [sys.executable, "-m", "zync_tui.console.child",
             settings_json(settings), str(self.socket), str(os.getpid())],  # fmt: skip
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,  # a Ctrl-C of the console is the console's
        )
        self.pid = self._process.pid
        self.log_path = log

    def wait_listening(self, timeout: float = LISTEN_TIMEOUT) -> Path:
        """The socket, once the child listens on it."""
        from engine.api import ApiClient

        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise EngineFailure(
                    f"the engine's process ended (exit code {self._process.returncode}); its "
                    f"output is in {self.log_path}"
                )
            if self.socket.exists():
                client = ApiClient(str(self.socket), timeout=5)
                try:
                    client.get("/v1/status", sections="process")
                    return self.socket
                except ApiError:
                    pass
                finally:
                    client.close()
            if time.monotonic() > deadline:
                raise EngineFailure(f"the engine's process did not listen within {timeout:g}s")
            time.sleep(0.05)

    def running_child(self) -> bool:
        return self._process.poll() is None

    def exit_code(self) -> int | None:
        return self._process.poll()

    def close(self) -> None:
        """Stop the loops (each finishes its commit in flight), then the child."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        with contextlib.suppress(OSError):
            self._log.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
