"""The registry's HTTP API: the Confluent Schema Registry REST subset zync and its clients use.

``create_app(db_path)`` is the one factory: the ``python -m engine.registry`` service, the
development stack and the tests all serve the app it builds.

Responses use Confluent's content type and shapes; errors are Confluent's JSON
``{"error_code": N, "message": "..."}`` with the matching HTTP status. Requests may be sent
as ``application/vnd.schemaregistry.v1+json`` or ``application/json`` (the body is read as
JSON whatever its declared type). Query flags accept true/false in any case, as the
confluent-kafka client sends Python's ``True``/``False``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine import __version__
from engine.registry.errors import (
    RegistryError,
    invalid_schema,
    schema_not_found,
    subject_config_not_found,
)
from engine.registry.schemas import (
    SCHEMA_TYPES,
    SubjectVersion,
    normalize_schema_type,
    parse_references,
    parse_version,
)
from engine.registry.store import RegistryStore

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

log = logging.getLogger(__name__)


class RegistryJSONResponse(JSONResponse):
    """JSON with the Schema Registry's content type."""

    media_type = CONTENT_TYPE


def _error(status: int, error_code: int, message: str) -> RegistryJSONResponse:
    return RegistryJSONResponse({"error_code": error_code, "message": message}, status_code=status)


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise RegistryError(400, 400, f"Request body is not valid JSON: {exc}") from None


JsonBody = Annotated[Any, Depends(_json_body)]


def _flag(request: Request, *names: str) -> bool:
    for name in names:
        value = request.query_params.get(name)
        if value is not None:
            return value.strip().lower() in ("true", "1", "yes")
    return False


def _page(items: list[Any], request: Request) -> list[Any]:
    try:
        offset = max(int(request.query_params.get("offset", 0)), 0)
        limit = int(request.query_params.get("limit", -1))
    except ValueError:
        return items
    items = items[offset:]
    return items if limit < 0 else items[:limit]


def _schema_fields(body: Any) -> tuple[str, str, Any]:
    if not isinstance(body, dict):
        raise invalid_schema("Invalid schema: the request body must be an object with a 'schema'")
    schema = body.get("schema")
    if not isinstance(schema, str) or not schema.strip():
        raise invalid_schema("Invalid schema: empty schema")
    return (
        schema,
        normalize_schema_type(body.get("schemaType")),
        parse_references(body.get("references")),
    )


def _schema_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise schema_not_found(f"Schema {text} not found") from None


def _version_body(found: SubjectVersion) -> dict[str, Any]:
    out: dict[str, Any] = {
        "subject": found.subject,
        "version": found.version,
        "id": found.record.id,
        "schema": found.record.schema,
    }
    if found.record.schema_type != "AVRO":  # Confluent omits schemaType for AVRO
        out["schemaType"] = found.record.schema_type
    if found.record.references:
        out["references"] = [r.to_dict() for r in found.record.references]
    return out


