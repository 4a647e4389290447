"""The invoice scenario's driver: stack, pools, batches, and a headless run.

``demo/invoices`` holds Debezium change events of two tables in four batches and the ETL
configuration that turns them into denormalized invoices (``NewInvoices``). :class:`Demo`
prepares everything the scenario needs — the embedded broker and registry
(:func:`engine.api.dev_up`, unless profiles are given), the ``Raw`` and ``Staging`` pools,
one Avro schema per topic — and publishes one batch at a time with
:meth:`Demo.publish_next`, so a newcomer watches records flow through the console.

Each record's Kafka timestamp is its Debezium ``source.ts_ms``, as if the database had
written it at that moment: ages, expiry and lag in the console are then the scenario's own
times, the same on every run.

:func:`run_demo` does the whole scenario headless (``zync demo --no-tui``): all four
batches through from-kafka, ETL and to-kafka until Staging and the ``NewInvoices`` topic
hold the 8 outputs (read by :class:`demo.scenario_outputs.ScenarioOutputs`).

Nothing happens at import time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demo.scenario_outputs import OUTPUT_TOPIC, STAGING_POOL, ScenarioOutputs
from engine.api import (
    RAW,
    STAGING,
    Format,
    InputRecord,
    KafkaProfile,
    Lake,
    Observer,
    OutgoingRecord,
    Pipeline,
    Pool,
    ProduceOptions,
    RegistryProfile,
    RegistrySchemas,
    TableSnapshot,
    ZyncError,
    avro_record_name,
    delete_topics,
    dev_up,
    encode_records,
    ensure_topic,
    get_spark,
    infer_avro_schema,
    load_config,
    load_kafka_profile,
    load_registry_profile,
    load_spark_settings,
    prepare_records,
    record_count,
    register_schemas,
    resolve_lake,
    send,
    topic_watermarks,
    zync_home,
)

if TYPE_CHECKING:
    from engine.api import Spark

#: The scenario's files (installed with the package).
DEMO_DIR = Path(__file__).resolve().parent / "invoices"
RAW_POOL = "Raw"
#: The demo's to-kafka takes over its output topics (its own, on its embedded broker)
#: when another staging pool wrote them last: a demo lake made anew beside them.
TAKE_OVER = True
EXPECTED_OUTPUTS = 8
#: The table etl.yaml keeps from the outputs, and the invoices it holds at the end.
TABLE = "invoices"
EXPECTED_ROWS = 4


class DemoError(ZyncError):
    """The demo cannot run; the message says why and what to do."""


@dataclass(frozen=True)
class DemoRecord:
    topic: str
    key: Any  # JSON data, as in the batch file
    value: Any

    @property
    def timestamp_ms(self) -> int | None:
        """Debezium's ``source.ts_ms`` (the Kafka timestamp the demo gives the record)."""
        try:
            return int(self.value["source"]["ts_ms"])
        except (TypeError, KeyError, ValueError):
            return None


@dataclass
class DemoResult:
    """Where the headless demo ended."""

    staging: list[dict[str, Any]] = field(default_factory=list)
    topic: list[dict[str, Any]] = field(default_factory=list)
    table: TableSnapshot | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def read_batch(path: Path) -> list[DemoRecord]:
    """The records of one batch file (JSON lines ``{"topic", "key", "value"}``)."""
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            records.append(DemoRecord(data["topic"], data.get("key"), data.get("value")))
        except (ValueError, KeyError, TypeError) as exc:
            raise DemoError(f"{path} line {number}: not a demo record ({exc})") from None
    return records


