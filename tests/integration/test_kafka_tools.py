"""`zync produce`, `consume`, `ls`, `info` against the real broker and registry.

Runs the commands in process (typer's CliRunner) except where a real process matters
(Ctrl-C, everything a failing command prints).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from typer.testing import CliRunner

from engine.kafka.clients import check_reachable
from engine.settings.kafka import load_kafka_profile
from zync_tui.commands.kafka import make_app

pytestmark = pytest.mark.integration

runner = CliRunner()
APP = make_app()


def zync(*args: str, input: str | None = None):  # noqa: A002 - click's name
    return runner.invoke(APP, [str(a) for a in args], input=input)


def ok(*args: str, input: str | None = None):  # noqa: A002 - click's name
    result = zync(*args, input=input)
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}"
    return result


def records(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def new_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def stack(broker, registry, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ZYNC_KAFKA_BOOTSTRAP_SERVERS", broker.address)
    monkeypatch.setenv("ZYNC_REGISTRY_URL", registry.url)
    return broker, registry


def topics(broker) -> dict[str, int]:
    return check_reachable(load_kafka_profile({"bootstrap_servers": broker.address}))


def raw_produce(broker, topic: str, values: list[bytes | None], keys: list[bytes | None] | None = None) -> None:
    """Bytes as they are, with a plain confluent-kafka producer (no zync code)."""
    producer = Producer({"bootstrap.servers": broker.address})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=keys[i] if keys else None, partition=0)
    assert producer.flush(10) == 0


# --------------------------------------------------------------------------- happy paths

PEOPLE = [
    {"id": 1, "name": "ann", "address": {"city": "Oslo"}, "tags": ["a", "b"], "score": 1.5},
    {"id": 2, "name": "bob", "address": {"city": "Rome"}, "tags": [], "score": 2},
    {"id": 3, "name": "cy", "address": {"city": "Lima"}, "tags": ["c"], "score": 0.5, "vip": True},
    {"id": 4, "name": "dee", "address": {"city": "Oslo"}, "tags": [], "score": 3, "vip": False},
    {"id": 5, "name": "eve", "address": {"city": "Kyiv"}, "tags": ["x"], "score": 1},
    {"id": 6, "name": "fay", "address": {"city": "Pune"}, "tags": [], "score": 2.25},
]


def test_avro_round_trip_with_keys_over_partitions(stack, tmp_path: Path) -> None:
    broker, _ = stack
    topic = new_topic("people")
    source = tmp_path / "people.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in PEOPLE))
    produced = ok("produce", "-t", topic, "--key", "id", "--partitions", "3", source)
    lines = produced.stdout.splitlines()
    assert lines[0].startswith(f"produced 6 records to {topic} as avro (per partition ")
    assert f"created topic {topic} with 3 partition(s)" in lines
    assert f"value schema: inferred, subject {topic}-value version 1, id " in produced.stdout
    assert topics(broker)[topic] == 3

    got = records(ok("consume", "-t", topic, "--from-beginning", "--max", "6"))
    assert len(got) == 6
    by_id = {r["key"]: r for r in got}
    expected = [
        {**p, "score": float(p["score"]), "vip": p.get("vip")} for p in PEOPLE
    ]
    assert [by_id[i]["value"] for i in range(1, 7)] == expected
    for r in got:
        assert set(r) == {"kafka", "key", "value"}
        assert set(r["kafka"]) == {"topic", "partition", "offset", "timestamp"}
        assert r["kafka"]["topic"] == topic
        assert isinstance(r["kafka"]["timestamp"], int)
    assert len({r["kafka"]["partition"] for r in got}) > 1  # keys spread over partitions

    # the same keys land in the same partitions again; the registered schema is reused
    again = ok("produce", "-t", topic, "--key", "id", input=json.dumps(PEOPLE[0]) + "\n")
    assert f"value schema: registered, subject {topic}-value version 1" in again.stdout
    first = by_id[1]["kafka"]["partition"]
    latest = records(ok("consume", "-t", topic, "--from-beginning", "-p", str(first),
                        "--exit-after", "500ms"))
    assert [r["key"] for r in latest].count(1) == 2


def test_json_is_the_default_without_a_registry(broker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNC_KAFKA_BOOTSTRAP_SERVERS", broker.address)
    monkeypatch.delenv("ZYNC_REGISTRY_URL", raising=False)
    topic = new_topic("plain")
    produced = ok("produce", "-t", topic, input='[{"a": 1}, {"a": "two"}, null, "text"]')
    assert f"produced 4 records to {topic} as json" in produced.stdout
    got = records(ok("consume", "-t", topic, "--from-beginning", "--max", "4", "--format", "json"))
    assert [r["value"] for r in got] == [{"a": 1}, {"a": "two"}, None, "text"]
    avro = zync("produce", "-t", topic, "--format", "avro", input="{}")
    assert avro.exit_code == 1
    assert avro.stderr.startswith("error: no Schema Registry configured")


def test_connect_json_round_trip_and_envelopes(stack) -> None:
    topic = new_topic("connect")
    text = (
        '{"key": {"id": 1}, "value": {"id": 1, "amount": 9.5, "paid": true}}\n'
        '{"key": {"id": 2}, "value": {"id": 2, "amount": 3, "paid": false}}\n'
        '{"key": {"id": 2}, "value": null}\n'
    )
    produced = ok("produce", "-t", topic, "--format", "connect-json", input=text)
    assert "as connect-json" in produced.stdout
    got = records(ok("consume", "-t", topic, "--from-beginning", "--max", "3"))
    assert [(r["key"], r["value"]) for r in got] == [
        ({"id": 1}, {"id": 1, "amount": 9.5, "paid": True}),
        ({"id": 2}, {"id": 2, "amount": 3.0, "paid": False}),
        ({"id": 2}, None),
    ]
    # what zync consume prints goes back in as envelopes
    copy = new_topic("copy")
    ok("produce", "-t", copy, "--format", "json",
       input="\n".join(json.dumps(r) for r in got))
    copied = records(ok("consume", "-t", copy, "--from-beginning", "--max", "3"))
    assert [(r["key"], r["value"]) for r in copied] == [(r["key"], r["value"]) for r in got]


def test_consume_from_an_offset_and_as_a_group(stack) -> None:
    topic = new_topic("offsets")
    ok("produce", "-t", topic, "--format", "json",
       input="\n".join(json.dumps({"n": n}) for n in range(5)))
    got = records(ok("consume", "-t", topic, "--offset", "3", "--exit-after", "500ms"))
    assert [r["value"]["n"] for r in got] == [3, 4]
    assert [r["kafka"]["offset"] for r in got] == [3, 4]

    group = f"g-{uuid.uuid4().hex[:6]}"
    first = records(ok("consume", "-t", topic, "-g", group, "--from-beginning", "--max", "2"))
    assert [r["value"]["n"] for r in first] == [0, 1]
    # the group committed what was printed, so it resumes at offset 2
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": stack[0].address, "group.id": group})
    try:
        committed = reader.committed([TopicPartition(topic, 0)], timeout=10)
    finally:
        reader.close()
    assert committed[0].offset == 2

    both = zync("consume", "-t", topic, "--offset", "1", "--group", "g")
    assert both.exit_code == 1
    assert "choose one" in both.stderr


def test_exit_after_counts_once_every_partition_answered(stack) -> None:
    """However short ``--exit-after`` is, the records already in the topic are read: a
    partition not fetched from yet is not idle."""
    topic = new_topic("quick")
    ok("produce", "-t", topic, "--format", "json", "--partitions", "3", "--key", "n",
       input="\n".join(json.dumps({"n": n}) for n in range(30)))  # fmt: skip
    for group in (None, f"g-{uuid.uuid4().hex[:6]}"):
        args = ["-g", group] if group else []
        got = records(ok("consume", "-t", topic, "--from-beginning", "--exit-after", "1ms", *args))
        assert sorted(r["value"]["n"] for r in got) == list(range(30)), group


def test_by_default_only_new_records_and_waiting_for_them(stack) -> None:
    import threading

    from engine.kafka.consume import ConsumeOptions, consume

    broker, _ = stack
    topic = new_topic("live")
    ok("produce", "-t", topic, "--format", "json", input='{"old": true}\n')
    profile = load_kafka_profile({"bootstrap_servers": broker.address})
    got: list[dict] = []
    arrived = threading.Event()

    def read() -> None:
        for record in consume(profile, ConsumeOptions(topic, max_records=1, exit_after=15)):
            got.append(record)
            arrived.set()

    reader = threading.Thread(target=read)
    reader.start()
    n = 0
    while not arrived.wait(0.2):  # keep producing until the waiting consumer sees one
        ok("produce", "-t", topic, "--format", "json", input=json.dumps({"n": n}))
        n += 1
        assert n < 50
    reader.join(10)
    assert len(got) == 1
    assert "n" in got[0]["value"]  # never the record from before it started


def test_ls_and_info(stack) -> None:
    topic = new_topic("listed")
    ok("produce", "-t", topic, "--key", "k", "--partitions", "2",
       input='{"k": "a", "n": 1}\n{"k": "b", "n": 2}\n')
    listing = ok("ls")
    rows = {line.split()[0]: line.split()[1:] for line in listing.stdout.splitlines()[1:]}
    assert listing.stdout.splitlines()[0].split() == ["subject", "version", "id", "type"]
    assert rows[f"{topic}-key"][0] == "1"
    assert rows[f"{topic}-value"][2] == "AVRO"

    as_json = {row["subject"]: row for row in json.loads(ok("ls", "--json").stdout)}
    value = as_json[f"{topic}-value"]
    assert value["version"] == 1
    assert value["id"] == int(rows[f"{topic}-value"][1])
    assert "schema" not in value

    long = ok("ls", "-l").stdout
    assert f"{topic}-value  version 1  id {value['id']}  AVRO" in long
    assert '  "fields": [' in long  # pretty-printed schema

    table = ok("info", "-t", topic).stdout.splitlines()
    assert table[0] == f"{topic} (watermarks as the broker reports them)"
    assert table[1].split() == ["partition", "low", "high", "high", "-", "low"]
    assert [line.split()[0] for line in table[2:]] == ["0", "1"]
    doc = json.loads(ok("info", "-t", topic, "--json").stdout)
    assert doc["topic"] == topic
    assert [p["partition"] for p in doc["partitions"]] == [0, 1]
    # both keys may hash to one partition (the key bytes carry the schema id): only the
    # total is certain
    assert all(p["low"] == 0 for p in doc["partitions"])
    assert sum(p["high"] for p in doc["partitions"]) == 2

    missing = zync("info", "-t", "no-such-topic-here")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error: topic 'no-such-topic-here' does not exist on Kafka at")


def test_the_embedded_broker_keeps_records_of_any_age(broker) -> None:
    """Kafka deletes a segment once its newest record's own timestamp is older than the
    retention; replayed change events carry their source times (the demo's are from
    2024). The broker zync starts has no time retention, and says so for every topic."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = new_topic("old")
    sent = Producer({"bootstrap.servers": broker.address})
    sent.produce(topic, value=b"{}", timestamp=1714557600000)  # 2024-05-01
    assert sent.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.address})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    config = admin.describe_configs([resource])[resource].result(timeout=30)
    assert config["retention.ms"].value == "-1"
    assert config["retention.bytes"].value == "-1"


