"""The API's routes (FastAPI), for one :class:`~engine.serve.served_process.ServedProcess`.

``GET /healthz`` ``/readyz`` ``/metrics`` ``/v1/status`` ``/v1/events`` ``/v1/log``;
``POST /v1/loops/{loop}/start|stop``, ``/v1/etl/pass`` and, in the demo,
``/v1/demo/next-batch``. Every error is one JSON shape, Kafka Connect's:
``{"error_code": 404, "message": "unknown loop 'x': this process runs etl"}``.

Requests pass :class:`Gate` first (who may: engine/serve/auth.py; bodies over
:data:`MAX_BODY` bytes: 413). Blocking work (snapshots, a pass, stopping a loop) runs in
worker threads, at most a few at a time per kind, so the event loop always answers and
the probes never queue behind a storm of scrapes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.errors import one_line
from engine.serve.auth import Guard
from engine.serve.health import liveness, readiness
from engine.serve.journal import Entry
from engine.serve.metrics import Exposition
from engine.serve.protocol import PEER
from engine.serve.served_process import ControlError, ServedProcess
from engine.serve.status_document import document, wanted_sections

#: The largest request body accepted, in bytes.
MAX_BODY = 64 * 1024
#: Entries one /v1/events or /v1/log answer holds at most.
MAX_ENTRIES = 1000

T = TypeVar("T")


def error(status: int, message: str, **more: Any) -> JSONResponse:
    return JSONResponse({"error_code": status, "message": message, **more}, status_code=status)


class Gate:
    """ASGI middleware: refuses what the guard refuses, and bodies that are too large."""

    def __init__(self, app: Any, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        peer = scope.get(PEER) or {"unix": False, "uid": None}
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self.guard.check(
            unix=peer["unix"],
            peer_uid=peer["uid"],
            control=scope["method"] not in ("GET", "HEAD"),
            authorization=headers.get("authorization"),
        )
        response: Response | None = None
        if refusal is not None:
            response = error(refusal.status, refusal.message)
            if refusal.status == 401:
                response.headers["WWW-Authenticate"] = 'Bearer realm="zync"'
        elif _too_long(headers.get("content-length")):
            response = error(413, f"request body over {MAX_BODY} bytes")
        if response is not None:
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _too_long(length: str | None) -> bool:
    try:
        return length is not None and int(length) > MAX_BODY
    except ValueError:
        return True


async def _body(request: Request, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The request's JSON object (empty body: ``{}``); ControlError 400/413 when not."""
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY:
            raise ControlError(413, f"request body over {MAX_BODY} bytes")
    if not data.strip():
        return {}
    try:
        parsed = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ControlError(400, f"the body is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ControlError(400, "the body must be a JSON object")
    unknown = sorted(set(parsed) - set(allowed))
    if unknown:
        known = ", ".join(allowed) or "none"
        raise ControlError(400, f"unknown field {unknown[0]!r} (fields: {known})")
    return parsed


def tagged(doc: dict[str, Any]) -> tuple[bytes, str]:
    """The document as JSON and its entity tag: a digest of what it says, the times its
    snapshots were taken aside — a reader that has it already gets a 304 and parses
    nothing (the console polls every second; most seconds nothing changed)."""
    body = json.dumps(doc, separators=(",", ":"), default=str).encode()
    same = {
        k: {kk: vv for kk, vv in v.items() if kk != "taken_at"} if isinstance(v, dict) else v
        for k, v in doc.items()
    }
    digest = hashlib.blake2b(json.dumps(same, sort_keys=True, default=str).encode(), digest_size=12)
    return body, f'"{digest.hexdigest()}"'


def make_app(process: ServedProcess, guard: Guard, exposition: Exposition) -> FastAPI:
    app = FastAPI(title="zync", docs_url=None, redoc_url=None, openapi_url=None)
    probes = anyio.CapacityLimiter(2)
    reads = anyio.CapacityLimiter(4)
    controls = anyio.CapacityLimiter(2)

    async def run(limiter: anyio.CapacityLimiter, work: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(work, limiter=limiter)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> Response:
        message = "no such endpoint" if exc.status_code == 404 else str(exc.detail)
        return error(exc.status_code, message)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error(400, f"{where}: {first.get('msg', 'invalid')}")

    @app.exception_handler(ControlError)
    async def refused(_request: Request, exc: ControlError) -> Response:
        return error(exc.status, exc.message)

    @app.get("/healthz")
    async def healthz() -> Response:
        verdict = liveness(await run(probes, process.facts), process.wedged_after)
        if verdict.ok:
            return JSONResponse({"status": "live"})
        return error(503, "; ".join(verdict.reasons), reasons=list(verdict.reasons))

    @app.get("/readyz")
    async def readyz() -> Response:
        verdict = readiness(await run(probes, process.facts))
        if verdict.ok:
            return JSONResponse({"status": "ready"})
        return error(503, "; ".join(verdict.reasons), reasons=list(verdict.reasons))

    @app.get("/metrics")
    async def metrics() -> Response:
        # rendered here, in the event loop: it reads snapshots (a few ms), kept 0.5 s; a
        # hand-over to a worker thread and back would wait twice for the interpreter lock
        # the busy loops hold
        return Response(exposition.render(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/status")
    async def status(request: Request, sections: str | None = None) -> Response:
        try:
            wanted = wanted_sections(sections)
        except ValueError as exc:
            return error(400, str(exc))
        body, tag = await run(reads, lambda: tagged(document(process, wanted)))
        if request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers={"ETag": tag})
        return Response(body, media_type="application/json", headers={"ETag": tag})

    def entries(found: tuple[list[Entry], int, int]) -> dict[str, Any]:
        items, cursor, dropped = found
        return {
            "cursor": cursor,
            "dropped": dropped,
            "entries": [e.to_json(process.pipeline) for e in items],
        }

    @app.get("/v1/events")
    async def events(after: int = 0, limit: int = MAX_ENTRIES) -> Response:
        return JSONResponse(entries(process.events.since(after, min(max(limit, 1), MAX_ENTRIES))))

    @app.get("/v1/log")
    async def log_lines(after: int = 0, limit: int = MAX_ENTRIES) -> Response:
        return JSONResponse(entries(process.log.since(after, min(max(limit, 1), MAX_ENTRIES))))

    @app.post("/v1/loops/{loop}/{action}")
    async def control(loop: str, action: str, request: Request) -> Response:
        if action not in ("start", "stop"):
            return error(404, f"no such action {action!r}: start or stop")
        body = await _body(request, ("timeout",) if action == "stop" else ())
        timeout = body.get("timeout")
        if timeout is not None and (not isinstance(timeout, int | float) or timeout < 0):
            return error(400, "timeout: a number of seconds, 0 or more")
        process.service(loop)  # 404 before any work
        state = await run(controls, lambda: process.control(loop, action, timeout))
        return JSONResponse({"loop": loop, "action": action, "state": state})

    @app.post("/v1/etl/pass")
    async def etl_pass(request: Request) -> Response:
        await _body(request, ())
        try:
            result = await run(controls, process.run_pass)
        except ControlError:
            raise
        except Exception as exc:  # noqa: BLE001 - the pass failed: said in words
            return error(500, f"the pass failed: {one_line(exc, typed=True)}")
        return JSONResponse(result.to_json())

    @app.post("/v1/demo/next-batch")
    async def next_batch(request: Request) -> Response:
        await _body(request, ())
        try:
            text = await run(controls, process.next_batch)
        except ControlError:
            raise
        except Exception as exc:  # noqa: BLE001 - said in words
            return error(500, f"cannot publish the batch: {one_line(exc, typed=True)}")
        return JSONResponse({"message": text})

    app.add_middleware(Gate, guard=guard)
    return app
