"""`tables:` in the ETL configuration (issue 37): what it takes and every mistake in one
line naming the file, the line and the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.etl import config as etl_config
from engine.etl.config import EtlConfigError
from engine.etl.config_file import parse_config
from engine.lake import table_schema

DEMO = (Path(__file__).resolve().parents[2] / "demo" / "invoices" / "etl.yaml").read_text()
BASE = DEMO.split("\ntables:")[0] + "\n"


def tables(text: str) -> str:
    return BASE + "tables:\n" + text


def test_the_demo_keeps_an_invoices_table() -> None:
    config = parse_config(DEMO, source="etl.yaml")
    (table,) = config.tables
    assert (table.name, table.from_, table.keys, table.history, table.location) == (
        "invoices", "NewInvoices", ["ID"], False, None
    )
    assert config.staged_topic("InvoiceChanges") == "NewInvoices"  # a `from:` output's records


def test_a_table_takes_history_and_a_location_of_its_own() -> None:
    config = parse_config(
        tables(
            "  - {name: history, from: InvoiceChanges, keys: [ID], history: true,"
            " location: 's3://bucket/history'}\n"
        ),
        source="t.yaml",
    )
    assert config.tables[0].history
    assert config.tables[0].location == "s3://bucket/history"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("  - {name: t, from: Nope, keys: [ID]}\n",
         r"t.yaml: line \d+: table 't': `from` names topic 'Nope', which is not an output"),
        ("  - {name: Staging, from: NewInvoices, keys: [ID]}\n",
         r"table 'Staging': pool 'Staging' has this name"),
        ("  - {name: t, from: NewInvoices, keys: [ID]}\n  - {name: T, from: NewInvoices, keys: [ID]}\n",
         r"table 'T': two tables have this name"),
        ("  - {name: t, from: NewInvoices, keys: []}\n", r"table 't': `keys`: List should have at least 1"),
        ("  - {name: t, from: NewInvoices, keys: [ID, ID]}\n", r"table 't': `keys`: a key is listed twice"),
        ("  - {name: my-table, from: NewInvoices, keys: [ID]}\n", r"invalid table name 'my-table'"),
        ("  - {name: t, from: NewInvoices, keys: [is_current], history: true}\n",
         r"key 'is_current' is a column a history table adds"),
        ("  - {name: t, from: NewInvoices, key: [ID]}\n", r"table 't': unknown key `key` \(did you mean 'keys'\?\)"),
        ("  - {name: t, keys: [ID]}\n", r"table 't': `from` is missing"),
    ],
)
def test_mistakes_are_one_line(text: str, message: str) -> None:
    with pytest.raises(EtlConfigError, match=message) as refused:
        parse_config(tables(text), source="t.yaml")
    assert "\n" not in str(refused.value)


def test_the_history_columns_are_named_once() -> None:
    assert etl_config.HISTORY_COLUMNS == table_schema.HISTORY_COLUMNS