# --------------------------------------------------------------------------- bad input


def test_bad_json_names_the_line_and_sends_nothing(stack, tmp_path: Path) -> None:
    broker, _ = stack
    topic = new_topic("badjson")
    source = tmp_path / "in.jsonl"
    source.write_text('{"a": 1}\n{"a": 2}\n{"a": 3,,}\n{"a": 4}\n')
    result = zync("produce", "-t", topic, source)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {source} line 3: invalid JSON: Expecting property name enclosed in double "
        "quotes (column 9)\n"
    )
    assert topic not in topics(broker)
    empty = ok("produce", "-t", topic, input="\n")
    assert empty.stdout == f"nothing to produce: the input holds no records ({topic} unchanged)\n"
    assert topic not in topics(broker)


def test_a_record_that_does_not_fit_the_schema_sends_nothing(stack, tmp_path: Path) -> None:
    broker, registry = stack
    topic = new_topic("strict")
    schema = tmp_path / "order.avsc"
    schema.write_text(json.dumps({
        "type": "record", "name": "Order", "namespace": "shop",
        "fields": [{"name": "id", "type": "long"},
                   {"name": "line", "type": {"type": "record", "name": "Line",
                                             "fields": [{"name": "qty", "type": "int"}]}}],
    }))
    text = '{"id": 1, "line": {"qty": 1}}\n{"id": 2, "line": {"qty": "two"}}\n{"id": 3, "line": {}}\n'
    result = zync("produce", "-t", topic, "--value-schema", schema, input=text)
    assert result.exit_code == 1
    assert result.stderr == (
        'error: <stdin> line 2: value.line.qty: expected int, got "two"; '
        "<stdin> line 3: value.line.qty: missing, and the field has no default; "
        "nothing was sent\n"
    )
    assert topic not in topics(broker)
    assert f"{topic}-value" not in ok("ls").stdout

    missing_key = zync("produce", "-t", topic, "--key", "sku", input='{"id": 1}\n')
    assert missing_key.exit_code == 1
    assert missing_key.stderr == "error: <stdin> line 1: --key sku: the value has no field sku\n"


