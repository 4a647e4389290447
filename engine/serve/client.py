"""A client of a process's API, over its Unix socket or TCP (httpx): what the console and
scripts use.

``target`` is a socket path (``/home/me/.zync/run/invoices.run.sock``, or
``unix:PATH``) or a URL (``http://host:9464``). A socket another user owns is refused
before connecting: its mode (0600) would refuse us anyway, and root would be let in to a
pipeline that is not its own. Every failure is an :class:`ApiError` with one line: the
API's own message when it answered, what went wrong with the connection otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from engine.errors import ZyncError

if TYPE_CHECKING:
    import httpx

#: Seconds a request may take before the process counts as not answering.
TIMEOUT = 10.0


class ApiError(ZyncError):
    """A request failed: ``status`` is the API's (None: it could not be reached)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def is_socket_target(target: str) -> bool:
    return target.startswith("unix:") or not target.startswith(("http://", "https://"))


class ApiClient:
    """Requests to one process's API (thread-safe: httpx's client is)."""

    def __init__(self, target: str, *, token: str | None = None, timeout: float = TIMEOUT) -> None:
        self.target = target
        self.token = token
        # deferred: importing httpx brings its command line's terminal libraries (rich)
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if is_socket_target(target):
            path = Path(target.removeprefix("unix:")).expanduser()
            self.socket_path: Path | None = path
            self.where = f"unix:{path}"
            transport = httpx.HTTPTransport(uds=os.fspath(path), retries=0)
            base = "http://zync"
        else:
            self.socket_path = None
            self.where = target.rstrip("/")
            transport = httpx.HTTPTransport(retries=0)
            base = self.where
        self._client = httpx.Client(
            base_url=base, transport=transport, headers=headers, timeout=timeout
        )
        #: the last document per set of sections, with its entity tag (a 304 reuses it)
        self._known: dict[tuple[str, ...], tuple[str, dict[str, Any]]] = {}

    def check_socket(self) -> None:
        """Refuse a socket that is missing or that another user owns."""
        if self.socket_path is None:
            return
        try:
            info = self.socket_path.stat()
        except OSError as exc:
            raise ApiError(f"{self.where}: {exc.strerror or exc}") from None
        if info.st_uid != os.getuid():
            raise ApiError(
                f"{self.where} belongs to uid {info.st_uid}, not to you: attach over TCP "
                "with that process's token instead"
            )

    def request(self, method: str, path: str, *, _raise: bool = True, **kwargs: Any) -> httpx.Response:
        """The response; an :class:`ApiError` for a 4xx/5xx unless ``_raise`` is False."""
        import httpx  # loaded by __init__ already

        self.check_socket()
        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(f"{self.where}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        if response.status_code >= 400 and _raise:
            try:
                message = response.json().get("message") or response.text
            except ValueError:
                message = response.text.strip() or response.reason_phrase
            raise ApiError(f"{message}", response.status_code)
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None).json()

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.request("POST", path, json=body).json()

    def status(self, *sections: str, timeout: float | None = None) -> dict[str, Any]:
        """The status document (``sections``: all when none); one unchanged since the last
        asked for is not sent again (its entity tag), and the one known is returned."""
        params = {"sections": ",".join(sections)} if sections else None
        known = self._known.get(sections)
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        if known is not None:
            extra["headers"] = {"If-None-Match": known[0]}
        response = self.request("GET", "/v1/status", params=params, **extra)
        if response.status_code == 304 and known is not None:
            return known[1]
        # orjson: the console reads these documents in threads beside its screen's, and
        # the ETL's (its pending and expired records) is large: half json's time (230 kB:
        # 0.50 against 1.08 ms)
        doc: dict[str, Any] = orjson.loads(response.content)
        tag = response.headers.get("etag")
        if tag:
            self._known[sections] = (tag, doc)
        return doc

    def close(self) -> None:
        self._client.close()
