"""The zync processes a console speaks to over their API (zync_tui/console/remote.py):
for each, its client, which loops it runs, whether it answers — and since when it does
not —, and whether the console may control it.

A process reached over its Unix socket, or over TCP with a token, may be controlled; one
reached over TCP without a token is watched only, and says why. A status request that
gets no answer marks its process unreachable (an answer with an error is an error of
ours, and raised); the next answer marks it reachable again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.api import ApiClient, ApiError, is_socket_target

#: Seconds a status request may take before its process counts as unreachable.
REQUEST_TIMEOUT = 3.0
#: Seconds a snapshot (topics, ETL, dead letters) may take: Kafka probes, Spark listings.
SNAPSHOT_TIMEOUT = 60.0


@dataclass
class Endpoint:
    """One process the console talks to, and what it last knew of it."""

    client: ApiClient
    control: bool
    why_not: str | None = None
    loops: list[str] = field(default_factory=list)
    process: dict[str, Any] = field(default_factory=dict)
    unreachable_since: float | None = None
    error: str | None = None
    cursors: dict[str, int] = field(default_factory=lambda: {"events": 0, "log": 0})

    @property
    def where(self) -> str:
        return self.client.where


class Endpoints:
    """The processes of one console, in the order given (see the module's docstring)."""

    def __init__(self, targets: list[str], *, token: str | None, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._all = [self._endpoint(t, token) for t in targets]

    def __iter__(self) -> Iterator[Endpoint]:
        return iter(self._all)

    def __getitem__(self, index: int) -> Endpoint:
        return self._all[index]

    @staticmethod
    def _endpoint(target: str, token: str | None) -> Endpoint:
        if is_socket_target(target):
            return Endpoint(ApiClient(target, timeout=REQUEST_TIMEOUT), control=True)
        if token:
            return Endpoint(ApiClient(target, token=token, timeout=REQUEST_TIMEOUT), control=True)
        return Endpoint(
            ApiClient(target, timeout=REQUEST_TIMEOUT),
            control=False,
            why_not=f"{target} is reached over TCP without a token ($ZYNC_CONTROL_TOKEN)",
        )

    def why_watched(self) -> str | None:
        """Why none of the processes may be controlled (None: some may)."""
        refused = [e.why_not for e in self._all if not e.control]
        return refused[0] if refused and len(refused) == len(self._all) else None

    def status(
        self, endpoint: Endpoint, *sections: str, timeout: float | None = None
    ) -> dict[str, Any] | None:
        """A status document, or None (the endpoint is then marked unreachable)."""
        try:
            doc = endpoint.client.status(*sections, timeout=timeout)
        except ApiError as exc:
            if exc.status is not None:  # it answers: an error of ours, said as such
                raise
            with self._lock:
                if endpoint.unreachable_since is None:
                    endpoint.unreachable_since = self.clock()
                endpoint.error = str(exc)
            return None
        with self._lock:
            endpoint.unreachable_since = None
            endpoint.error = None
            if "process" in doc:
                endpoint.process = doc["process"]
                endpoint.loops = list(doc["process"]["loops"])
            if "loops" in doc:
                endpoint.loops = [loop["name"] for loop in doc["loops"]]
        return doc

    def first(self, section: str, prefer: str | None = None) -> Any:
        """A section from the first endpoint that has it (those running ``prefer``
        first); raises when none answers."""
        ordered = sorted(self._all, key=lambda e: prefer not in e.loops)
        errors = []
        for endpoint in ordered:
            doc = self.status(endpoint, section, timeout=SNAPSHOT_TIMEOUT)
            if doc is None:
                errors.append(f"{endpoint.where} unreachable: {endpoint.error}")
            elif doc.get(section) is not None:
                return doc[section]
        raise ApiError("; ".join(errors) or f"no process serves its {section}")

    def running(self, loop: str) -> Endpoint | None:
        """The process that runs ``loop`` (None: none does)."""
        return next((e for e in self._all if loop in e.loops), None)

    def close(self) -> None:
        for endpoint in self._all:
            endpoint.client.close()