def test_an_incompatible_new_schema_is_refused_in_one_line(stack) -> None:
    broker, _ = stack
    topic = new_topic("evolve")
    ok("produce", "-t", topic, input='{"id": 1, "name": "a"}\n')
    result = zync("produce", "-t", topic, input='{"id": "one", "name": "a"}\n')
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: Schema Registry at {stack[1].url} refused the schema "
                                    f"for {topic}-value")
    assert len(result.stderr.splitlines()) == 1
    got = records(ok("consume", "-t", topic, "--from-beginning", "--exit-after", "500ms"))
    assert len(got) == 1


@pytest.fixture
def bad_avro_topic(stack) -> tuple[str, list[int]]:
    """offset 0 good, 1 JSON (wrong magic), 2 unknown schema id, 3 truncated, 4 good."""
    broker, _ = stack
    topic = new_topic("badavro")
    ok("produce", "-t", topic, input='{"id": 1, "name": "first"}\n')
    good = records(ok("consume", "-t", topic, "--from-beginning", "--max", "1"))[0]
    assert good["value"] == {"id": 1, "name": "first"}
    from confluent_kafka import Consumer, TopicPartition

    raw = Consumer({"bootstrap.servers": broker.address, "group.id": "raw"})
    raw.assign([TopicPartition(topic, 0, 0)])
    message = None
    while message is None:
        message = raw.poll(5)
    raw.close()
    body = message.value()
    raw_produce(broker, topic, [
        b'{"id": 2, "name": "json"}',
        b"\x00" + (999_999).to_bytes(4, "big") + body[5:],
        body[:-3],
        body,
    ])
    return topic, [0, 4]


