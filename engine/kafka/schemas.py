"""Schemas in a Confluent-compatible Schema Registry, as zync uses them.

:class:`RegistrySchemas` is the schema lookup every decoder takes
(:data:`engine.kafka.formats.SchemaLookup`) and the one place that registers schemas:
unknown ids become :class:`~engine.kafka.formats.SchemaNotFound` (a dead letter, not a
crash), an unreachable registry becomes :class:`~engine.kafka.clients.RegistryUnavailable`
(a one-line error).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from engine.errors import ZyncError
from engine.kafka.clients import RegistryUnavailable, registry_client, registry_where
from engine.kafka.formats import SchemaNotFound
from engine.settings.registry import RegistryProfile

_NOT_FOUND = {40401, 40402, 40403}


class SchemaRejected(ZyncError):
    """The registry refused a schema (incompatible with the subject's history, or invalid)."""


def subject_for(topic: str, part: str) -> str:
    """The TopicNameStrategy subject: ``<topic>-key`` or ``<topic>-value``."""
    if part not in ("key", "value"):
        raise ValueError(f"part must be 'key' or 'value', not {part!r}")
    return f"{topic}-{part}"


class RegistrySchemas:
    """Looks up schemas by id (cached: ids are immutable) and registers new ones."""

    def __init__(self, profile: RegistryProfile, *, timeout: float = 10.0) -> None:
        self.profile = profile
        self._client = registry_client(profile, timeout=timeout)
        self._by_id: dict[int, str] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RegistrySchemas({self.profile.url!r})"

    def __call__(self, schema_id: int) -> str:
        return self.lookup(schema_id)

    def lookup(self, schema_id: int) -> str:
        """The schema text with this id; :class:`SchemaNotFound` if the registry has none."""
        with self._lock:
            cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        schema = self._call(lambda: self._client.get_schema(schema_id), f"schema id {schema_id}")
        with self._lock:
            self._by_id[schema_id] = schema.schema_str
        return schema.schema_str

    def register(self, subject: str, schema: str | dict[str, Any]) -> int:
        """Register an Avro schema under ``subject`` (same schema → same id)."""
        from confluent_kafka.schema_registry import Schema

        text = schema if isinstance(schema, str) else json.dumps(schema)
        schema_id = self._call(
            lambda: self._client.register_schema(subject, Schema(text, "AVRO")), subject
        )
        with self._lock:
            self._by_id[schema_id] = text
        return int(schema_id)

    def subjects(self) -> list[str]:
        return list(self._call(self._client.get_subjects, "subjects"))

    def latest(self, subject: str) -> Any:
        """The latest registered version of ``subject`` (``RegisteredSchema``)."""
        return self._call(lambda: self._client.get_latest_version(subject), subject)

    def _call(self, fn: Any, what: str) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return fn()
        except SchemaRegistryError as exc:
            if exc.error_code in _NOT_FOUND or exc.http_status_code == 404:
                raise SchemaNotFound(f"{what}: {exc.error_message}") from None
            if exc.http_status_code in (409, 422):
                raise SchemaRejected(
                    f"{registry_where(self.profile)} refused the schema for {what}: "
                    f"{exc.error_message}"
                ) from None
            raise RegistryUnavailable(
                f"{registry_where(self.profile)} answered {exc.http_status_code} for {what}: "
                f"{exc.error_message}"
            ) from None
        except (OSError, ConnectionError) as exc:
            raise RegistryUnavailable(
                f"cannot reach {registry_where(self.profile)}: {exc}. "
                "Is it running? (`zync dev status`)"
            ) from None
        except Exception as exc:  # httpx transport errors are not OSErrors
            if type(exc).__module__.startswith(("httpx", "httpcore")):
                raise RegistryUnavailable(
                    f"cannot reach {registry_where(self.profile)}: {exc}. "
                    "Is it running? (`zync dev status`)"
                ) from None
            raise
