"""The console's engine process: ``python -m zync_tui.console.child SETTINGS SOCKET PARENT``.

A zync engine process like ``zync run``: it builds the console's
:class:`~zync_tui.console.backend.EngineBackend` (the pipeline, the observer and, for
``zync demo``, the demo's driver) and serves its API on ``SOCKET`` — the console then
talks to it as it talks to any running zync (zync_tui/console/remote.py). It runs below
the console's CPU priority (``nice`` :data:`ENGINE_NICENESS` for it and its session's
autogroup, which the JVMs it starts inherit), stops its loops and exits on SIGTERM, and by itself when the console's process
``PARENT`` is gone (killed: nothing else would stop the loops and the demo's stack).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: How much lower the engine's CPU priority is than the console's (``nice``).
ENGINE_NICENESS = 10
#: How often the engine looks whether the console's process is still there.
PARENT_CHECK = 1.0


def settings_json(settings: Any) -> str:
    """An :class:`~zync_tui.console.backend.EngineSettings` for the child's command line
    (its clock stays behind: the child keeps time by itself)."""
    return json.dumps(
        {
            "config_path": None if settings.config_path is None else str(settings.config_path),
            "lake_root": None if settings.lake_root is None else str(settings.lake_root),
            "kafka_overrides": dict(settings.kafka_overrides),
            "registry_overrides": dict(settings.registry_overrides),
            "read_only": settings.read_only,
            "demo": settings.demo,
            "start_stack": settings.start_stack,
            "autostart": settings.autostart,
            "spark_master": settings.spark_master,
        }
    )


def below_the_console() -> None:
    """This process, and the threads and JVMs it starts, below the console's CPU
    priority: ``nice`` for its threads, and the same for its session's *autogroup*. The
    engine runs in a session of its own (a Ctrl-C of the console is the console's), and
    where the kernel groups sessions (``/proc/sys/kernel/sched_autogroup_enabled``) it
    shares the CPU between groups first: a thread's nice only ranks it inside its group,
    so the engine's group got as much as the console's. Measured with two cores busy in
    another session: a 5 ms sleep and a little work overshot p50 1.60 / p95 3.02 ms with
    the group at nice 0, 0.38 / 0.43 ms at nice 10. Where either is not allowed, the
    same priority as the console."""
    with contextlib.suppress(OSError):
        os.nice(ENGINE_NICENESS)
    with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as autogroup:
        autogroup.write(str(ENGINE_NICENESS))


def main(argv: list[str]) -> None:
    from engine.api import Guard, serve
    from zync_tui.console.backend import EngineBackend, EngineSettings

    data, socket_path, parent = json.loads(argv[0]), Path(argv[1]), int(argv[2])
    below_the_console()
    config = data.pop("config_path")
    settings = EngineSettings(config_path=Path(config) if config else None, **data)
    engine = EngineBackend(settings)
    done = threading.Event()

    def finish(*_args: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the console's

    def watch() -> None:
        while os.getppid() == parent and not done.is_set():
            time.sleep(PARENT_CHECK)
        done.set()

    threading.Thread(target=watch, name="zync-console-watch", daemon=True).start()
    process = engine.served()
    server = serve(process, socket_path=socket_path, guard=Guard(None))
    try:
        with contextlib.suppress(Exception):  # said through the API's set-up state
            engine.start()
        if engine.config is not None:
            process.pipeline = engine.config.name
        while not done.wait(0.5):
            pass
    finally:
        with contextlib.suppress(Exception):  # exiting anyway
            engine.close()
        server.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
    os._exit(0)  # the engine's non-daemon threads (Spark's) must not keep the process