def test_undecodable_records_are_reported_and_skipped(bad_avro_topic) -> None:
    topic, good = bad_avro_topic
    result = ok("consume", "-t", topic, "--from-beginning", "--max", "5", "--format", "avro")
    assert [r["kafka"]["offset"] for r in records(result)] == good
    assert result.stderr.splitlines() == [
        f"error: cannot decode the value of topic {topic} partition 0 offset 1: bad-magic: first "
        "byte is 0x7b, not the Avro magic byte 0x00 (it looks like JSON)",
        f"error: cannot decode the value of topic {topic} partition 0 offset 2: unknown-schema-id: "
        "schema id 999999 is not in the registry",
        f"error: cannot decode the value of topic {topic} partition 0 offset 3: truncated: the "
        "4-byte body ends before its value does",
    ]
    auto = ok("consume", "-t", topic, "--from-beginning", "--max", "5")
    assert [r["value"] for r in records(auto)] == [
        {"id": 1, "name": "first"}, {"id": 2, "name": "json"}, {"id": 1, "name": "first"}
    ]
    assert len(auto.stderr.splitlines()) == 2


def test_strict_stops_at_the_first_undecodable_record(bad_avro_topic) -> None:
    topic, _ = bad_avro_topic
    result = zync("consume", "-t", topic, "--from-beginning", "--format", "avro", "--strict")
    assert result.exit_code == 1
    assert [r["kafka"]["offset"] for r in records(result)] == [0]
    assert result.stderr == (
        f"error: cannot decode the value of topic {topic} partition 0 offset 1: bad-magic: "
        "first byte is 0x7b, not the Avro magic byte 0x00 (it looks like JSON)\n"
    )


