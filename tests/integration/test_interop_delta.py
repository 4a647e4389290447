"""Pools are standard Delta tables, both ways.

* A raw pool filled by from-kafka and a staging pool filled by an ETL pass read the same
  rows through delta-spark (``format("delta")`` and ``DeltaTable.forPath``), delta-rs
  and polars.
* After a user compacts and vacuums both pools with delta-spark (``OPTIMIZE``, then
  ``VACUUM ... RETAIN 0 HOURS``), from-kafka, the ETL and to-kafka carry on exactly once.

The invoice scenario (demo/invoices, topics renamed per test) runs through the CLI, in
this process, against the session's broker, registry and Spark.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from engine.lake.pools import Lake
from tests.integration.test_run import EXPECTED, demo_driver, invoice_scenario, plain
from tests.integration.test_to_kafka import profiles, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


@dataclass
class Pipeline:
    """The invoice scenario driven through `zync from-kafka`, `zync etl`, `zync to-kafka`."""

    demo: Any
    scenario: Any
    lake: Lake
    kafka: Any
    registry: Any
    published: Counter[str] = field(default_factory=Counter)  # records per input topic

    def cli(self, *args: str) -> str:
        from zync_tui.cli import app

        result = CliRunner().invoke(app, [*args, "--lake", str(self.lake.root)])
        assert result.exit_code == 0, result.output
        return result.output

    def publish(self, batch: int) -> None:
        from demo.scenario import read_batch

        records = read_batch(self.demo.batch_paths()[batch - 1])
        self.demo.publish(records)
        self.published.update(r.topic for r in records)

    def from_kafka(self) -> None:
        self.cli("from-kafka", str(self.scenario.config), "--exit-after", "1s", "-q")

    def etl(self) -> str:
        return self.cli("etl", str(self.scenario.config))

    def to_kafka(self) -> str:
        return self.cli("to-kafka", str(self.scenario.config))


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory, broker, registry, spark) -> Iterator[Pipeline]:
    """Batches 1 and 2 of the scenario through from-kafka and an ETL pass each (two
    commits per pool, at least), then to-kafka. The tests below go on from there, in
    file order."""
    tmp_path = tmp_path_factory.mktemp("interop")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZYNC_KAFKA_BOOTSTRAP_SERVERS", broker.address)
        patch.setenv("ZYNC_REGISTRY_URL", registry.url)
        patch.setenv("ZYNC_HOME", str(tmp_path / "home"))
        kafka, reg = profiles(broker, registry)
        scenario = invoice_scenario(tmp_path)
        demo = demo_driver(scenario, tmp_path / "lake", kafka, reg)
        pipeline = Pipeline(demo, scenario, Lake(tmp_path / "lake"), kafka, reg)
        for batch in (1, 2):
            pipeline.publish(batch)
            pipeline.from_kafka()
            pipeline.etl()
        pipeline.to_kafka()
        yield pipeline


# ----------------------------------------------------------------------------- reading


COLUMNS = {  # name: (Spark SQL, polars expression) of every row's flat, comparable form
    "seqno": ("seqno", pl.col("seqno")),
    "topic": ("kafka.topic", pl.col("kafka").struct.field("topic")),
    "partition": ("kafka.partition", pl.col("kafka").struct.field("partition").cast(pl.Int32)),
    "offset": ("kafka.offset", pl.col("kafka").struct.field("offset")),
    "timestamp": (
        "unix_micros(kafka.timestamp)",
        pl.col("kafka").struct.field("timestamp").dt.epoch("us"),
    ),
    "key": ("key", pl.col("key")),
    "value": ("value", pl.col("value")),
    "dead_stage": ("deadletter.stage", pl.col("deadletter").struct.field("stage")),
    "etl": ("marker.etl", pl.col("marker").struct.field("etl")),
    "rule": ("marker.rule", pl.col("marker").struct.field("rule")),
    "marker_topic": ("marker.topic", pl.col("marker").struct.field("topic")),
    "marker_partition": (
        "marker.partition",
        pl.col("marker").struct.field("partition").cast(pl.Int32),
    ),
    "marker_offset": ("marker.offset", pl.col("marker").struct.field("offset")),
    "status": ("marker.status", pl.col("marker").struct.field("status")),
}


def canonical(frame: pl.DataFrame) -> pl.DataFrame:
    """Every row of a pool (read by polars or delta-rs), flat and comparable, by seqno."""
    return frame.select(expr.alias(name) for name, (_, expr) in COLUMNS.items()).sort("seqno")


def spark_canonical(df: Any) -> pl.DataFrame:
    """The same flat form of a pool read by delta-spark (flattened in Spark: pyspark's
    toArrow refuses a NULL struct whose fields are NOT NULL, as a marker row's kafka)."""
    flat = df.selectExpr(*(f"{sql} AS {name}" for name, (sql, _) in COLUMNS.items()))
    frame = pl.from_arrow(flat.toArrow())
    assert isinstance(frame, pl.DataFrame)
    return frame.with_columns(
        pl.col("partition").cast(pl.Int32), pl.col("marker_partition").cast(pl.Int32)
    ).sort("seqno")


def read_by_every_reader(spark: Any, path: Path) -> dict[str, pl.DataFrame]:
    from delta.tables import DeltaTable as SparkDeltaTable
    from deltalake import DeltaTable

    from engine.lake.delta import spark_path

    uri = spark_path(str(path))
    by_delta_rs = pl.from_arrow(DeltaTable(str(path)).to_pyarrow_table())
    assert isinstance(by_delta_rs, pl.DataFrame)
    return {
        "delta-spark format(delta)": spark_canonical(spark.read.format("delta").load(uri)),
        "delta-spark DeltaTable.forPath": spark_canonical(
            SparkDeltaTable.forPath(spark, uri).toDF()
        ),
        "delta-rs": canonical(by_delta_rs),
        "polars": canonical(pl.read_delta(str(path))),
    }


def assert_readers_agree(spark: Any, path: Path) -> pl.DataFrame:
    frames = read_by_every_reader(spark, path)
    first_name, first = next(iter(frames.items()))
    for name, frame in frames.items():
        assert frame.equals(first), f"{name} and {first_name} differ:\n{frame}\n{first}"
    return first


def assert_raw_exactly_once(pipeline: Pipeline) -> None:
    """Every offset produced to each input topic is in the raw pool exactly once."""
    rows = canonical(pl.read_delta(str(pipeline.lake.pool_path("Raw"))))
    for topic, count in pipeline.published.items():
        offsets = rows.filter(pl.col("topic") == topic)["offset"].to_list()
        assert sorted(offsets) == list(range(count)), topic


def staged_outputs(pipeline: Pipeline) -> list[tuple[int, Any, Any]]:
    """(offset, key, value) of the staging pool's outputs, by offset."""
    import json

    rows = canonical(pl.read_delta(str(pipeline.lake.pool_path("Staging")))).filter(
        pl.col("topic") == pipeline.scenario.output
    )
    return sorted(
        (r["offset"], json.loads(r["key"]), None if r["value"] is None else json.loads(r["value"]))
        for r in rows.to_dicts()
    )


def assert_outputs_exactly_once(pipeline: Pipeline) -> None:
    """Staging holds each expected output once, at offsets 0..n-1; the output topic
    (read_committed) holds each once, in offset order."""
    staged = staged_outputs(pipeline)
    assert [offset for offset, _, _ in staged] == list(range(len(EXPECTED)))
    as_text = sorted(repr((k, plain(v))) for _, k, v in staged)
    assert as_text == sorted(repr(e) for e in EXPECTED)
    got = read_topic(
        pipeline.kafka, pipeline.scenario.output, registry=pipeline.registry, timeout=60
    )
    assert [(r.key, plain(r.value)) for r in got] == [(k, plain(v)) for _, k, v in staged]


# ----------------------------------------------------------------------------- tests


def test_pools_written_by_zync_read_the_same_through_every_delta_reader(spark, pipeline) -> None:
    raw = assert_readers_agree(spark, pipeline.lake.pool_path("Raw"))
    assert raw.height == sum(pipeline.published.values())
    assert raw["seqno"].to_list() == list(range(raw.height))
    assert_raw_exactly_once(pipeline)

    staging = assert_readers_agree(spark, pipeline.lake.pool_path("Staging"))
    outputs = staging.filter(pl.col("topic").is_not_null())
    markers = staging.filter(pl.col("etl").is_not_null())
    assert outputs.height > 0
    assert sorted(outputs["offset"].to_list()) == list(range(outputs.height))
    # each input record consumed once at most (some may wait for their partner)
    assert 0 < markers.height <= raw.height
    assert markers.select("marker_topic", "marker_offset").is_unique().all()

    # and zync's own typed view reads the same rows
    from engine.lake.query import query

    df, _ = query(spark, pipeline.lake, "SELECT seqno, value.after.ID AS id FROM Raw")
    assert sorted(r.seqno for r in df.collect()) == raw["seqno"].to_list()


def test_optimize_and_vacuum_by_delta_spark_then_everything_carries_on_exactly_once(
    spark, pipeline
) -> None:
    from engine.lake.delta import spark_path

    before = {
        name: set(pipeline.lake.pool_path(name).rglob("*.parquet")) for name in ("Raw", "Staging")
    }
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        for name in ("Raw", "Staging"):
            uri = spark_path(str(pipeline.lake.pool_path(name)))
            metrics = spark.sql(f"OPTIMIZE delta.`{uri}`").first()["metrics"]
            assert metrics["numFilesRemoved"] > 1, name
            # LITE: the files the Delta log says were removed (what OPTIMIZE replaced),
            # without listing the directory (a full VACUUM takes minutes on 2 cores)
            spark.sql(f"VACUUM delta.`{uri}` LITE RETAIN 0 HOURS").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    for name, files in before.items():
        left = set(pipeline.lake.pool_path(name).rglob("*.parquet"))
        assert not files & left, f"VACUUM left files of {name} that OPTIMIZE replaced"

    pipeline.publish(3)
    pipeline.publish(4)
    pipeline.from_kafka()
    pipeline.etl()
    pipeline.to_kafka()

    assert_raw_exactly_once(pipeline)
    assert_outputs_exactly_once(pipeline)

    # nothing new: another round changes nothing, delivers nothing
    versions = {name: pipeline.lake.open_pool(name).version for name in ("Raw", "Staging")}
    pipeline.from_kafka()
    pipeline.etl()
    pipeline.to_kafka()
    assert {n: pipeline.lake.open_pool(n).version for n in versions} == versions
    assert_outputs_exactly_once(pipeline)
    for name in ("Raw", "Staging"):  # Spark's compacted files read the same everywhere
        assert_readers_agree(spark, pipeline.lake.pool_path(name))


def test_a_staging_pool_of_an_earlier_zync_is_upgraded_so_delta_spark_can_optimize_it(
    spark, tmp_path: Path
) -> None:
    """Pools once declared kafka.topic/partition/offset NOT NULL; delta-spark enforces
    that even on marker rows, whose kafka is NULL (delta-io/delta#860)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from engine.etl.markers import marker_rows
    from engine.lake import delta
    from engine.lake.pool_record import POOL_SCHEMA, record_rows
    from engine.lake.pools import STAGING, Pool
    from tests.fixtures.legacy_pools import legacy_description

    lake = Lake(tmp_path / "lake")
    path = lake.pool_path("Staging")
    path.mkdir(parents=True)
    DeltaTable.create(  # as earlier versions made it
        str(path), schema=POOL_SCHEMA, name="Staging",
        description=legacy_description(STAGING),
    )
    old = Pool("Staging", path, delta.open_table(path))
    for offset in (0, 1):
        outputs = record_rows(
            [{"topic": "Out", "partition": 0, "offset": offset, "timestamp": None}],
            [f'{{"ID": {offset}}}'],
            [f'{{"ID": {offset}, "n": "x"}}'],
        )
        markers = marker_rows(
            "e",
            pa.table({"topic": ["In"], "partition": [0], "offset": [offset], "rule": ["r"],
                      "status": ["processed"]}),
        )
        old.commit_rows(pa.concat_tables([outputs, markers]), expect_version=old.version)
    rows = canonical(pl.read_delta(str(path)))
    assert old.version == 2

    pool = lake.open_pool("Staging")
    assert pool.version == 3  # one metadata-only commit
    assert all(f.nullable for f in delta.arrow_schema(pool.table).field("kafka").type)
    assert pool.meta == old.meta
    assert lake.open_pool("Staging").version == 3  # once
    assert canonical(pl.read_delta(str(path))).equals(rows)

    uri = delta.spark_path(str(path))
    metrics = spark.sql(f"OPTIMIZE delta.`{uri}`").first()["metrics"]
    assert metrics["numFilesRemoved"] == 2
    assert assert_readers_agree(spark, path).equals(rows)
    pool.refresh()
    pool.commit_rows(  # and zync goes on writing it
        record_rows([{"topic": "Out", "partition": 0, "offset": 2, "timestamp": None}], ["{}"], ["{}"]),
        expect_version=pool.version,
    )
    assert assert_readers_agree(spark, path).height == rows.height + 1