def create_app(db_path: str | Path) -> FastAPI:
    """Build the Schema Registry app over the SQLite database at ``db_path`` (created if new)."""
    store = RegistryStore(db_path)
    app = FastAPI(
        title="zync schema registry",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        default_response_class=RegistryJSONResponse,
    )
    app.state.store = store

    @app.exception_handler(RegistryError)
    async def _registry_error(request: Request, exc: RegistryError) -> Response:
        if exc.status >= 500:
            log.error("%s %s: %s", request.method, request.url.path, exc.message)
        return _error(exc.status, exc.error_code, exc.message)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return _error(exc.status_code, exc.status_code, f"HTTP {exc.status_code} {exc.detail}")

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        return _error(422, 422, f"Unprocessable request: {exc.errors()}")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("%s %s failed", request.method, request.url.path)
        return _error(500, 500, f"Internal Server Error: {type(exc).__name__}: {exc}")

    # -- root, types, mode ------------------------------------------------------

    @app.get("/")
    def root() -> dict[str, Any]:
        return {}

    @app.get("/schemas/types")
    def schema_types() -> list[str]:
        return list(SCHEMA_TYPES)

    @app.get("/mode")
    def mode() -> dict[str, str]:
        return {"mode": "READWRITE"}

    # -- subjects ---------------------------------------------------------------

    @app.get("/subjects")
    def list_subjects(request: Request) -> list[str]:
        subjects = store.lookups.subjects(
            prefix=request.query_params.get("subjectPrefix", ""),
            deleted=_flag(request, "deleted"),
            deleted_only=_flag(request, "deleted_only", "deletedOnly"),
        )
        return _page(subjects, request)

    @app.get("/subjects/{subject}/versions")
    def list_versions(subject: str, request: Request) -> list[int]:
        versions = store.lookups.versions(
            subject,
            deleted=_flag(request, "deleted"),
            deleted_only=_flag(request, "deleted_only", "deletedOnly"),
        )
        return _page(versions, request)

    @app.post("/subjects/{subject}/versions")
    def register(subject: str, body: JsonBody) -> dict[str, int]:
        schema, schema_type, references = _schema_fields(body)
        return {"id": store.register(subject, schema, schema_type, references)}

    @app.get("/subjects/{subject}/versions/{version}")
    def get_version(subject: str, version: str, request: Request) -> dict[str, Any]:
        number = parse_version(version)
        return _version_body(
            store.lookups.get_version(subject, number, deleted=_flag(request, "deleted"))
        )

    @app.get("/subjects/{subject}/versions/{version}/schema")
    def get_version_schema(subject: str, version: str, request: Request) -> Response:
        number = parse_version(version)
        found = store.lookups.get_version(subject, number, deleted=_flag(request, "deleted"))
        return Response(content=found.record.schema, media_type=CONTENT_TYPE)

    @app.get("/subjects/{subject}/versions/{version}/referencedby")
    def referenced_by(subject: str, version: str, request: Request) -> list[int]:
        return _page(store.lookups.referenced_by(subject, parse_version(version)), request)

    @app.delete("/subjects/{subject}/versions/{version}")
    def delete_version(subject: str, version: str, request: Request) -> int:
        number = parse_version(version)
        return store.delete_version(subject, number, permanent=_flag(request, "permanent"))

    @app.post("/subjects/{subject}")
    def lookup(subject: str, request: Request, body: JsonBody) -> dict[str, Any]:
        schema, schema_type, references = _schema_fields(body)
        found = store.lookups.lookup(
            subject, schema, schema_type, references, deleted=_flag(request, "deleted")
        )
        return _version_body(found)

    @app.delete("/subjects/{subject}")
    def delete_subject(subject: str, request: Request) -> list[int]:
        return store.delete_subject(subject, permanent=_flag(request, "permanent"))

    # -- schemas ------------------------------------------------------------------

    @app.get("/schemas")
    def list_schemas(request: Request) -> list[dict[str, Any]]:
        # Confluent's "GET /schemas": every version of the subjects under a prefix, or
        # each one's latest (``latestOnly``), in one answer (a loop starting over
        # hundreds of topics reads their schemas in one request)
        found = store.lookups.versions_under(
            request.query_params.get("subjectPrefix", ""),
            deleted=_flag(request, "deleted"),
            latest_only=_flag(request, "latestOnly", "latest_only"),
        )
        return _page([_version_body(v) for v in found], request)

    # -- schemas by id ------------------------------------------------------------

    @app.get("/schemas/ids/{schema_id}")
    def get_schema(schema_id: str) -> dict[str, Any]:
        record = store.lookups.get_schema(_schema_id(schema_id))
        out: dict[str, Any] = {"schema": record.schema}
        if record.schema_type != "AVRO":
            out["schemaType"] = record.schema_type
        if record.references:
            out["references"] = [r.to_dict() for r in record.references]
        return out

    @app.get("/schemas/ids/{schema_id}/schema")
    def get_raw_schema(schema_id: str) -> Response:
        record = store.lookups.get_schema(_schema_id(schema_id))
        return Response(content=record.schema, media_type=CONTENT_TYPE)

    @app.get("/schemas/ids/{schema_id}/versions")
    def get_schema_versions(schema_id: str, request: Request) -> list[dict[str, Any]]:
        pairs = store.lookups.schema_versions(
            _schema_id(schema_id), deleted=_flag(request, "deleted")
        )
        wanted = request.query_params.get("subject")
        rows = [{"subject": s, "version": v} for s, v in pairs if wanted in (None, s)]
        return _page(rows, request)

    @app.get("/schemas/ids/{schema_id}/subjects")
    def get_schema_subjects(schema_id: str, request: Request) -> list[str]:
        pairs = store.lookups.schema_versions(
            _schema_id(schema_id), deleted=_flag(request, "deleted")
        )
        wanted = request.query_params.get("subject")
        subjects = sorted({s for s, _ in pairs if wanted in (None, s)})
        return _page(subjects, request)

    # -- config -------------------------------------------------------------------

    def _level_from(body: Any) -> Any:
        return body.get("compatibility") if isinstance(body, dict) else None

    @app.get("/config")
    def get_global_config() -> dict[str, str]:
        return {"compatibilityLevel": store.levels.compatibility() or "BACKWARD"}

    @app.put("/config")
    def put_global_config(body: JsonBody) -> dict[str, str]:
        return {"compatibility": store.levels.set_compatibility(_level_from(body))}

    @app.delete("/config")
    def delete_global_config() -> dict[str, str]:
        return {"compatibilityLevel": store.levels.delete_compatibility()}

    @app.get("/config/{subject}")
    def get_subject_config(subject: str, request: Request) -> dict[str, str]:
        level = store.levels.compatibility(subject)
        if level is None:
            if not _flag(request, "defaultToGlobal"):
                raise subject_config_not_found(subject)
            level = store.levels.compatibility() or "BACKWARD"
        return {"compatibilityLevel": level}

    @app.put("/config/{subject}")
    def put_subject_config(subject: str, body: JsonBody) -> dict[str, str]:
        return {"compatibility": store.levels.set_compatibility(_level_from(body), subject)}

    @app.delete("/config/{subject}")
    def delete_subject_config(subject: str) -> dict[str, str]:
        return {"compatibilityLevel": store.levels.delete_compatibility(subject)}

    # -- compatibility --------------------------------------------------------------

    def _compatibility(
        body: Any, subject: str, version: int | None | str, request: Request
    ) -> dict[str, Any]:
        schema, schema_type, references = _schema_fields(body)
        problems = store.test_compatibility(subject, schema, schema_type, references, version)
        out: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            out["messages"] = problems
        return out

    @app.post("/compatibility/subjects/{subject}/versions/{version}")
    def test_compatibility(
        subject: str, version: str, request: Request, body: JsonBody
    ) -> dict[str, Any]:
        return _compatibility(body, subject, parse_version(version), request)

    @app.post("/compatibility/subjects/{subject}/versions")
    def test_compatibility_all(subject: str, request: Request, body: JsonBody) -> dict[str, Any]:
        return _compatibility(body, subject, "all", request)

    return app
