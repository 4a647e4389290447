"""zync's Schema Registry as a real process, driven by confluent-kafka's own client."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from engine.registry.launch import (
    find_free_port,
    registry_command,
    start_registry_process,
    stop_process,
    wait_until_ready,
)

pytestmark = pytest.mark.integration

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "com.acme",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
USER_V2 = {  # compatible: the new field has a default
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}],
}
USER_BAD = {  # incompatible under BACKWARD: the new field has no default
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "age", "type": "int"}],
}


def avro(schema: dict) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


class Registry:
    """One registry process on a free port, with its database and log."""

    def __init__(self, workdir: Path, db_path: Path | None = None) -> None:
        self.port = find_free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db_path = db_path or workdir / "registry.db"
        self.log_path = workdir / f"registry-{self.port}.log"
        self.process = start_registry_process(self.port, self.db_path, self.log_path)
        try:
            wait_until_ready(self.url, timeout=15, process=self.process, log_path=self.log_path)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        stop_process(self.process)


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    running = Registry(tmp_path_factory.mktemp("registry"))
    yield running.url
    running.stop()


@pytest.fixture
def client(registry_url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_url})


@pytest.fixture
def subject(request: pytest.FixtureRequest) -> str:
    """A subject name no other test in the module uses."""
    return f"{request.node.name.replace('[', '-').rstrip(']')}-value"


def test_register_and_read_back(
    client: SchemaRegistryClient, registry_url: str, subject: str
) -> None:
    schema_id = client.register_schema(subject, avro(USER_V1))

    latest = client.get_latest_version(subject)
    assert (latest.subject, latest.version, latest.schema_id) == (subject, 1, schema_id)
    assert json.loads(latest.schema.schema_str) == USER_V1
    assert latest.schema.schema_type == "AVRO"

    found = client.lookup_schema(subject, avro(USER_V1))
    assert (found.schema_id, found.version) == (schema_id, 1)

    fresh = SchemaRegistryClient({"url": registry_url})  # no cache
    assert json.loads(fresh.get_schema(schema_id).schema_str) == USER_V1
    assert subject in fresh.get_subjects()
    assert fresh.get_versions(subject) == [1]
    assert fresh.get_version(subject, 1).schema_id == schema_id


def test_same_schema_same_id_across_subjects(
    client: SchemaRegistryClient, registry_url: str, subject: str
) -> None:
    first = client.register_schema(subject, avro(USER_V1))
    other = client.register_schema(f"{subject}-other", avro(USER_V1))
    assert first == other

    # Same schema with other whitespace and key order: same id, and no new version.
    relaid = json.dumps(USER_V1, indent=4, sort_keys=True)
    fresh = SchemaRegistryClient({"url": registry_url})
    assert fresh.register_schema(subject, Schema(relaid, "AVRO")) == first
    assert fresh.get_versions(subject) == [1]
    assert {(v.subject, v.version) for v in fresh.get_schema_versions(first)} >= {
        (subject, 1),
        (f"{subject}-other", 1),
    }


def test_compatible_change_adds_a_version(client: SchemaRegistryClient, subject: str) -> None:
    v1 = client.register_schema(subject, avro(USER_V1))
    v2 = client.register_schema(subject, avro(USER_V2))
    assert v2 != v1
    assert client.get_versions(subject) == [1, 2]
    assert client.get_latest_version(subject).schema_id == v2
    assert client.test_compatibility(subject, avro(USER_V2))
    assert not client.test_compatibility(subject, avro(USER_BAD))


def test_incompatible_change_is_refused_with_409(
    client: SchemaRegistryClient, subject: str
) -> None:
    client.register_schema(subject, avro(USER_V1))
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema(subject, avro(USER_BAD))
    assert caught.value.http_status_code == 409
    assert caught.value.error_code == 409
    assert "'age'" in caught.value.error_message
    assert "no default" in caught.value.error_message
    assert client.get_versions(subject) == [1]


def test_compatibility_levels(
    client: SchemaRegistryClient, registry_url: str, subject: str
) -> None:
    client.register_schema(subject, avro(USER_V1))
    assert client.set_compatibility(subject, "none") == {"compatibility": "NONE"}
    assert client.get_compatibility(subject) == "NONE"
    client.register_schema(subject, avro(USER_BAD))  # NONE: anything goes
    assert client.get_versions(subject) == [1, 2]

    assert client.get_compatibility() == "BACKWARD"
    try:
        assert client.set_compatibility(level="FULL_TRANSITIVE") == {
            "compatibility": "FULL_TRANSITIVE"
        }
        assert client.get_compatibility() == "FULL_TRANSITIVE"
    finally:
        client.set_compatibility(level="BACKWARD")

    with pytest.raises(SchemaRegistryError) as caught:
        client.set_compatibility(subject, "SIDEWAYS")
    assert (caught.value.http_status_code, caught.value.error_code) == (422, 42203)

    with pytest.raises(SchemaRegistryError) as caught:
        client.get_compatibility(f"{subject}-unconfigured")
    assert caught.value.error_code == 40408
    fallback = httpx.get(
        f"{registry_url}/config/{subject}-unconfigured", params={"defaultToGlobal": "true"}
    )
    assert fallback.json() == {"compatibilityLevel": "BACKWARD"}


def test_delete_subject(client: SchemaRegistryClient, registry_url: str, subject: str) -> None:
    schema_id = client.register_schema(subject, avro(USER_V1))
    client.register_schema(subject, avro(USER_V2))
    assert client.delete_subject(subject) == [1, 2]

    assert subject not in client.get_subjects()
    assert subject in client.get_subjects(deleted=True)
    with pytest.raises(SchemaRegistryError) as caught:
        SchemaRegistryClient({"url": registry_url}).get_latest_version(subject)
    assert caught.value.error_code == 40401
    assert client.get_schema(schema_id)  # ids stay readable for old records

    # Registering again continues the version numbers; a permanent delete needs a soft one.
    # (A fresh client: this one's cache still maps the schema to its id for the subject.)
    client = SchemaRegistryClient({"url": registry_url})
    assert client.register_schema(subject, avro(USER_V1)) == schema_id
    assert client.get_versions(subject) == [3]
    with pytest.raises(SchemaRegistryError) as caught:
        client.delete_subject(subject, permanent=True)
    assert caught.value.error_code == 40405
    client.delete_subject(subject)
    assert client.delete_subject(subject, permanent=True) == [1, 2, 3]
    assert subject not in client.get_subjects(deleted=True)


def test_delete_version(client: SchemaRegistryClient, subject: str) -> None:
    client.register_schema(subject, avro(USER_V1))
    client.register_schema(subject, avro(USER_V2))
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    assert client.get_latest_version(subject).version == 1


def test_list_schemas_under_a_prefix(
    client: SchemaRegistryClient, registry_url: str, subject: str
) -> None:
    """Confluent's ``GET /schemas``: every version under a prefix, or each subject's latest
    (``latestOnly``), soft-deleted versions only when asked; one request for hundreds."""
    first = client.register_schema(f"{subject}.a", avro(USER_V1))
    second = client.register_schema(f"{subject}.a", avro(USER_V2))
    other = client.register_schema(f"{subject}.b", avro(USER_V1))
    client.register_schema(f"{subject}.b", avro(USER_V2))
    client.delete_version(f"{subject}.b", 2)

    def listed(**params: str) -> list[tuple[str, int, int]]:
        answer = httpx.get(f"{registry_url}/schemas", params={"subjectPrefix": subject, **params})
        answer.raise_for_status()
        return [(row["subject"], row["version"], row["id"]) for row in answer.json()]

    assert listed() == [(f"{subject}.a", 1, first), (f"{subject}.a", 2, second), (f"{subject}.b", 1, other)]
    assert listed(latestOnly="true") == [(f"{subject}.a", 2, second), (f"{subject}.b", 1, other)]
    assert listed(latestOnly="true", deleted="true") == [(f"{subject}.a", 2, second), (f"{subject}.b", 2, second)]
    assert listed(limit="1", offset="1") == [(f"{subject}.a", 2, second)]
    row = httpx.get(f"{registry_url}/schemas", params={"subjectPrefix": f"{subject}.a", "latestOnly": "true"}).json()[0]
    assert json.loads(row["schema"]) == USER_V2
    assert "schemaType" not in row


def test_zyncs_client_warms_up_on_one_request(registry_url: str, subject: str) -> None:
    """What from-kafka looks up before its first batch: the latest schemas of its topics'
    subjects, in the background, then made ready (``then``); later lookups of those ids
    ask the registry nothing."""
    from engine.kafka.registry_client import RegistrySchemas
    from engine.settings.registry import RegistryProfile

    client = SchemaRegistryClient({"url": registry_url})
    ids = [client.register_schema(f"{subject}.t{i}-value", avro(USER_V2 if i % 2 else USER_V1)) for i in range(6)]
    schemas = RegistrySchemas(RegistryProfile(url=registry_url))
    made: list[list[str]] = []
    schemas.warm([f"{subject}.t{i}-value" for i in range(6)] + [f"{subject}.missing-value"], then=made.append)
    schemas.prefetch(ids)  # waits for the warm-up, which found them all
    assert schemas._warming is not None
    schemas._warming.join(10)
    assert len(made[0]) == 6
    assert {json.loads(t)["fields"][-1]["name"] for t in made[0]} == {"email", "name"}

    def no_requests(*args: object, **kwargs: object) -> None:
        raise AssertionError("asked the registry again")

    schemas._client.get_schema = no_requests  # type: ignore[method-assign]
    assert {json.loads(schemas.lookup(i))["name"] for i in ids} == {"User"}


def test_references(client: SchemaRegistryClient, subject: str) -> None:
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "com.acme",
        "fields": [{"name": "street", "type": "string"}],
    }
    customer = {
        "type": "record",
        "name": "Customer",
        "namespace": "com.acme",
        "fields": [{"name": "home", "type": "com.acme.Address"}],
    }
    address_subject = f"{subject}-address"
    address_id = client.register_schema(address_subject, avro(address))
    refs = [SchemaReference("com.acme.Address", address_subject, 1)]
    customer_id = client.register_schema(subject, Schema(json.dumps(customer), "AVRO", refs))
    assert customer_id != address_id

    latest = client.get_latest_version(subject)
    assert latest.schema.references == refs
    assert client.get_referenced_by(address_subject, 1) == [customer_id]
    with pytest.raises(SchemaRegistryError) as caught:
        client.delete_subject(address_subject)
    assert caught.value.error_code == 42206

    # Without the reference the type is unknown: an invalid schema.
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema(f"{subject}-noref", avro(customer))
    assert (caught.value.http_status_code, caught.value.error_code) == (422, 42201)


def test_json_and_protobuf_schemas_are_stored_as_opaque_text(
    client: SchemaRegistryClient, subject: str
) -> None:
    json_schema = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}})
    json_id = client.register_schema(subject, Schema(json_schema, "JSON"))
    latest = client.get_latest_version(subject)
    assert (latest.schema.schema_type, latest.schema.schema_str) == ("JSON", json_schema)
    # No compatibility check between JSON schemas, but changing the type is refused.
    other_json = json.dumps({"type": "object", "required": ["name"]})
    assert client.register_schema(subject, Schema(other_json, "JSON")) != json_id
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema(subject, avro(USER_V1))
    assert caught.value.error_code == 409

    proto = 'syntax = "proto3";\nmessage Ping { int64 id = 1; }\n'
    proto_id = client.register_schema(f"{subject}-proto", Schema(proto, "PROTOBUF"))
    assert client.get_schema(proto_id).schema_type == "PROTOBUF"


def test_avro_serializer_round_trip(registry_url: str) -> None:
    producer_side = SchemaRegistryClient({"url": registry_url})
    serializer = AvroSerializer(
        producer_side, json.dumps(USER_V2), conf={"auto.register.schemas": True}
    )
    context = SerializationContext("users-roundtrip", MessageField.VALUE)
    value = {"id": 7, "name": "Ada", "email": "ada@example.com"}
    data = serializer(value, context)

    assert data[0] == 0  # Confluent wire format: magic byte, 4-byte schema id, Avro body
    schema_id = int.from_bytes(data[1:5], "big")
    consumer_side = SchemaRegistryClient({"url": registry_url})
    assert consumer_side.get_latest_version("users-roundtrip-value").schema_id == schema_id
    assert AvroDeserializer(consumer_side)(data, context) == value


def test_error_codes(registry_url: str, subject: str) -> None:
    with httpx.Client(base_url=registry_url) as http:
        registered = http.post(
            f"/subjects/{subject}/versions",
            json={"schema": json.dumps(USER_V1)},
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        assert registered.status_code == 200
        assert registered.headers["content-type"].startswith(
            "application/vnd.schemaregistry.v1+json"
        )

        def error(response: httpx.Response) -> tuple[int, int]:
            assert response.headers["content-type"].startswith("application/vnd.schemaregistry")
            body = response.json()
            assert body["message"]
            return response.status_code, body["error_code"]

        assert error(http.get("/subjects/no-such-subject/versions")) == (404, 40401)
        assert error(http.get("/subjects/no-such-subject/versions/1")) == (404, 40401)
        assert error(http.get(f"/subjects/{subject}/versions/9")) == (404, 40402)
        assert error(http.get("/schemas/ids/999999")) == (404, 40403)
        assert error(http.post(f"/subjects/{subject}", json={"schema": json.dumps(USER_V2)})) == (
            404,
            40403,
        )
        assert error(http.post(f"/subjects/{subject}/versions", json={"schema": "{oops"})) == (
            422,
            42201,
        )
        assert error(
            http.post(f"/subjects/{subject}/versions", json={"schema": '"NoSuchType"'})
        ) == (422, 42201)
        assert error(http.get(f"/subjects/{subject}/versions/0")) == (422, 42202)
        assert error(http.get(f"/subjects/{subject}/versions/first")) == (422, 42202)
        assert error(http.put("/config", json={"compatibility": "MAYBE"})) == (422, 42203)


def test_concurrent_registrations(registry_url: str, subject: str) -> None:
    """64 requests from 16 threads: one id per schema, one version per subject."""
    limits = httpx.Limits(max_connections=16)

    with httpx.Client(base_url=registry_url, limits=limits) as http:

        def register(i: int) -> int:
            schema = {"type": "record", "name": f"R{i % 4}", "fields": []}
            response = http.post(
                f"/subjects/{subject}-{i % 8}/versions", json={"schema": json.dumps(schema)}
            )
            response.raise_for_status()
            return response.json()["id"]

        with ThreadPoolExecutor(max_workers=16) as pool:
            ids = list(pool.map(register, range(64)))
        ids_by_schema: dict[int, set[int]] = {}
        for i, schema_id in enumerate(ids):
            ids_by_schema.setdefault(i % 4, set()).add(schema_id)
        assert all(len(s) == 1 for s in ids_by_schema.values())
        assert len(set().union(*ids_by_schema.values())) == 4
        for n in range(8):
            assert http.get(f"/subjects/{subject}-{n}/versions").json() == [1]


def test_restart_keeps_everything(tmp_path: Path) -> None:
    first = Registry(tmp_path)
    try:
        client = SchemaRegistryClient({"url": first.url})
        v1 = client.register_schema("keep-value", avro(USER_V1))
        v2 = client.register_schema("keep-value", avro(USER_V2))
        other = client.register_schema("other-value", avro(USER_V1))
        client.set_compatibility("keep-value", "FORWARD")
        client.set_compatibility(level="FULL")
    finally:
        first.stop()

    second = Registry(tmp_path, db_path=first.db_path)
    try:
        client = SchemaRegistryClient({"url": second.url})
        assert client.get_versions("keep-value") == [1, 2]
        assert client.get_version("keep-value", 1).schema_id == v1
        assert client.get_latest_version("keep-value").schema_id == v2
        assert client.lookup_schema("other-value", avro(USER_V1)).schema_id == other == v1
        assert json.loads(client.get_schema(v2).schema_str) == USER_V2
        assert client.get_compatibility("keep-value") == "FORWARD"
        assert client.get_compatibility() == "FULL"
        fresh = client.register_schema("new-value", avro({**USER_V1, "name": "Fresh"}))
        assert fresh > v2  # ids are never reused
    finally:
        second.stop()


def test_port_in_use_is_one_line_error(registry_url: str, tmp_path: Path) -> None:
    port = int(registry_url.rsplit(":", 1)[1])
    result = subprocess.run(
        registry_command(port, tmp_path / "second.db"), capture_output=True, text=True, timeout=30
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "in use" in lines[0]
    assert result.stdout == ""
