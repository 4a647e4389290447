"""The embedded development stack: ``zync dev up|down|status``.

``up()`` starts two child processes, each in its own session so they outlive the
command that started them: the **broker** (Apache Kafka in KRaft mode,
:mod:`engine.local.broker`; its topics live in ``<zync home>/dev/kafka-data`` and
survive ``down``/``up``) and the **registry** (:mod:`engine.local.registry`, durable in
``<zync home>/dev/registry.db``). Both listen on 127.0.0.1, preferring the ports clients
expect (9092, 8081) and falling back to free ones.

Everything lives in ``<zync home>/dev/``: ``stack.json`` (the state: each component's
PID, port and exact command line, and which connection profiles ``up()`` wrote), the
logs, the broker's data and the registry database. ``up()`` writes ``kafka.json`` and
``schema_registry.json`` in the zync home when they are absent or are the ones it wrote
before; a profile that points elsewhere (a user's real cluster) is kept and reported.
``down()`` stops exactly the processes in the state file (SIGTERM, then SIGKILL after a
timeout) and removes the profiles it wrote if nobody changed them since.
Nothing happens at import time.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from engine.local.broker import BROKER, DEFAULT_BROKER_PORT, broker_ready, start_broker
from engine.local.processes import (
    STOP_TIMEOUT,
    DevStackError,
    Process,
    memory_bytes,
    process_running,
    stop_process,
    wait_ready,
)
from engine.local.registry import (
    DEFAULT_REGISTRY_PORT,
    REGISTRY,
    registry_ready,
    start_registry,
)
from engine.settings.errors import ConfigError
from engine.settings.files import read_json_object, write_private_json
from engine.settings.home import zync_home
from engine.settings.kafka import KAFKA_ENV_PREFIX, KAFKA_FILE
from engine.settings.registry import REGISTRY_ENV_PREFIX, REGISTRY_FILE

COMPONENTS: Final = (BROKER, REGISTRY)
READY_TIMEOUT: Final = 60.0
STATE_FILE: Final = "stack.json"
_STATE_VERSION: Final = 1


@dataclass(frozen=True)
class ComponentStatus:
    """One line of ``zync dev status``."""

    component: str
    address: str | None
    pid: int | None
    healthy: bool
    detail: str
    memory_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "address": self.address,
            "pid": self.pid,
            "healthy": self.healthy,
            "detail": self.detail,
            "memory_bytes": self.memory_bytes,
        }


@dataclass(frozen=True)
class StackReport:
    """What ``up()``/``down()`` found and did: component statuses and one note per action."""

    components: tuple[ComponentStatus, ...]
    notes: tuple[str, ...]


@dataclass
class _State:
    components: dict[str, Process] = field(default_factory=dict)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)


def healthy(proc: Process, timeout: float) -> bool:
    """True when the broker or registry ``proc`` answers its readiness probe."""
    if proc.component == BROKER:
        return broker_ready(proc.address, timeout)
    return registry_ready(proc.address, timeout)


def dev_dir(home: Path | None = None) -> Path:
    """``<zync home>/dev``: state, logs and the registry database of the dev stack."""
    return (home or zync_home()) / "dev"


def _prepare(ddir: Path) -> None:
    try:
        ddir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with (ddir / ".write-test").open("w"):
            pass
        (ddir / ".write-test").unlink()
    except OSError as exc:
        raise DevStackError(
            f"cannot write to {ddir}: {exc.strerror or exc}; set ZYNC_HOME to a writable directory"
        ) from None


@contextlib.contextmanager
def _locked(ddir: Path) -> Iterator[None]:
    """One ``up``/``down`` at a time per zync home."""
    with (ddir / "lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _load_state(ddir: Path) -> _State:
    path = ddir / STATE_FILE
    try:
        data = read_json_object(path)
        if data is None:
            return _State()
        components = {
            name: Process.from_json(name, entry)
            for name, entry in data.get("components", {}).items()
            if name in COMPONENTS
        }
        profiles = {
            name: dict(content)
            for name, content in data.get("profiles", {}).items()
            if name in (KAFKA_FILE, REGISTRY_FILE)
        }
    except (ConfigError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DevStackError(
            f"{path} is damaged ({exc}): stop any dev broker/registry still running "
            "and delete the file"
        ) from None
    return _State(components, profiles)


def _save_state(ddir: Path, state: _State) -> None:
    path = ddir / STATE_FILE
    if not state.components and not state.profiles:
        path.unlink(missing_ok=True)
        return
    write_private_json(
        path,
        {
            "version": _STATE_VERSION,
            "components": {name: proc.to_json() for name, proc in state.components.items()},
            "profiles": state.profiles,
        },
    )


def _read_profile(path: Path) -> dict[str, Any] | None:
    """The profile's content; a file that is not valid JSON counts as the user's."""
    try:
        return read_json_object(path)
    except ConfigError:
        return {"<unreadable>": True}


def _describe(name: str, content: dict[str, Any]) -> str:
    """Where a profile points, without credentials."""
    if name == KAFKA_FILE:
        return f"bootstrap_servers={content.get('bootstrap_servers')!r}"
    try:
        parts = urllib.parse.urlsplit(str(content.get("url", "")))
        netloc = f"{parts.hostname}:{parts.port}" if parts.port else (parts.hostname or "")
    except ValueError:
        return "url=?"
    return f"url={parts._replace(netloc=netloc).geturl()!r}"


def _write_profiles(home: Path, state: _State) -> list[str]:
    notes = []
    broker, registry = state.components[BROKER], state.components[REGISTRY]
    wanted = {
        KAFKA_FILE: (
            {"bootstrap_servers": broker.address, "security_protocol": "PLAINTEXT"},
            f"{KAFKA_ENV_PREFIX}BOOTSTRAP_SERVERS",
            broker.address,
        ),
        REGISTRY_FILE: ({"url": registry.address}, f"{REGISTRY_ENV_PREFIX}URL", registry.address),
    }
    for name, (content, env_name, address) in wanted.items():
        path = home / name
        current = _read_profile(path)
        previous = state.profiles.get(name)
        if current == content:
            notes.append(f"{path} already points at the dev stack")
        elif current is None or current == previous:
            try:
                write_private_json(path, content)
            except OSError as exc:
                raise DevStackError(
                    f"cannot write {path}: {exc.strerror}; set ZYNC_HOME to a writable directory"
                ) from None
            state.profiles[name] = content
            notes.append(f"wrote {path} ({_describe(name, content)})")
        else:
            state.profiles.pop(name, None)
            notes.append(
                f"kept {path}: it points elsewhere ({_describe(name, current)}); "
                f"to use the dev stack, set {env_name}={address}"
            )
        env_value = os.environ.get(env_name)
        if env_value and env_value != address:
            notes.append(f"${env_name}={env_value} is set and wins over {path}")
    return notes


def _remove_profiles(home: Path, state: _State) -> list[str]:
    notes = []
    for name, content in list(state.profiles.items()):
        path = home / name
        if _read_profile(path) == content:
            path.unlink()
            notes.append(f"removed {path}")
        elif path.exists():
            notes.append(f"kept {path}: it changed since `zync dev up` wrote it")
        del state.profiles[name]
    return notes


def _status_of(component: str, proc: Process | None, probe_timeout: float) -> ComponentStatus:
    if proc is None:
        return ComponentStatus(component, None, None, False, "not running")
    if not process_running(proc):
        return ComponentStatus(
            component, proc.address, proc.pid, False, "not running (stale state)"
        )
    ok = healthy(proc, probe_timeout)
    return ComponentStatus(
        component,
        proc.address,
        proc.pid,
        ok,
        "ok" if ok else f"not answering (see {proc.log_file})",
        memory_bytes(proc.pid),
    )


def up(
    broker_port: int | None = None,
    registry_port: int | None = None,
    *,
    home: Path | None = None,
    timeout: float = READY_TIMEOUT,
) -> StackReport:
    """Start the broker and the registry unless they already run; write the profiles.

    Idempotent: components that run and answer are reported, not started again. Ports as
    for :func:`start_broker` (None: prefer 9092/8081). When the second component cannot
    start, the one started by this call is stopped again. Raises :class:`DevStackError`.
    """
    home = home or zync_home()
    ddir = dev_dir(home)
    _prepare(ddir)
    notes: list[str] = []
    with _locked(ddir):
        state = _load_state(ddir)
        started: list[Process] = []
        starters: dict[str, Callable[[], Process]] = {
            BROKER: lambda: start_broker(ddir, broker_port, timeout=timeout),
            REGISTRY: lambda: start_registry(ddir, registry_port, timeout=timeout),
        }
        asked = {BROKER: broker_port, REGISTRY: registry_port}
        try:
            for component in COMPONENTS:
                proc = state.components.get(component)
                if proc is not None and process_running(proc):
                    if asked[component] and asked[component] != proc.port:
                        raise DevStackError(
                            f"the {component} already runs on port {proc.port} "
                            f"(pid {proc.pid}): run `zync dev down` first to move it"
                        )
                    if not wait_ready(proc, healthy, timeout):
                        raise DevStackError(
                            f"the {component} (pid {proc.pid}) runs but does not answer at "
                            f"{proc.address} (see {proc.log_file}): run `zync dev down`, "
                            "then `zync dev up`"
                        )
                    notes.append(f"{component} already running at {proc.address} (pid {proc.pid})")
                    continue
                if proc is not None:
                    notes.append(
                        f"{component}: pid {proc.pid} in {ddir / STATE_FILE} is not ours "
                        "any more (stale); starting a new one"
                    )
                    del state.components[component]
                proc = starters[component]()
                started.append(proc)
                state.components[component] = proc
                _save_state(ddir, state)
                preferred = DEFAULT_BROKER_PORT if component == BROKER else DEFAULT_REGISTRY_PORT
                moved = (
                    f" (port {preferred} is taken)"
                    if asked[component] is None and proc.port != preferred
                    else ""
                )
                notes.append(
                    f"started {component} at {proc.address}{moved} (pid {proc.pid}, "
                    f"log {proc.log_file})"
                )
        except BaseException:
            for proc in reversed(started):
                stop_process(proc)
                state.components.pop(proc.component, None)
            _save_state(ddir, state)
            raise
        notes.extend(_write_profiles(home, state))
        _save_state(ddir, state)
        components = tuple(_status_of(c, state.components[c], 2.0) for c in COMPONENTS)
    return StackReport(components, tuple(notes))


def down(*, home: Path | None = None, timeout: float = STOP_TIMEOUT) -> StackReport:
    """Stop the processes ``up()`` started (per the state file) and remove its profiles.

    A PID that no longer runs our command line is left alone and forgotten. Raises
    :class:`DevStackError` when a process survives SIGKILL.
    """
    home = home or zync_home()
    ddir = dev_dir(home)
    notes: list[str] = []
    if not (ddir / STATE_FILE).exists():
        notes.append("nothing to stop: the dev stack is not running")
        return StackReport(tuple(_status_of(c, None, 0) for c in COMPONENTS), tuple(notes))
    with _locked(ddir):
        state = _load_state(ddir)
        for component in reversed(COMPONENTS):
            proc = state.components.get(component)
            if proc is None:
                continue
            if stop_process(proc, timeout):
                notes.append(f"stopped {component} (pid {proc.pid})")
            else:
                notes.append(f"{component} (pid {proc.pid}) was not running; forgot it")
            del state.components[component]
            _save_state(ddir, state)
        notes.extend(_remove_profiles(home, state))
        _save_state(ddir, state)
    return StackReport(tuple(_status_of(c, None, 0) for c in COMPONENTS), tuple(notes))


def status(*, home: Path | None = None, probe_timeout: float = 2.0) -> list[ComponentStatus]:
    """One status per component (broker, registry): address, PID, healthy, detail."""
    ddir = dev_dir(home or zync_home())
    state = _load_state(ddir) if (ddir / STATE_FILE).exists() else _State()
    return [_status_of(c, state.components.get(c), probe_timeout) for c in COMPONENTS]
