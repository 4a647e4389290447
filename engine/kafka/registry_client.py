"""The Schema Registry client: schemas in a Confluent-compatible registry, as zync uses them.

:class:`RegistrySchemas` is the schema lookup every decoder takes
(:data:`engine.kafka.codecs.formats.SchemaLookup`) and the one place that registers
schemas: unknown ids become :class:`~engine.kafka.codecs.formats.SchemaNotFound` (a dead
letter, not a crash), a registry that cannot be reached or answers with a server error
becomes :class:`RegistryUnreachable` (worth waiting for: from-kafka waits), any other
refusal :class:`RegistryUnavailable` (a one-line error). confluent-kafka's
``SchemaRegistryClient`` is imported only when a client is built (its import is heavy).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from engine.errors import ZyncError
from engine.kafka.codecs.formats import SchemaNotFound
from engine.settings.registry import RegistryProfile

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

T = TypeVar("T")

_NOT_FOUND = {40401, 40402, 40403}
#: Lookups :meth:`RegistrySchemas.prefetch` makes at once.
_PREFETCHERS = 8


class RegistryUnavailable(ZyncError):
    """The Schema Registry could not be reached or answered with an error."""


class RegistryUnreachable(RegistryUnavailable):
    """The registry did not answer (nothing listening, a timeout) or answered with a
    server error (5xx): it may answer later. ``where`` names the registry, ``reason``
    says what happened, in a few words."""

    def __init__(self, message: str, where: str, reason: str) -> None:
        super().__init__(message)
        self.where = where
        self.reason = reason


class SchemaRejected(ZyncError):
    """The registry refused a schema (incompatible with the subject's history, or invalid)."""


def registry_where(profile: RegistryProfile) -> str:
    """Where the registry is, for messages (no secrets)."""
    return f"Schema Registry at {profile.url}"


def _client(profile: RegistryProfile, timeout: float) -> SchemaRegistryClient:
    """confluent-kafka's ``SchemaRegistryClient`` for ``profile``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient  # heavy: on use

    config: dict[str, Any] = dict(profile.client_config())
    config["timeout"] = timeout
    config["max.retries"] = 1
    if all(url.strip().startswith("http://") for url in config["url"].split(",")):
        # plain HTTP: the client would still load the CA bundle into a TLS context it
        # never uses (30 ms per client, and to-kafka makes one per output)
        config["ssl.ca.location"] = False
    return SchemaRegistryClient(config)


def subject_for(topic: str, part: str) -> str:
    """The TopicNameStrategy subject: ``<topic>-key`` or ``<topic>-value``."""
    if part not in ("key", "value"):
        raise ValueError(f"part must be 'key' or 'value', not {part!r}")
    return f"{topic}-{part}"


class RegistrySchemas:
    """Looks up schemas by id (cached: ids are immutable) and registers new ones."""

    def __init__(self, profile: RegistryProfile, *, timeout: float = 10.0) -> None:
        self.profile = profile
        self._client = _client(profile, timeout)
        self._timeout = timeout
        self._by_id: dict[int, str] = {}
        self._lock = threading.Lock()
        self._warming: threading.Thread | None = None
        self._warmed = threading.Event()  # the warm-up's lookups are done

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
        text = str(schema.schema_str)
        with self._lock:
            self._by_id[schema_id] = text
        return text

    def prefetch(self, schema_ids: Iterable[int]) -> None:
        """Look up the ids not known yet at once, over several connections: a batch of
        hundreds of topics meets hundreds of schemas, and one request after the other
        made from-kafka's first batch wait for the registry. Errors are left to
        :meth:`lookup` (an id the registry does not know becomes a dead letter there).
        Waits for a :meth:`warm` under way first, which may have found them."""
        if self._warming is not None:
            self._warmed.wait(self._timeout)
        with self._lock:
            todo = sorted(set(schema_ids) - self._by_id.keys())
        if len(todo) >= 2:
            _each(self.lookup, todo)

    def warm(self, subjects: Iterable[str], then: Callable[[list[str]], None] | None = None) -> None:
        """Look up, in the background, the latest schema of each of these subjects that
        the registry has. A loop starting does not know the ids its first batch will
        meet, but they are most often its topics' latest schemas; looked up now, they
        overlap the consumer's start instead of holding a first batch of hundreds of
        topics. One request (:meth:`latest_schemas`) where the registry answers Confluent's
        ``GET /schemas``, else one per subject, several at once; ``then`` gets the texts
        found, in the same background thread. Best effort, once: what fails is left to
        :meth:`lookup`."""
        wanted = list(dict.fromkeys(subjects))
        if not wanted or self._warming is not None:
            return

        found_texts: list[str] = []

        def keep(schema_id: int, text: str) -> None:
            with self._lock:
                self._by_id.setdefault(schema_id, text)
            found_texts.append(text)

        def latest(subject: str) -> None:
            registered = self.latest(subject)
            keep(int(registered.schema_id), str(registered.schema.schema_str))

        def run() -> None:
            try:
                found = self.latest_schemas(os.path.commonprefix(wanted))
                if found is not None:
                    for subject, (schema_id, text) in found.items():
                        if subject in wanted_set:
                            keep(schema_id, text)
                else:
                    known = set(self.subjects())
                    _each(latest, [s for s in wanted if s in known])
            except Exception:  # noqa: BLE001 - best effort: lookup() reports it
                pass
            finally:
                self._warmed.set()
            if then is not None and found_texts:
                then(found_texts)

        wanted_set = set(wanted)
        self._warming = threading.Thread(target=run, name="zync-registry-warm", daemon=True)
        self._warming.start()

    def latest_schemas(self, prefix: str) -> dict[str, tuple[int, str]] | None:
        """The latest Avro schema (id, text) of every subject under ``prefix``, in one
        request: Confluent's ``GET /schemas?subjectPrefix=…&latestOnly=true`` (Schema
        Registry 7.x and zync's own). None when the registry does not answer it (an
        older or another registry), so the caller asks subject by subject."""
        rest = getattr(self._client, "_rest_client", None)  # confluent-kafka has no call for it
        if rest is None:
            return None
        query = {"subjectPrefix": prefix, "latestOnly": "true"}
        try:
            rows = self._call(lambda: rest.get("schemas", query), "schemas")
        except (SchemaNotFound, RegistryUnavailable):
            return None
        if not isinstance(rows, list):
            return None
        return {
            str(row["subject"]): (int(row["id"]), str(row["schema"]))
            for row in rows
            if isinstance(row, dict) and row.get("schemaType", "AVRO") == "AVRO"
            and {"subject", "id", "schema"} <= row.keys()
        }

    def register(self, subject: str, schema: str | dict[str, Any]) -> int:
        """Register an Avro schema under ``subject`` (same schema → same id)."""
        from confluent_kafka.schema_registry import Schema  # deferred: heavy, on use

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
        from confluent_kafka.schema_registry.error import SchemaRegistryError  # deferred: heavy

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
            message = (
                f"{registry_where(self.profile)} answered {exc.http_status_code} for {what}: "
                f"{exc.error_message}"
            )
            if isinstance(exc.http_status_code, int) and exc.http_status_code >= 500:
                reason = f"it answered {exc.http_status_code}: {exc.error_message}"
                where = registry_where(self.profile)
                raise RegistryUnreachable(message, where, reason) from None
            raise RegistryUnavailable(message) from None
        except (OSError, ConnectionError) as exc:
            raise self._unreachable(exc) from None
        except Exception as exc:  # httpx transport errors are not OSErrors
            if type(exc).__module__.startswith(("httpx", "httpcore")):
                raise self._unreachable(exc) from None
            raise

    def _unreachable(self, exc: Exception) -> RegistryUnreachable:
        reason = str(exc) or type(exc).__name__
        where = registry_where(self.profile)
        return RegistryUnreachable(
            f"cannot reach {where}: {reason}. Is it running? (`zync dev status`)", where, reason
        )


def _each(look: Callable[[T], object], items: Sequence[T]) -> None:
    """``look`` at each of ``items``, several at once; stops asking once the registry is
    unreachable (the decoders then wait for it); other failures are left to the caller's
    later lookups, which report them."""
    unreachable = threading.Event()

    def one(item: T) -> None:
        if unreachable.is_set():
            return
        try:
            look(item)
        except RegistryUnreachable:
            unreachable.set()
        except Exception:  # noqa: BLE001 - a later lookup() reports it when it matters
            pass

    with ThreadPoolExecutor(max(1, min(_PREFETCHERS, len(items)))) as pool:
        list(pool.map(one, items))
