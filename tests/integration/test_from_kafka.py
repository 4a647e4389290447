"""from-kafka against a real broker, registry and lake: decoding, dead letters, types,
group mirroring, --on-error fail, shapers, YAML inputs and two concurrent processes."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from deltalake import DeltaTable
from typer.testing import CliRunner

from engine.ingest.errors import BadRecord, IngestError
from engine.ingest.loop import Ingest
from engine.ingest.options import IngestInput, IngestOptions, load_inputs
from engine.kafka import clients
from engine.kafka.codecs import avro
from engine.kafka.registry_client import RegistrySchemas
from engine.lake.batch_shaper import ShaperError
from engine.lake.pools import Lake
from engine.settings.kafka import KafkaProfile
from engine.settings.registry import RegistryProfile
from tests.fixtures import debezium as dbz

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka(broker) -> KafkaProfile:
    return KafkaProfile(bootstrap_servers=broker.address)


@pytest.fixture
def reg(registry) -> RegistryProfile:
    return RegistryProfile(url=registry.url)


def send(profile: KafkaProfile, topic: str, records: list[tuple[int, bytes | None, bytes | None]]) -> None:
    """Produce (partition, key, value) in order and wait for delivery."""
    producer = clients.producer(profile)
    for partition, key, value in records:
        producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(30) == 0


def pool_rows(lake: Lake, pool: str) -> list[dict]:
    table = DeltaTable(str(lake.pool_path(pool))).to_pyarrow_table()
    return sorted(table.to_pylist(), key=lambda r: r["seqno"])


def digest(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def test_avro_and_json_topics_with_bad_records_of_every_kind(kafka, reg, lake: Lake) -> None:
    inv, js = name("invoices"), name("events")
    schemas = RegistrySchemas(reg)
    value_id = schemas.register(f"{inv}-value", dbz.AVRO_VALUE_SCHEMA)
    key_id = schemas.register(f"{inv}-key", dbz.AVRO_KEY_SCHEMA)
    value_schema, key_schema = avro.AvroSchema(dbz.AVRO_VALUE_SCHEMA), avro.AvroSchema(dbz.AVRO_KEY_SCHEMA)
    clients.ensure_topic(kafka, inv, partitions=2)
    clients.ensure_topic(kafka, js, partitions=1)
    rnd = random.Random(7)
    expected: dict[tuple[str, int, int], tuple[str | None, str | None]] = {}
    bad: dict[tuple[str, int, int], str] = {}
    records, offsets = [], {0: 0, 1: 0}
    for i in range(300):
        partition = i % 2
        value = avro.encode(value_id, value_schema.parsed, dbz.event(i, rnd.choice("cru"), rnd))
        key = avro.encode(key_id, key_schema.parsed, {"ID": i})
        where = (inv, partition, offsets[partition])
        if i == 11:
            value = b'{"not": "avro"}'
            bad[where] = "value: bad-magic"
        elif i == 42:
            value = b"\x00\x00\x0f\x42\x40" + value[5:]  # schema id 1,000,000
            bad[where] = "value: unknown-schema-id"
        elif i == 77:
            value = value[:12]
            bad[where] = "value: truncated"
        elif i == 100:
            value = None  # a tombstone is a record, not a dead letter
        if where not in bad:
            text = value_schema.decode_json(value[5:]) if value is not None else None
            expected[where] = (key_schema.decode_json(key[5:]), text)
        records.append((partition, key, value))
        offsets[partition] += 1
    send(kafka, inv, records)
    json_records = []
    for i in range(50):
        value = b"{broken" if i == 20 else json.dumps({"n": i, "tags": ["a"] * (i % 3)}).encode()
        if i == 20:
            bad[(js, 0, i)] = "value: bad-json"
        else:
            expected[(js, 0, i)] = (json.dumps(f"k{i}"), json.dumps(json.loads(value), separators=(",", ":")))
        json_records.append((0, f"k{i}".encode(), value))
    send(kafka, js, json_records)

    lake.create_pool("raw")
    commits = []
    ingest = Ingest(
        [IngestInput(inv, "raw"), IngestInput(js, "raw")],
        lake=lake,
        kafka=kafka,
        registry=reg,
        options=IngestOptions(exit_after=1.5, max_records=120),
    )
    stats = ingest.run(on_commit=commits.append)

    rows = pool_rows(lake, "raw")
    assert [r["seqno"] for r in rows] == list(range(350))
    got = {(r["kafka"]["topic"], r["kafka"]["partition"], r["kafka"]["offset"]): r for r in rows}
    assert len(got) == 350
    for where, (key, value) in expected.items():
        row = got[where]
        assert row["deadletter"] is None
        assert (digest(row["key"]), digest(row["value"])) == (digest(key), digest(value)), where
    for where, error in bad.items():
        dead = got[where]["deadletter"]
        assert dead["stage"] == "decode"
        assert dead["error"].startswith(error), dead
        assert got[where]["value"] is None
    # raw bytes are kept
    bad_magic = next(w for w, e in bad.items() if "bad-magic" in e)
    assert got[bad_magic]["deadletter"]["value_bytes"] == b'{"not": "avro"}'
    assert got[bad_magic]["deadletter"]["key_bytes"].startswith(b"\x00")
    # records of a partition keep their offset order in seqnos
    for p in (0, 1):
        part = [r for r in rows if r["kafka"]["topic"] == inv and r["kafka"]["partition"] == p]
        assert [r["kafka"]["offset"] for r in part] == list(range(150))

    pool = lake.open_pool("raw")
    assert pool.position(inv, 0) == 149
    assert pool.position(inv, 1) == 149
    assert pool.position(js, 0) == 49
    value_type = pool.spark_types(inv)[1]
    assert "after" in value_type.fieldNames()
    assert pool.spark_types(js)[1].fieldNames() == ["n", "tags"]
    assert stats.records == 350
    assert stats.dead_letters == 4
    assert stats.state == "stopped"
    assert sum(c.records for c in commits) == 350
    assert all(c.version for c in commits)
    assert commits[-1].topic_lag() == {inv: 0, js: 0}

    # positions mirrored to the consumer group zync-raw
    group = clients.consumer(kafka, group="zync-raw")
    committed = group.committed([TopicPartition(inv, 0), TopicPartition(inv, 1), TopicPartition(js, 0)], timeout=10)
    assert [tp.offset for tp in committed] == [150, 150, 50]
    group.close()

    # a second run finds nothing new and commits nothing
    version = pool.version
    again = Ingest([IngestInput(inv, "raw"), IngestInput(js, "raw")], lake=lake, kafka=kafka,
                   registry=reg, options=IngestOptions(exit_after=1.0)).run()
    assert again.records == 0
    assert lake.open_pool("raw").version == version


def test_on_error_fail_stops_before_committing_the_bad_batch(kafka, lake: Lake, tmp_path: Path) -> None:
    from zync_tui.commands.ingest import make_app

    topic = name("strict")
    clients.ensure_topic(kafka, topic, partitions=1)
    send(kafka, topic, [(0, None, json.dumps({"i": i}).encode()) for i in range(10)])
    env = {"ZYNC_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "ZYNC_LAKE": str(lake.root)}
    runner = CliRunner()
    args = ["from-kafka", "-t", topic, "-p", "strict", "--create-pool", "--exit-after", "1s",
            "--on-error", "fail", "--format", "json"]
    first = runner.invoke(make_app(), args, env=env)
    assert first.exit_code == 0, first.output
    assert "strict v2: +10 records" in first.output
    assert f"lag {topic}=0" in first.output

    send(kafka, topic, [(0, None, b'{"i": 10}'), (0, None, b"not json"), (0, None, b'{"i": 12}')])
    failed = runner.invoke(make_app(), args, env=env)
    assert failed.exit_code == 1
    assert f"cannot decode {topic}[0] offset 11: value: bad-json" in failed.output
    assert "this batch was not committed" in failed.output
    pool = lake.open_pool("strict")
    assert pool.version == 2
    assert pool.position(topic, 0) == 9

    with pytest.raises(BadRecord) as caught:
        Ingest([IngestInput(topic, "strict")], lake=lake, kafka=kafka,
               options=IngestOptions(exit_after=1.0, on_error="fail")).run()
    assert (caught.value.partition, caught.value.offset) == (0, 11)
    # with dead letters (the default) the same batch goes in
    Ingest([IngestInput(topic, "strict")], lake=lake, kafka=kafka, options=IngestOptions(exit_after=1.0)).run()
    assert lake.open_pool("strict").position(topic, 0) == 12


def test_exit_after_counts_once_every_partition_answered(kafka, lake: Lake) -> None:
    """``exit_after`` is idleness: a partition not fetched from yet (the consumer still
    finding its leader, resetting its offset, or a busy broker) is not idle. Even with an
    exit_after far shorter than a first fetch takes, every record waiting is read."""
    topics = [name("quick"), name("quick")]
    for topic in topics:
        clients.ensure_topic(kafka, topic, partitions=3)
        send(kafka, topic, [(i % 3, None, json.dumps({"i": i}).encode()) for i in range(30)])
    for run in range(3):  # each run a new consumer, from the start of a pool of its own
        stats = Ingest([IngestInput(t, f"Quick{run}_{n}") for n, t in enumerate(topics)],
                       lake=lake, kafka=kafka,
                       options=IngestOptions(exit_after=0.001, create_pools=True)).run()  # fmt: skip
        assert stats.records == 60
        for n in range(2):
            assert len(pool_rows(lake, f"Quick{run}_{n}")) == 30


def test_a_new_pool_starts_where_retention_left_the_partition(kafka, lake: Lake) -> None:
    """A new pool's partitions are assigned at offset 0 (``FIRST_OFFSET``), not the
    consumer's logical beginning: where retention has removed the first records, the
    consumer moves to the log's start and reads every record left, nothing else."""
    topic = name("retained")
    clients.ensure_topic(kafka, topic, partitions=2)
    send(kafka, topic, [(i % 2, None, json.dumps({"i": i}).encode()) for i in range(40)])
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    gone = admin.delete_records([TopicPartition(topic, 0, 6), TopicPartition(topic, 1, 3)])
    for future in gone.values():
        future.result(30)  # the log starts at offsets 6 and 3 now
    stats = Ingest([IngestInput(topic, "Retained")], lake=lake, kafka=kafka,
                   options=IngestOptions(exit_after=0.5, create_pools=True)).run()  # fmt: skip
    rows = pool_rows(lake, "Retained")
    held = sorted((r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows)
    assert held == [(0, o) for o in range(6, 20)] + [(1, o) for o in range(3, 20)]
    assert stats.records == len(rows) == 31


def test_yaml_inputs_many_topics_to_many_pools(kafka, lake: Lake, tmp_path: Path) -> None:
    from zync_tui.commands.ingest import make_app

    a, b = name("a"), name("b")
    for topic in (a, b):
        clients.ensure_topic(kafka, topic, partitions=2)
        send(kafka, topic, [(i % 2, None, json.dumps({"t": topic, "i": i}).encode()) for i in range(40)])
    config = tmp_path / "etl.yaml"
    config.write_text(
        f"name: demo\ninputs:\n  - {{topic: {a}, pool: PoolA}}\n  - {{topic: {b}, pool: PoolB}}\n"
        "outputs: [{topic: out, pool: Staging}]\ntransforms: []\n"
    )
    assert load_inputs(config) == [IngestInput(a, "PoolA"), IngestInput(b, "PoolB")]
    env = {"ZYNC_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "ZYNC_LAKE": str(lake.root)}
    result = CliRunner().invoke(
        make_app(), ["from-kafka", str(config), "--create-pool", "--exit-after", "1s"], env=env
    )
    assert result.exit_code == 0, result.output
    for pool, topic in (("PoolA", a), ("PoolB", b)):
        rows = pool_rows(lake, pool)
        assert len(rows) == 40
        assert {r["kafka"]["topic"] for r in rows} == {topic}

    bad = tmp_path / "bad.yaml"
    bad.write_text(f"inputs:\n  - {{topic: {a}, pool: P, group: x}}\n")
    with pytest.raises(IngestError, match=r"bad.yaml: inputs\[1\]: unknown key 'group'"):
        load_inputs(bad)
    with pytest.raises(IngestError, match="is an input of two pools"):
        Ingest([IngestInput(a, "P1"), IngestInput(a, "P2")], lake=lake, kafka=kafka)
    missing = CliRunner().invoke(make_app(), ["from-kafka", "-t", "no-such-topic", "-p", "PoolA",
                                              "--exit-after", "1s"], env=env)
    assert missing.exit_code == 1
    assert "topic 'no-such-topic' does not exist" in missing.output


@pytest.mark.spark
def test_shaper_reshapes_filters_and_dead_letters_failing_records(kafka, lake: Lake, spark) -> None:
    topic = name("shaped")
    clients.ensure_topic(kafka, topic, partitions=1)
    values = [{"n": str(i), "drop": i % 10 == 9, "extra": "x"} for i in range(30)]
    values[4]["n"] = "four"  # CAST fails under ANSI SQL: a dead letter of stage shaper
    send(kafka, topic, [(0, f"k{i}".encode(), json.dumps(v).encode()) for i, v in enumerate(values)])
    lake.create_pool("shaped")
    shaper = (
        "-- keep the number only, drop the flagged records\n"
        "SELECT kafka, key, named_struct('n', CAST(value.n AS INT)) AS value\n"
        "FROM batch WHERE NOT value.drop;"
    )
    stats = Ingest([IngestInput(topic, "shaped")], lake=lake, kafka=kafka, spark=spark,
                   options=IngestOptions(exit_after=1.0, shaper=shaper)).run()
    rows = pool_rows(lake, "shaped")
    kept = [r for r in rows if r["deadletter"] is None]
    assert [r["kafka"]["offset"] for r in kept] == [i for i in range(30) if i % 10 != 9 and i != 4]
    assert all(r["value"] == json.dumps({"n": r["kafka"]["offset"]}, separators=(",", ":")) for r in kept)
    dead = [r for r in rows if r["deadletter"] is not None]
    assert [r["kafka"]["offset"] for r in dead] == [4]
    assert dead[0]["deadletter"]["stage"] == "shaper"
    assert "CAST_INVALID_INPUT" in dead[0]["deadletter"]["error"]
    assert json.loads(dead[0]["deadletter"]["value_bytes"]) == values[4]
    pool = lake.open_pool("shaped")
    assert pool.position(topic, 0) == 29  # filtered records are consumed too
    assert pool.spark_types(topic)[1].simpleString() == "struct<n:int>"
    assert stats.dead_letters == 1

    # a shaper that rewrites kafka is refused before anything is committed
    send(kafka, topic, [(0, b"k", b'{"n": "1", "drop": false}')])
    version = pool.version
    rewrite = "SELECT named_struct('topic', kafka.topic, 'partition', kafka.partition, " \
              "'offset', kafka.offset + 1000, 'timestamp', kafka.timestamp) AS kafka, key, value FROM batch"
    with pytest.raises(ShaperError, match="the shaper rewrote `kafka`: it returned a row for .* offset 1030"):
        Ingest([IngestInput(topic, "shaped")], lake=lake, kafka=kafka, spark=spark,
               options=IngestOptions(exit_after=1.0, shaper=rewrite)).run()
    with pytest.raises(ShaperError, match="dropped the `kafka` column"):
        Ingest([IngestInput(topic, "shaped")], lake=lake, kafka=kafka, spark=spark,
               options=IngestOptions(exit_after=1.0, shaper="SELECT key, value FROM batch")).run()
    assert lake.open_pool("shaped").version == version


def test_two_concurrent_processes_on_the_same_input_ingest_exactly_once(kafka, lake: Lake) -> None:
    """Two `from-kafka` processes on one topic and pool, no workers group: both read every
    partition and race to commit the same records; the pool keeps each exactly once."""
    topic = name("shared")
    clients.ensure_topic(kafka, topic, partitions=3)
    lake.create_pool("shared")
    total, chunk = 12_000, 500
    env = dict(os.environ, ZYNC_KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers, ZYNC_LAKE=str(lake.root))
    cmd = [sys.executable, "-m", "zync_tui.commands.ingest", "from-kafka", "-t", topic, "-p", "shared",
           "--max-records", "300", "--interval", "100ms", "--exit-after", "3s", "--quiet"]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True) for _ in range(2)]

    def history() -> tuple[set[str], int]:
        """The processes that committed so far, and how many records the pool holds."""
        table = DeltaTable(str(lake.pool_path("shared")))
        writers = {
            entry.get("zync.pid") or "?" for entry in table.history() if entry.get("zync.app") == "from-kafka"
        }
        return writers, table.to_pyarrow_table(columns=["seqno"]).num_rows

    # One chunk at a time, each waited for until it is in the pool, until both processes have
    # committed (a process that starts late under load still gets records to race for); the rest
    # in one go.
    producer = clients.producer(kafka)
    produced = 0
    deadline = time.monotonic() + 90
    writers: set[str] = set()
    while produced < total:
        size = chunk if len(writers) < 2 else total - produced
        for i in range(produced, produced + size):
            producer.produce(topic, value=json.dumps({"i": i}).encode(), partition=i % 3)
        producer.flush(30)
        produced += size
        writers, held = history()
        while len(writers) < 2 and held < produced:
            assert time.monotonic() < deadline, f"the pool holds {held} of {produced} records"
            assert all(proc.poll() is None for proc in procs), "a process exited early"
            time.sleep(0.05)
            writers, held = history()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err

    rows = pool_rows(lake, "shared")
    keys = [(r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows]
    assert len(keys) == len(set(keys)) == total
    assert [r["seqno"] for r in rows] == list(range(total))
    assert sorted(json.loads(r["value"])["i"] for r in rows) == list(range(total))
    writers, _ = history()
    assert len(writers) == 2, f"both processes should have committed: {writers}"


def test_service_api_start_status_stop(kafka, lake: Lake) -> None:
    """What `zync run` and the console use: start(), status() while running, stop()."""
    topic = name("live")
    clients.ensure_topic(kafka, topic, partitions=2)
    ingest = Ingest([IngestInput(topic, "live")], lake=lake, kafka=kafka,
                    options=IngestOptions(create_pools=True, interval=0.2))
    assert ingest.status().state == "idle"
    commits = []
    ingest.start(on_commit=commits.append)
    try:
        send(kafka, topic, [(i % 2, None, json.dumps({"i": i}).encode()) for i in range(500)])
        deadline = time.monotonic() + 30
        while ingest.status().records < 500:
            assert time.monotonic() < deadline, ingest.status()
            assert ingest.status().state in ("starting", "running"), ingest.status().error
            time.sleep(0.05)
        stats = ingest.status()
        assert stats.state == "running"
        assert stats.last_commit is not None
        assert stats.last_commit.pool == "live"
        pool = stats.pool("live")
        assert pool is not None
        assert [(p.partition, p.lake_offset) for p in pool.partitions] == [(0, 249), (1, 249)]
        assert pool.group == "zync-live"
        assert ingest.running
    finally:
        ingest.stop()
    assert ingest.status().state == "stopped"
    assert not ingest.running
    assert sum(c.records for c in commits) == 500


def test_workers_group_starts_at_the_pools_positions_and_hands_over_on_stop(kafka, lake: Lake) -> None:
    """Two in-process workers of one workers group (issue 8, item 3): partitions start where
    the pool says (never at the group's committed offsets), a worker that stops hands its
    partitions to the other, the pool holds every record once, and the positions are
    mirrored to the workers group itself. (tests/integration/test_workers_group.py: kill -9.)"""
    with pytest.raises(IngestError, match="workers group must be a non-empty"):
        IngestOptions(workers_group=" ")
    topic, group = name("wg"), name("wg")
    clients.ensure_topic(kafka, topic, partitions=2)
    lake.create_pool("wg")

    def records(first: int, n: int) -> list[tuple[int, bytes | None, bytes | None]]:
        return [(i % 2, None, json.dumps({"i": i}).encode()) for i in range(first, first + n)]

    # the pool holds the first 40 records already (an assign-mode run, no mirror) ...
    send(kafka, topic, records(0, 40))
    Ingest([IngestInput(topic, "wg")], lake=lake, kafka=kafka,
           options=IngestOptions(exit_after=1.0, group="")).run()
    assert lake.open_pool("wg").position(topic, 0) == 19
    # ... and the group's committed offsets are ahead of it (within the log, so that
    # librdkafka's offset reset does not hide the mistake): a worker starting there would
    # skip offsets 20-29 of each partition
    mirror = clients.consumer(kafka, group=group)
    mirror.commit(offsets=[TopicPartition(topic, p, 30) for p in (0, 1)], asynchronous=False)
    mirror.close()
    send(kafka, topic, records(40, 60))

    options = IngestOptions(workers_group=group, interval=0.2, max_records=50, pause_gc=False)
    workers = [Ingest([IngestInput(topic, "wg")], lake=lake, kafka=kafka, options=options) for _ in range(2)]

    def owned(worker: Ingest) -> set[int]:
        pool = worker.status().pool("wg")
        return {p.partition for p in pool.partitions} if pool else set()

    def wait(condition, what: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            for w in workers:
                assert w.status().state in ("starting", "running", "stopped"), w.status().error
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {[w.status() for w in workers]}"
            time.sleep(0.1)

    def pool_keys() -> list[tuple[int, int]]:
        return [(r["kafka"]["partition"], r["kafka"]["offset"]) for r in pool_rows(lake, "wg")]

    first, second = workers
    try:
        for w in workers:
            w.start()
        wait(lambda: owned(first) and owned(second), "both workers to own a partition")
        assert owned(first) | owned(second) == {0, 1}
        wait(lambda: len(pool_keys()) == 100, "the first 100 records")
        first.stop()
        assert first.status().state == "stopped"
        send(kafka, topic, records(100, 100))
        wait(lambda: owned(second) == {0, 1} and len(pool_keys()) == 200, "the survivor to take over")
        pool = second.status().pool("wg")
        assert pool is not None
        assert pool.group == group
    finally:
        for w in workers:
            w.stop()
    assert second.status().state == "stopped", second.status().error

    keys = pool_keys()
    assert len(keys) == len(set(keys)) == 200
    rows = pool_rows(lake, "wg")
    assert sorted(json.loads(r["value"])["i"] for r in rows) == list(range(200))
    assert [r["seqno"] for r in rows] == list(range(200))
    # the positions were mirrored to the workers group, by its members
    check = clients.consumer(kafka, group=group)
    committed = check.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    check.close()
    assert [(c.partition, c.offset) for c in committed] == [(0, 100), (1, 100)]

    # --exit-after counts from the group's assignment, not from the start (joining a group
    # takes a moment): a lone worker of a new group still reads everything, then exits
    lake.create_pool("wg2")
    stats = Ingest([IngestInput(topic, "wg2")], lake=lake, kafka=kafka,
                   options=IngestOptions(workers_group=name("wg"), exit_after=1.0)).run()
    assert stats.records == 200
    assert stats.state == "stopped"


def test_spark_master_option_reaches_spark(lake: Lake, tmp_path: Path) -> None:
    """`--spark-master` wins over $ZYNC_SPARK_MASTER (for `from-kafka --shaper` and
    `query`): an unreachable master is named in a one-line error before any work."""
    lake.create_pool("sm")
    shaper = tmp_path / "shaper.sql"
    shaper.write_text("SELECT * FROM batch\n")
    env = dict(os.environ, ZYNC_HOME=str(tmp_path / "home"), ZYNC_LAKE=str(lake.root),
               ZYNC_SPARK_MASTER="spark://127.0.0.1:2", ZYNC_KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1")
    for module, args in (("ingest", ["from-kafka", "-t", "t", "-p", "sm", "--shaper", str(shaper)]),
                         ("query", ["query", "SELECT 1"])):
        base = [sys.executable, "-m", f"zync_tui.commands.{module}"]
        out = subprocess.run([*base, *args, "--spark-master", "spark://127.0.0.1:1"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1, out
        assert "cannot reach the Spark master spark://127.0.0.1:1" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def test_a_debezium_json_topic_types_before_and_after_from_later_batches(kafka, lake: Lake) -> None:
    """A first batch of creates has ``before`` null in every event, and a batch holding
    only a delete has ``after`` null: neither fixes the field as text. The pool records
    what it has not seen a value of as NullType (read as text meanwhile), and a later
    batch's rows type it, so ``value.after.id`` and ``value.before.id`` work in SQL."""
    from pyspark.sql import types as T

    from tests.fixtures import wide

    topic = name("dbz-json")
    changes = [wide.change(3, n, columns=6) for n in range(8)]  # c×5, u, u, d
    for batch in (changes[:5], changes[5:7], changes[7:]):
        send(kafka, topic, [(0, json.dumps(k).encode(), json.dumps(v).encode()) for k, v in batch])
        Ingest([IngestInput(topic, "dbz")], lake=lake, kafka=kafka,
               options=IngestOptions(exit_after=1.0, create_pools=True)).run()  # fmt: skip
        value = lake.open_pool("dbz").spark_types(topic)[1]
        assert isinstance(value, T.StructType)
        assert isinstance(value["after"].dataType, T.StructType)
    assert isinstance(value["before"].dataType, T.StructType)
    assert value["before"].dataType.fieldNames()[0] == "id"
