"""Every exactly-once guarantee of a local lake, on an ``s3://`` lake (moto's server):
the invoice scenario (outputs brought to the driver, and written by the Spark executors
through s3a), a pass that loses the race re-plans, two concurrent `zync etl` processes,
and `zync from-kafka` killed with SIGKILL at random moments."""

from __future__ import annotations

import pytest

import engine.etl.evaluate
import engine.etl.evaluate_rows
from engine.lake.pools import Lake
from tests.integration import test_etl_concurrency, test_etl_invoices

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow(seconds=150), pytest.mark.s3]


@pytest.mark.parametrize("writer", ["rows", "executors"])
def test_invoice_scenario_on_s3(spark, s3_url: str, moto, writer: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small warm passes evaluated row by row (written by the driver through delta-rs),
    and every pass by Spark with its outputs written by the executors through s3a."""
    if writer == "executors":
        monkeypatch.setattr(engine.etl.evaluate_rows, "ROWWISE_ROWS", 0)
        monkeypatch.setattr(engine.etl.evaluate, "DRIVER_OUTPUT_ROWS", -1)
    lake = Lake(s3_url)
    test_etl_invoices.test_invoice_scenario_batch_by_batch(spark, lake, writer)
    keys = moto.keys(f"{s3_url}/Staging")
    if writer == "executors":  # the executors wrote straight into the staging table on S3
        assert any("/etl-" in key and key.endswith(".parquet") for key in keys)
    assert not any("_temporary" in key or key.endswith("_SUCCESS") for key in keys)


def test_a_pass_that_loses_the_race_replans_on_s3(spark, s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    test_etl_concurrency.test_a_pass_that_loses_the_race_replans(spark, Lake(s3_url), monkeypatch)


def test_two_concurrent_etl_processes_never_duplicate_on_s3(spark, s3_url: str) -> None:
    lake = Lake(s3_url)

    class AtUrl(Lake):
        """The lake the subprocesses get (``--lake s3://...``)."""

        @property
        def root(self):  # type: ignore[override]
            return s3_url

    test_etl_concurrency.test_two_concurrent_etl_processes_never_duplicate(spark, AtUrl(lake.location))