def test_bad_json_records_when_consuming(stack) -> None:
    broker, _ = stack
    topic = new_topic("badbytes")
    raw_produce(broker, topic, [b'{"a": 1}', b'{"a": ', b"\xff\xfe", b'{"schema": {"type": "int32"}, "payload": "x"}', b"2"],
                keys=[b"plain-key", None, None, None, b'{"id": 5}'])
    result = ok("consume", "-t", topic, "--from-beginning", "--max", "5")
    assert [(r["key"], r["value"]) for r in records(result)] == [("plain-key", {"a": 1}), ({"id": 5}, 2)]
    errors = result.stderr.splitlines()
    assert errors[0].startswith(
        f"error: cannot decode the value of topic {topic} partition 0 offset 1: bad-json: not JSON: "
    )
    assert errors[1] == (
        f"error: cannot decode the value of topic {topic} partition 0 offset 2: bad-json: not "
        "UTF-8 text: invalid start byte at byte 0"
    )
    assert errors[2] == (
        f"error: cannot decode the value of topic {topic} partition 0 offset 3: "
        'bad-connect-envelope: value: expected int32, got "x"'
    )
    strict_key = ok("consume", "-t", topic, "--from-beginning", "--max", "1",
                    "--key-format", "json", "--format", "json")
    assert "cannot decode the key of topic" in strict_key.stderr


# --------------------------------------------------------------------------- unreachable


@pytest.fixture(scope="module")
def stopped() -> Iterator[tuple[str, str]]:
    """Addresses of a stopped broker and a stopped registry: ports of 127.0.0.1 that
    refuse connections, as a stopped server's do. Each is held bound but not listening
    for the module's life, so no other process can take it meanwhile."""
    held = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(2)]
    try:
        for sock in held:
            sock.bind(("127.0.0.1", 0))
        broker, registry = (f"127.0.0.1:{sock.getsockname()[1]}" for sock in held)
        yield broker, f"http://{registry}"
    finally:
        for sock in held:
            sock.close()


def test_a_stopped_broker_is_one_line_within_the_timeout(stopped, registry) -> None:
    address, _ = stopped
    for command in (["info", "-t", "x"], ["consume", "-t", "x"],
                    ["produce", "-t", "x", "--format", "json"]):
        started = time.monotonic()
        result = zync(*command, "-b", address, "--timeout", "1", input='{"a": 1}\n')
        elapsed = time.monotonic() - started
        assert result.exit_code == 1, command
        # librdkafka's own words carry how long the refused connect took ("after 0ms").
        stderr = re.sub(r"after \d+ms", "after Nms", result.stderr)
        assert stderr == (
            f"error: cannot reach Kafka at {address} (PLAINTEXT) within 1s: {address}/bootstrap: "
            f"Connect to ipv4#{address} failed: Connection refused (after Nms in state CONNECT). "
            "Is the broker running? (`zync dev status`)\n"
        ), command
        assert 0.9 < elapsed < 4, command