class Demo:
    """The invoice scenario on one lake, broker and registry.

    ``kafka``/``registry``: profiles to use (tests pass their own services); None loads
    them from the zync home after starting the embedded stack when ``start_stack``.
    ``lake_root``: None uses ``<zync home>/demo/lake``, the demo's own lake, which is
    cleared when the broker holds none of the demo's records (a restarted in-memory
    broker), so lake and topics always tell the same story. The other way round, a new
    lake beside output topics an earlier demo lake delivered to (that lake deleted while
    the embedded broker kept its topics): the output topics are deleted, and to-kafka
    delivers the new lake's outputs into them from the first. The demo's to-kafka takes
    its output topics over (:data:`TAKE_OVER`): without that, it refused topics another
    staging pool had written, and the demo showed to-kafka failed.
    """

    def __init__(
        self,
        *,
        lake_root: str | Path | None = None,
        start_stack: bool = True,
        kafka: KafkaProfile | None = None,
        registry: RegistryProfile | None = None,
        directory: Path = DEMO_DIR,
        home: Path | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.start_stack = start_stack
        self.kafka = kafka
        self.registry = registry
        self.home = home
        self._lake_root = lake_root  # a directory or s3://BUCKET/PREFIX
        self._lake: Lake | None = None
        self._schemas: dict[str, tuple[Any, Any]] = {}  # topic: (key, value) Avro schemas (JSON data)
        self._registry_client: RegistrySchemas | None = None
        self.published = 0

    # -- files --------------------------------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.directory / "etl.yaml"

    def batch_paths(self) -> list[Path]:
        paths = sorted(self.directory.glob("batch*.jsonl"), key=lambda p: int("".join(c for c in p.stem if c.isdigit()) or 0))
        if not paths:
            raise DemoError(f"no demo batches in {self.directory} (batch1.jsonl …)")
        return paths

    def batches(self) -> list[list[DemoRecord]]:
        return [read_batch(p) for p in self.batch_paths()]

    def batches_left(self) -> int:
        return len(self.batch_paths()) - self.published

    @property
    def lake(self) -> Lake:
        if self._lake is None:
            if self._lake_root is not None:
                self._lake = Lake(resolve_lake(self._lake_root))
            else:
                self._lake = Lake((self.home or zync_home()) / "demo" / "lake")
        return self._lake

    # -- set-up ---------------------------------------------------------------------------

    def prepare(self) -> list[str]:
        """Start the stack (if asked), load profiles, register schemas, create topics and
        pools. Idempotent; resumes after batches a running broker already holds."""
        notes: list[str] = []
        if not self.config_path.exists():
            raise DemoError(f"the demo scenario is missing: {self.config_path} does not exist")
        config = load_config(self.config_path)
        if self.kafka is None or self.registry is None:
            if self.start_stack:
                report = dev_up(home=self.home)
                notes.extend(report.notes)
            self.kafka = self.kafka or load_kafka_profile(home=self.home)
            self.registry = self.registry or load_registry_profile(home=self.home)
        held = 0
        for endpoint in config.inputs:
            ensure_topic(self.kafka, endpoint.topic)
            held += self._records_in(endpoint.topic)
        where = self.lake.location
        if held == 0 and self._lake_root is None and where.exists():
            where.remove_tree()
            notes.append(f"cleared the demo lake {where}: the broker holds no demo records")
        self.published = self._batches_held(held)
        if self.published:
            notes.append(f"the broker already holds batches 1..{self.published}: resuming after them")
        where.make_dirs()
        new_staging = {e.pool for e in config.outputs if not self.lake.exists(e.pool)}
        written = [e.topic for e in config.outputs if e.pool in new_staging and self._written(e.topic)]
        if written:
            deleted = delete_topics(self.kafka, written)
            notes.append(
                f"deleted the output topic(s) {', '.join(deleted)}: an earlier demo lake "
                f"delivered to them, and this lake's outputs go there from the first"
            )
        pools = {endpoint.pool: RAW for endpoint in config.inputs}
        pools.update({endpoint.pool: STAGING for endpoint in config.outputs})
        for name, kind in pools.items():
            self.lake.create_pool(name, kind, exist_ok=True)
        notes.append(f"pools {', '.join(pools)} ready in {where}")
        self._register_schemas()
        return notes

    def _records_in(self, topic: str) -> int:
        assert self.kafka is not None
        marks = topic_watermarks(self.kafka, topic)
        return sum(high - low for low, high in marks.values())

    def _written(self, topic: str) -> bool:
        """Whether ``topic`` exists and holds anything."""
        try:
            return self._records_in(topic) > 0
        except ZyncError:  # TopicNotFound: nothing written
            return False

    def _batches_held(self, held: int) -> int:
        total = 0
        for index, batch in enumerate(self.batches()):
            total += len(batch)
            if held < total:
                return index
        return len(self.batch_paths())

    def _registry(self) -> RegistrySchemas:
        if self._registry_client is None:
            assert self.registry is not None
            self._registry_client = RegistrySchemas(self.registry)
        return self._registry_client

    def _register_schemas(self) -> None:
        """One Avro key and value schema per topic, inferred from every batch at once, so
        the schema never has to evolve while the demo runs (as a Debezium connector's)."""
        by_topic: dict[str, list[DemoRecord]] = {}
        for batch in self.batches():
            for record in batch:
                by_topic.setdefault(record.topic, []).append(record)
        for topic, records in by_topic.items():
            key = infer_avro_schema([r.key for r in records], name=avro_record_name(topic, "key"))
            values = [r.value for r in records if r.value is not None]
            # Debezium's `before` has the row's type, like `after` (a connector's schema
            # says so even while every `before` seen so far is null).
            values += [
                {**v, "before": v["after"]}
                for v in values
                if isinstance(v, dict) and isinstance(v.get("after"), dict) and "before" in v
            ]
            value = infer_avro_schema(values, name=avro_record_name(topic, "value"))
            self._schemas[topic] = (key, value)

    # -- publishing -----------------------------------------------------------------------

    def publish_next(self) -> str:
        """Publish the next batch; returns what was sent, in words."""
        paths = self.batch_paths()
        if self.published >= len(paths):
            return "all demo batches are published"
        number = self.published + 1
        records = read_batch(paths[self.published])
        self.publish(records)
        self.published = number
        topics = sorted({r.topic for r in records})
        return f"published batch {number} of {len(paths)}: {len(records)} records to {', '.join(topics)}"

    def publish(self, records: Iterable[DemoRecord]) -> None:
        """Send records (Avro, Confluent wire format), each topic's in order, with their
        Debezium ``source.ts_ms`` as Kafka timestamp."""
        assert self.kafka is not None
        if not self._schemas:
            self._register_schemas()
        grouped: dict[str, list[DemoRecord]] = {}
        for record in records:
            grouped.setdefault(record.topic, []).append(record)
        outgoing: list[OutgoingRecord] = []
        for topic, items in grouped.items():
            key_schema, value_schema = self._schemas.get(topic, (None, None))
            options = ProduceOptions(topic=topic, format=Format.AVRO, key_schema=key_schema, value_schema=value_schema)
            inputs = [InputRecord(f"demo {topic}", i + 1, r.key, r.value) for i, r in enumerate(items)]
            prepared = prepare_records(inputs, options, self._registry())
            register_schemas(prepared, self._registry())
            for (key, value), record in zip(encode_records(prepared), items, strict=True):
                stamp = record.timestamp_ms or 0  # 0: librdkafka's "now"
                outgoing.append(OutgoingRecord(topic, key, value, stamp))
        report = send(self.kafka, outgoing)
        if not report.ok:
            errors, left = report.errors, report.unacknowledged
            raise DemoError(f"the broker did not take the batch: {errors[0] if errors else f'{left} records unacknowledged'}")

    # -- results --------------------------------------------------------------------------

    def outputs(self) -> ScenarioOutputs:
        """The scenario's outputs where they land: in Staging and on the output topic."""
        return ScenarioOutputs(self.lake, self.kafka, self._registry)

    def staging_outputs(self, topic: str = OUTPUT_TOPIC) -> list[dict[str, Any]]:
        """The output records of ``topic`` in Staging, by offset (through delta-rs)."""
        return self.outputs().in_staging(topic)

    def topic_outputs(self, topic: str = OUTPUT_TOPIC, timeout: float = 5.0) -> list[dict[str, Any]]:
        """The records on the Kafka topic, decoded (key and value as JSON-able data)."""
        return self.outputs().on_topic(topic, timeout)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.5) -> None:
    """Poll ``predicate`` until it holds; :class:`DemoError` naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except ZyncError:
            pass
        if time.monotonic() >= deadline:
            raise DemoError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def make_pipeline(demo: Demo, *, spark: Callable[[], Spark] | None = None) -> Pipeline:
    """The demo's :class:`engine.api.Pipeline` (from-kafka, ETL and to-kafka loops)."""
    return Pipeline(
        demo.config_path, demo.lake, kafka=demo.kafka, registry=demo.registry, spark=spark, take_over=TAKE_OVER
    )


