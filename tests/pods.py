"""The pods of a rendered chart, run as local processes (what a kubelet would do, on this
machine): each Deployment's container command, arguments and environment, its ConfigMaps
and Secrets written to the paths its manifests mount, its emptyDirs as directories.

What differs from a cluster is mapped, and only that: the image's paths (its ENV lines in
deploy/image/Containerfile: /opt/zync is this checkout, /opt/zync/cache zync's cache
here) and each mount path to a directory of the pod; the pod's address is 127.0.0.1 and
its API port (``0.0.0.0:<containerPort>`` in the arguments) a free port of 127.0.0.1,
which the probes then use. :class:`Pod` starts one process, answers its probes as the
manifests name them, and stops it as a kubelet does: SIGTERM to the container's process,
then up to ``terminationGracePeriodSeconds``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONTAINERFILE = ROOT / "deploy" / "image" / "Containerfile"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def image_env(*, mapped: bool = True) -> dict[str, str]:
    """The image's environment (the Containerfile's ENV lines, in order), its paths
    mapped to this machine's (:func:`host_paths`) unless ``mapped`` is False."""
    text = CONTAINERFILE.read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("ENV "):
            continue
        for key, value in re.findall(r"(\w+)=(\S+)", line[4:]):
            env[key] = host_paths(value) if mapped else value
    return env


def host_paths(value: str) -> str:
    """An image path as this machine has it: /opt/zync/cache → zync's cache here,
    /opt/zync → this checkout, ``$PATH`` → this process's."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    value = value.replace("/opt/zync/cache", cache).replace("/opt/zync", str(ROOT))
    return value.replace("$PATH", os.environ["PATH"])


@dataclass
class Pod:
    """One replica of a Deployment's pod template, as a local process."""

    name: str
    template: dict[str, Any]
    config_maps: dict[str, dict[str, str]]
    secrets: dict[str, dict[str, str]]
    root: Path
    ports: dict[str, int] = field(default_factory=dict)  # container port name → local port
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.template["spec"])

    @property
    def container(self) -> dict[str, Any]:
        (container,) = self.spec["containers"]
        return dict(container)

    def _volumes(self) -> dict[str, Path]:
        """Each volume as a directory of the pod, its files written."""
        found: dict[str, Path] = {}
        for volume in self.spec["volumes"]:
            where = self.root / volume["name"]
            where.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                data = self.config_maps[volume["configMap"]["name"]]
            elif "secret" in volume:
                data = self.secrets[volume["secret"]["secretName"]]
            elif "emptyDir" in volume:
                data = {}
            else:
                raise AssertionError(f"{self.name}: no local stand-in for volume {volume}")
            for key, value in data.items():
                (where / key).write_text(value)
                if "secret" in volume:
                    (where / key).chmod(0o400)
            found[volume["name"]] = where
        return found

    def _mounts(self) -> list[tuple[str, Path]]:
        """(mount path, local path), longest mount path first."""
        volumes = self._volumes()
        mounts = []
        for mount in self.container["volumeMounts"]:
            local = volumes[mount["name"]]
            if "subPath" in mount:
                local = local / mount["subPath"]
            mounts.append((mount["mountPath"], local))
        mounts.sort(key=lambda m: -len(m[0]))
        # a mount inside another one (spark.json in the zync home): there in the outer one too
        for path, local in mounts:
            outer = next(((p, lo) for p, lo in mounts if path.startswith(p + "/")), None)
            if outer is not None:
                inside = outer[1] / path[len(outer[0]) + 1 :]
                inside.parent.mkdir(parents=True, exist_ok=True)
                inside.symlink_to(local)
        return mounts

    def _map(self, text: str, mounts: list[tuple[str, Path]]) -> str:
        for path, local in mounts:
            if text == path or text.startswith(path + "/"):
                return str(local) + text[len(path) :]
        return text

    def _env(self, mounts: list[tuple[str, Path]]) -> dict[str, str]:
        # the pod's mounts first, on the image's paths, then the image's paths as this
        # machine has them (a checkout under /tmp must not land in the pod's /tmp)
        env = {k: host_paths(self._map(v, mounts)) for k, v in image_env(mapped=False).items()}
        if "JAVA_HOME" in os.environ:  # the image's java is on its PATH; here maybe not
            env["JAVA_HOME"] = os.environ["JAVA_HOME"]
        fields = {"metadata.name": self.name, "status.podIP": "127.0.0.1"}
        for entry in self.container.get("env", []):
            if "value" in entry:
                value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), entry["value"])
            else:
                ref = entry["valueFrom"]
                if "secretKeyRef" in ref:
                    value = self.secrets[ref["secretKeyRef"]["name"]][ref["secretKeyRef"]["key"]]
                elif "configMapKeyRef" in ref:
                    value = self.config_maps[ref["configMapKeyRef"]["name"]][ref["configMapKeyRef"]["key"]]
                else:
                    value = fields[ref["fieldRef"]["fieldPath"]]
            env[entry["name"]] = self._map(value, mounts)
        return env

    def start(self) -> None:
        mounts = self._mounts()
        env = self._env(mounts)
        container_ports = {p["containerPort"]: p["name"] for p in self.container["ports"]}
        args = []
        for arg in self.container["args"]:
            if (found := re.fullmatch(r"0\.0\.0\.0:(\d+)", arg)) and int(found[1]) in container_ports:
                local = free_port()
                self.ports[container_ports[int(found[1])]] = local
                arg = f"127.0.0.1:{local}"
            args.append(self._map(arg, mounts))
        command = [self._map(c, mounts) for c in self.container["command"]]
        self.log = self.root / "container.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [*command, *args],
                env=env,
                cwd=self._map("/var/lib/zync", mounts),  # the image's WORKDIR
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def probe(self, kind: str) -> int:
        """The HTTP status of the probe the manifest names (``livenessProbe``, ...), at
        its path and port; 0 when nothing answers."""
        get = self.container[kind]["httpGet"]
        port = get["port"]
        local = self.ports[port] if isinstance(port, str) else self.ports[self._port_name(port)]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{local}{get['path']}", timeout=5) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0

    def _port_name(self, number: int) -> str:
        return next(p["name"] for p in self.container["ports"] if p["containerPort"] == number)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.ports['http-api']}{path}"

    def wait_for(self, kind: str, status: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (got := self.probe(kind)) != status:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.process.returncode}: {self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {kind} answered {got}, not {status}: {self.tail()}")
            time.sleep(0.2)

    def terminate(self) -> tuple[int, float]:
        """SIGTERM to the container's process, as a kubelet stops a pod; its exit code and
        the seconds it took. Killed (and failed) past terminationGracePeriodSeconds."""
        assert self.process is not None
        grace = float(self.spec["terminationGracePeriodSeconds"])
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} still ran {grace:.0f}s after SIGTERM: {self.tail()}") from None
        return code, time.monotonic() - started

    def kill(self) -> None:
        """What is left of the pod's processes (its group), at once."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)

    def tail(self, lines: int = 20) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def pods(docs: list[dict[str, Any]], secrets: dict[str, dict[str, str]], root: Path) -> list[Pod]:
    """Every replica of every Deployment in ``docs``, ready to start; each pod's files in
    ``root/<n>`` (keep ``root`` short: a pod's API socket lives in its zync home, and a
    socket's path holds at most 107 bytes)."""
    config_maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    found: list[Pod] = []
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        for replica in range(dep["spec"]["replicas"]):
            name = f"{dep['metadata']['name']}-{replica}"
            found.append(Pod(name, dep["spec"]["template"], config_maps, secrets, root / str(len(found))))
    return found