def test_a_stopped_registry_is_one_line(stopped, broker) -> None:
    _, url = stopped
    for command in (["ls"], ["produce", "-t", "x", "-b", broker.address]):
        started = time.monotonic()
        result = zync(*command, "-r", url, "--timeout", "2", input='{"a": 1}\n')
        assert result.exit_code == 1, command
        assert result.stderr == (
            f"error: cannot reach Schema Registry at {url}: [Errno 111] Connection refused. "
            "Is it running? (`zync dev status`)\n"
        ), command
        assert time.monotonic() - started < 5


# --------------------------------------------------------------------------- secrets, Ctrl-C


def _run(*args: str, env: dict[str, str], input: str = "") -> subprocess.CompletedProcess:  # noqa: A002 - subprocess's name
    return subprocess.run([sys.executable, "-m", "zync_tui.commands.kafka", *args],
                          input=input, capture_output=True, text=True, env=env, timeout=60)


def test_passwords_never_show(stack, stopped, tmp_path: Path) -> None:
    broker, _ = stack
    kafka_secret, registry_secret = "kafka-Secret-4711", "registry-Secret-0815"
    env = dict(os.environ, ZYNC_KAFKA_SASL_PASSWORD=kafka_secret,
               ZYNC_REGISTRY_PASSWORD=registry_secret, ZYNC_REGISTRY_USER="reg-user",
               ZYNC_REGISTRY_URL=stopped[1])
    failures = [
        _run("info", "-t", "x", "--timeout", "1", "--security-protocol", "SASL_PLAINTEXT",
             "--sasl-username", "alice", env=env),
        _run("ls", "--timeout", "1", env=env),
        _run("produce", "-t", "x", "--timeout", "1", "--format", "json",
             "--security-protocol", "SASL_SSL", "--sasl-mechanisms", "SCRAM-SHA-256",
             "--sasl-username", "alice", "--sasl-password", kafka_secret, env=env,
             input='{"a": 1}\n'),
        # a mistake in the settings themselves
        _run("info", "-t", "x", "--security-protocol", "PLAINTEXT", env=env),
    ]
    for done in failures:
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        for secret in (kafka_secret, registry_secret):
            assert secret not in done.stdout + done.stderr
    assert "sasl_password is set but security_protocol is PLAINTEXT" in failures[3].stderr


def test_a_credentials_file_others_can_read_gets_a_warning(stack) -> None:
    broker, _ = stack
    home = Path(os.environ["ZYNC_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    path = home / "kafka.json"
    path.write_text(json.dumps({"bootstrap_servers": broker.address,
                                "security_protocol": "SASL_PLAINTEXT",
                                "sasl_username": "alice", "sasl_password": "file-Secret-1"}))
    path.chmod(0o644)
    result = zync("info", "-t", "x", "--timeout", "2", "-b", broker.address)
    lines = result.stderr.splitlines()
    assert lines[0] == (
        f"warning: {path} holds a password and is readable by group/others (mode 0644): "
        f"run `chmod 600 {path}`"
    )
    assert lines[1].startswith("error: cannot reach Kafka")
    assert "file-Secret-1" not in result.output
    path.chmod(0o600)
    assert not zync("info", "-t", "x", "--timeout", "2").stderr.startswith("warning")


def test_ctrl_c_exits_cleanly(stack) -> None:
    broker, registry = stack
    topic = new_topic("ctrlc")
    ok("produce", "-t", topic, input='{"n": 1}\n')
    env = dict(os.environ, ZYNC_KAFKA_BOOTSTRAP_SERVERS=broker.address,
               ZYNC_REGISTRY_URL=registry.url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "zync_tui.commands.kafka", "consume", "-t", topic,
         "--from-beginning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        first = proc.stdout.readline()  # waits for the record: consuming, then waiting for more
        assert json.loads(first)["value"] == {"n": 1}
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert err.strip() == "interrupted"

