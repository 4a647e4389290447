"""Config errors that need the lake or Spark fail before anything is written, naming
the file, the rule and the offending text."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from engine.etl.config import EtlConfigError
from engine.etl.config_file import parse_config
from engine.etl.run import EtlRunner
from tests.integration.test_etl_support import DEMO, append_events, demo_batch, make_pools
from zync_tui.commands.etl import register

pytestmark = [pytest.mark.integration, pytest.mark.spark]

GOOD = (DEMO / "etl.yaml").read_text()


def _fails(lake, spark, text: str) -> str:
    staging = lake.open_pool("Staging")
    raw = lake.open_pool("Raw")
    versions = (staging.version, raw.version)
    with pytest.raises(EtlConfigError) as caught:
        EtlRunner(parse_config(text, source="etl.yaml"), lake, spark).run_pass()
    staging.refresh()
    raw.refresh()
    assert (staging.version, raw.version) == versions  # nothing written
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.fixture
def ingested(lake):
    raw, _ = make_pools(lake)
    append_events(raw, demo_batch(1) + demo_batch(3))
    return lake


def test_sql_referencing_a_missing_field(spark, ingested) -> None:
    text = GOOD.replace("'item', left.value.after.item,", "'item', left.value.after.itme,")
    message = _fails(ingested, spark, text)
    assert message.startswith("""etl.yaml: rule 1 (denorm 'new-invoice'): sql "SELECT left.key AS key,""")
    assert "itme" in message
    assert "FIELD_NOT_FOUND" in message or "cannot be resolved" in message


def test_sql_that_does_not_parse(spark, ingested) -> None:
    text = GOOD.replace(
        "sql: SELECT in.key AS key, NULL AS value", "sql: SELECT in.key AS key,, NULL AS value"
    )
    message = _fails(ingested, spark, text)
    assert message.startswith(
        """etl.yaml: rule 4 (stateless 'invoice-delete'): sql "SELECT in.key AS key,, NULL AS value\""""
    )
    assert "PARSE_SYNTAX_ERROR" in message


def test_where_and_join_on_are_checked_too(spark, ingested) -> None:
    message = _fails(ingested, spark, GOOD.replace("where: value.op = 'u'", "where: value.opp = 'u'", 1))
    assert message.startswith("""etl.yaml: rule 2 (stateless 'status-update'): where "value.opp = 'u'\"""")
    assert "opp" in message
    message = _fails(
        ingested, spark, GOOD.replace("right.value.after.InvoiceID", "right.value.after.Invoice")
    )
    assert """rule 1 (denorm 'new-invoice'): join-on "left.value.after.ID = right.value.after.Invoice\"""" in message
    message = _fails(ingested, spark, GOOD.replace("where: value.op = 'd'", "where: value.op"))
    assert """rule 4 (stateless 'invoice-delete'): where "value.op": must be a boolean, it is string""" in message


def test_sql_must_yield_key_and_value(spark, ingested) -> None:
    message = _fails(ingested, spark, GOOD.replace("SELECT in.key AS key, NULL AS value", "SELECT in.key AS k"))
    assert """rule 4 (stateless 'invoice-delete'): sql "SELECT in.key AS k": must yield columns `key` and `value`""" in message
    message = _fails(ingested, spark, GOOD.replace("SELECT in.key AS key, NULL AS value", "SELECT in.key AS key FROM Invoices"))
    assert "must be a SELECT without FROM" in message


def test_unknown_pools(spark, ingested) -> None:
    message = _fails(ingested, spark, GOOD.replace("{topic: Invoices, pool: Raw}", "{topic: Invoices, pool: Raww}"))
    assert message.startswith("etl.yaml: input pool 'Raww': no pool 'Raww' in lake")
    message = _fails(ingested, spark, GOOD.replace("pool: Staging", "pool: Raw"))
    assert "output pool 'Raw' is a raw pool, an ETL output must be a staging pool" in message


def test_the_cli_prints_one_line_and_exits_1(spark, ingested, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("'item', left.value.after.item,", "'item', left.value.after.itme,"))
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["etl", str(bad), "--lake", str(ingested.root)])
    assert result.exit_code == 1
    assert f"{bad}: rule 1 (denorm 'new-invoice'): sql" in result.output
    assert "Traceback" not in result.output
    missing = CliRunner().invoke(app, ["etl", str(tmp_path / "nope.yaml"), "--lake", str(ingested.root)])
    assert missing.exit_code == 1
    assert "no such ETL configuration file" in missing.output