def _spark(master: str | None) -> Spark:
    return get_spark(load_spark_settings(master))


def run_demo(
    demo: Demo | None = None,
    *,
    timeout: float = 300.0,
    progress: Callable[[str], None] | None = None,
    spark_master: str | None = None,
) -> DemoResult:
    """The whole scenario headless: prepare, start the loops, publish every batch (each
    once the previous one reached the lake), wait until Staging and the output topic hold
    the 8 outputs, stop the loops. ``spark_master``: where the ETL runs (default: the
    configured master, else ``local[*]``). Raises :class:`DemoError` on a timeout."""
    say = progress or (lambda text: None)
    started = time.monotonic()
    demo = demo or Demo()
    result = DemoResult()
    for note in demo.prepare():
        say(note)
    pipeline = make_pipeline(demo, spark=lambda: _spark(spark_master))
    pipeline.start()
    say("loops started: " + ", ".join(pipeline.services))
    try:
        raw = Lake(demo.lake.location).open_pool(RAW_POOL)
        sent = sum(len(b) for b in demo.batches()[: demo.published])
        while demo.batches_left():
            say(demo.publish_next())
            sent += len(read_batch(demo.batch_paths()[demo.published - 1]))

            def ingested(expected: int = sent) -> bool:
                raw.refresh()
                return _raw_records(raw) >= expected

            wait_for(ingested, timeout, f"from-kafka to bring {sent} records into {RAW_POOL}")
        wait_for(
            lambda: len(demo.staging_outputs()) >= EXPECTED_OUTPUTS,
            timeout,
            f"{EXPECTED_OUTPUTS} outputs in {STAGING_POOL}",
        )
        say(f"{STAGING_POOL} holds the {EXPECTED_OUTPUTS} outputs")
        wait_for(
            lambda: len(demo.topic_outputs()) >= EXPECTED_OUTPUTS,
            timeout,
            f"{EXPECTED_OUTPUTS} records on the {OUTPUT_TOPIC} topic",
        )
        say(f"the {OUTPUT_TOPIC} topic holds the {EXPECTED_OUTPUTS} outputs")
        observer = Observer(demo.lake, etls=[pipeline.config])

        def applied() -> bool:
            result.table = next(t for t in observer.tables().tables if t.name == TABLE)
            return result.table.lag == 0 and result.table.rows == EXPECTED_ROWS

        wait_for(applied, timeout, f"the {TABLE} table to hold the {EXPECTED_ROWS} invoices")
        assert result.table is not None
        say(
            f"the {TABLE} table holds the {EXPECTED_ROWS} invoices (its version "
            f"{result.table.version}, staging version {result.table.applied} applied)"
        )
    finally:
        pipeline.stop()
    result.staging = demo.staging_outputs()
    result.topic = demo.topic_outputs()
    result.seconds = time.monotonic() - started
    return result


def _raw_records(pool: Pool) -> int:
    """Records and dead letters the pool holds (markers excluded)."""
    return record_count(pool)
