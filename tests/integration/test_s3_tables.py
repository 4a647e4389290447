"""Tables on an ``s3://`` lake (moto's server, issue 37): the apply loop killed with
SIGKILL at random moments, two apply loops racing, and readers that are not zync
(delta-spark through s3a, delta-rs, polars) reading the tables, as of every staging
version too."""

from __future__ import annotations

import threading
from pathlib import Path

import polars as pl
import pytest

from engine.api import Applier, Lake, load_config, tables_as_of_staging
from engine.lake.delta import open_table
from engine.lake.query import query
from tests.integration.test_tables_crash import (
    CONFIG,
    FIELDS,
    Stager,
    check_tables,
    kill_9_while_staging,
    rows,
    table,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow(seconds=70), pytest.mark.s3]


def test_kill_9_at_random_moments_on_s3(s3_url: str, tmp_path: Path) -> None:
    kill_9_while_staging(Lake(s3_url), tmp_path, commits=60, min_kills=4, seed=20240638)


def test_tables_on_s3_read_by_every_reader_and_as_of_staging_versions(
    spark, s3_url: str, tmp_path: Path
) -> None:
    lake = Lake(s3_url)
    config = tmp_path / "s3.yaml"
    config.write_text(CONFIG)
    stager = Stager(lake, keys=300, seed=11)
    etl = load_config(config)
    # two apply loops racing for the tables, one staging version per table commit
    racers = [Applier(etl, lake, versions_per_commit=1) for _ in range(2)]
    for _ in range(6):
        for _ in range(3):
            stager.commit(50)
        threads = [threading.Thread(target=r.run_once) for r in racers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    Applier(etl, lake).run_once()
    check_tables(lake, stager)

    where = lake.location.join("current_rows")
    by_spark = spark.read.format("delta").load(where.spark_uri).collect()
    by_polars = pl.read_delta(where.uri, storage_options=where.storage_options()).to_dicts()
    by_rs = rows(table(lake, "current_rows"))
    key = lambda r: r["k"]  # noqa: E731
    as_tuples = lambda found: sorted(tuple(r[f] for f in FIELDS) for r in found)  # noqa: E731
    assert as_tuples([r.asDict() for r in by_spark]) == as_tuples(by_polars) == as_tuples(by_rs)
    assert sorted(map(key, by_rs)) == sorted(stager.state)

    for version, state in list(stager.states.items())[::3]:  # each costs S3 round trips
        at = {t.name: t.version for t in tables_as_of_staging(lake, version)}
        found = open_table(where, version=at["current_rows"])
        got = {r["k"]: {f: r[f] for f in FIELDS} for r in rows(found)}
        assert got == state, version

    df, _ = query(
        spark,
        lake,
        "SELECT (SELECT count(*) FROM current_rows) AS n, "
        "(SELECT count(*) FROM row_history WHERE is_current) AS current",
    )
    assert tuple(df.first()) == (len(stager.state), len(stager.state))
