"""The console's :class:`~zync_tui.console.backend.Backend` over the API of zync
processes: its own engine's (zync_tui/console/hosted.py) or running ones it attaches to
(``zync tui --attach SOCKET|URL``, several ``zync run --only ...`` of one pipeline).

Everything shown comes from each process's ``/v1/status``, ``/v1/events`` and
``/v1/log`` (engine/serve); controls are its ``POST`` endpoints. The loops of all the
processes make one pipeline, each with its host and pid; a process that stops answering
shows its loops as unreachable since when it stopped, never as still running. A process
reached over TCP without a token is watched, not controlled: the console says so. The
processes themselves — which answers, which runs what, which may be controlled — are
:mod:`zync_tui.console.endpoints`.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from engine.api import (
    ApiError,
    DeadLetter,
    EtlReport,
    PassResult,
    TablesReport,
    TopicsReport,
    dead_letter_from,
    etl_from,
    pass_from,
    tables_from,
    topics_from,
)
from zync_tui.console.endpoints import Endpoint, Endpoints
from zync_tui.console.views import LOOPS, LogEntry, LoopState, LoopView

#: Seconds a pass, a stop or a batch may take.
CONTROL_TIMEOUT = 300.0


class ApiBackend:
    """The console's backend over one or more processes' APIs (see the module's docstring).

    ``hosted``: the console's own engine (started and stopped with the console);
    ``read_only``: asked for (``--read-only``); ``token``: for targets reached over TCP."""

    def __init__(
        self,
        targets: list[str],
        *,
        token: str | None = None,
        read_only: bool = False,
        demo: bool = False,
        hosted: Any = None,
        clock: Any = time.time,
    ) -> None:
        self.hosted = hosted
        self.demo: ApiDemo | None = ApiDemo(self) if demo else None
        self.clock = clock
        self.title = "zync demo" if demo else "zync"
        self._asked_read_only = read_only
        self._memo: dict[str, tuple[Any, Any]] = {}
        self.endpoints = Endpoints(targets, token=token, clock=clock)
        self.read_only, self.read_only_reason = self._read_only()

    def _read_only(self) -> tuple[bool, str | None]:
        if self._asked_read_only:
            return True, None
        why = self.endpoints.why_watched()
        return why is not None, why

    # -- set-up -----------------------------------------------------------------------------

    def start(self) -> list[str]:
        notes: list[str] = []
        if self.hosted is not None:
            self.hosted.wait_listening()
            notes.extend(self._hosted_setup())
        for endpoint in self.endpoints:
            if self.endpoints.status(endpoint, "process") is None:
                notes.append(f"{endpoint.where} unreachable: {endpoint.error}")
                continue
            p = endpoint.process
            notes.append(
                f"{endpoint.where}: {p['pipeline']} ({', '.join(p['loops']) or 'no loops'}) "
                f"on {p['host']}, pid {p['pid']}"
            )
        pipelines = {e.process["pipeline"] for e in self.endpoints if e.process}
        pipelines.discard("console")
        if pipelines:
            self.title = f"{self.title} · {' + '.join(sorted(pipelines))}"
        if self.hosted is None and all(e.unreachable_since for e in self.endpoints):
            raise ApiError("; ".join(f"{e.where}: {e.error}" for e in self.endpoints))
        return notes

    def _hosted_setup(self) -> list[str]:
        """Wait for the console's engine to set itself up; its notes."""
        endpoint = self.endpoints[0]
        while True:
            if self.endpoints.status(endpoint, "process") is None:
                raise ApiError(f"the engine's process does not answer: {endpoint.error}")
            setup = endpoint.process.get("setup") or {}
            if setup.get("state") == "failed":
                raise ApiError(str(setup.get("error")))
            if setup.get("state") == "done":
                return list(setup.get("notes") or [])
            time.sleep(0.1)

    # -- reading --------------------------------------------------------------------------

    def _made(self, kind: str, data: Any, make: Any) -> Any:
        """``make(data)``, made again only when the process sent something new (an
        unchanged document comes back as the same object: engine/serve/client.py)."""
        known = self._memo.get(kind)
        if known is not None and known[0] is data:
            return known[1]
        made = make(data)
        self._memo[kind] = (data, made)
        return made

    def topics(self) -> TopicsReport:
        return self._made("topics", self.endpoints.first("topics", "to-kafka"), topics_from)  # type: ignore[no-any-return]

    def etl(self) -> EtlReport:
        return self._made("etl", self.endpoints.first("etl", "etl"), etl_from)  # type: ignore[no-any-return]

    def tables(self) -> TablesReport:
        return self._made("tables", self.endpoints.first("tables", "apply"), tables_from)  # type: ignore[no-any-return]

    def dead_letters(self) -> list[DeadLetter]:
        data = self.endpoints.first("dead_letters", "from-kafka")
        return self._made("dead", data, lambda d: [dead_letter_from(x) for x in d])  # type: ignore[no-any-return]

    def loops(self) -> list[LoopView]:
        found: dict[str, LoopView] = {}
        notes: list[str] = []
        for endpoint in self.endpoints:
            doc = self.endpoints.status(endpoint, "process", "loops")
            if doc is None:
                since = datetime.fromtimestamp(endpoint.unreachable_since or self.clock())
                error = f"{endpoint.where} unreachable since {since:%H:%M:%S}: {endpoint.error}"
                for name in endpoint.loops:
                    found.setdefault(name, LoopView(
                        name, "unreachable", error=error,
                        host=endpoint.process.get("host"), pid=endpoint.process.get("pid"),
                    ))  # fmt: skip
                continue
            if doc["process"].get("note"):
                notes.append(doc["process"]["note"])
            for loop in doc["loops"]:
                current = found.get(loop["name"])
                if current is not None and current.state == "running":
                    continue  # two processes run it (a second ETL): the running one shows
                found[loop["name"]] = _view(loop)
        views = [found.pop(name) for name in LOOPS if name in found]
        views += list(found.values())  # loops of a newer zync (an apply loop)
        shown = {v.name for v in views}
        missing: LoopState = (
            "not run" if self.hosted is None or self._asked_read_only else "unavailable"
        )
        why = notes[0] if notes else "no process of this console runs it"
        views += [LoopView(name, missing, error=why) for name in LOOPS if name not in shown]
        order = {name: i for i, name in enumerate(LOOPS)}
        return sorted(views, key=lambda v: order.get(v.name, len(order)))

    # -- control --------------------------------------------------------------------------

    def _runner(self, loop: str) -> Endpoint:
        if self.read_only:
            raise PermissionError(
                f"read-only console: {self.read_only_reason or 'asked with --read-only'}"
            )
        endpoint = self.endpoints.running(loop)
        if endpoint is None:
            raise RuntimeError(f"no process of this console runs the {loop} loop")
        if not endpoint.control:
            raise PermissionError(f"read-only for {loop}: {endpoint.why_not}")
        return endpoint

    def _post(self, endpoint: Endpoint, path: str) -> Any:
        return endpoint.client.request("POST", path, timeout=CONTROL_TIMEOUT).json()

    def start_loop(self, name: str) -> None:
        self._post(self._runner(name), f"/v1/loops/{name}/start")

    def stop_loop(self, name: str) -> None:
        self._post(self._runner(name), f"/v1/loops/{name}/stop")

    def run_etl_pass(self) -> PassResult:
        return pass_from(self._post(self._runner("etl"), "/v1/etl/pass"))

    # -- the demo -------------------------------------------------------------------------

    def demo_status(self) -> tuple[Endpoint, dict[str, Any]] | None:
        """The process serving the demo, and its batches (its status document's
        ``demo``); None when none does."""
        for endpoint in self.endpoints:
            doc = self.endpoints.status(endpoint, "demo")
            if doc is not None and doc.get("demo") is not None:
                return endpoint, doc["demo"]
        return None

    def post(self, endpoint: Endpoint, path: str) -> dict[str, Any]:
        """A control request (``POST path``) to ``endpoint``; its JSON answer."""
        return dict(self._post(endpoint, path))

    # -- what the processes said --------------------------------------------------------

    def drain_log(self) -> list[LogEntry]:
        entries: list[LogEntry] = []
        for endpoint in self.endpoints:
            if endpoint.unreachable_since is not None and endpoint.process:
                continue  # the loops poll says so; retried there
            for kind in ("events", "log"):
                try:
                    page = endpoint.client.get(f"/v1/{kind}", after=endpoint.cursors[kind])
                except ApiError:
                    break
                endpoint.cursors[kind] = int(page["cursor"])
                entries.extend(_entry(e) for e in page["entries"])
        return sorted(entries, key=lambda e: e.at)

    def close(self) -> None:
        if self.hosted is not None:
            self.hosted.close()
        self.endpoints.close()


def _view(loop: dict[str, Any]) -> LoopView:
    commit = loop.get("last_commit") or {}
    error = loop.get("last_error")
    return LoopView(
        name=loop["name"],
        state=loop["state"],
        version=commit.get("version"),
        committed_at=commit.get("at"),
        records=commit.get("records"),
        rate=loop.get("rate"),
        error=error.splitlines()[0] if error else None,
        host=loop.get("host"),
        pid=loop.get("pid"),
    )


def _entry(data: dict[str, Any]) -> LogEntry:
    level = str(data.get("level", "info")).upper()
    source = data.get("loop") or data.get("logger", "engine").removeprefix("engine.")
    at = data.get("at")
    if not isinstance(at, int | float):
        at = datetime.fromisoformat(data["time"]).timestamp()
    message = str(data.get("message", ""))
    return LogEntry(float(at), level, str(source), message.splitlines()[0] if message else "")


class ApiDemo:
    """The demo's batches, through the API of the process that serves the demo
    (``POST /v1/demo/next-batch``, and its status document's ``demo``)."""

    def __init__(self, backend: ApiBackend) -> None:
        self._backend = backend

    def next_batch(self) -> str:
        found = self._backend.demo_status()
        if found is None:
            raise RuntimeError("not a demo: there are no batches to publish")
        return str(self._backend.post(found[0], "/v1/demo/next-batch")["message"])

    def batches_left(self) -> int:
        found = self._backend.demo_status()
        return int(found[1]["batches_left"]) if found else 0

    def batches_total(self) -> int:
        found = self._backend.demo_status()
        return int(found[1]["batches_total"]) if found else 0
