"""The ETL configuration model: strict, typed, and errors that say where."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from engine.durations import format_timedelta, parse_timedelta
from engine.etl.config import (
    DenormRule,
    EtlConfigError,
    StatelessRule,
    TxnRule,
)
from engine.etl.config_file import load_config, parse_config
from engine.etl.sql import SqlShapeError, wrap_select

DEMO = Path(__file__).resolve().parents[2] / "demo" / "invoices" / "etl.yaml"

BASE = """\
name: invoices
inputs:
  - {topic: Invoices, pool: Raw}
  - {topic: InvoiceStatus, pool: Raw}
outputs:
  - {topic: NewInvoices, pool: Staging}
transforms:
"""

DENORM = """\
  - type: denorm
    name: new-invoice
    where: value.op IN ('c', 'r')
    left: Invoices
    right: InvoiceStatus
    join-on: left.value.after.ID = right.value.after.InvoiceID
    out: NewInvoices
    expire-after: 1h
    sql: SELECT left.key AS key, right.value AS value
"""


def _error(text: str) -> str:
    with pytest.raises(EtlConfigError) as caught:
        parse_config(text, source="etl.yaml")
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_demo_configuration_loads() -> None:
    config = load_config(DEMO)
    assert config.name == "invoices"
    assert config.staging_pool == "Staging"
    assert config.input_topics == ["Invoices", "InvoiceStatus"]
    kinds = [type(rule) for rule in config.transforms]
    assert kinds == [DenormRule, StatelessRule, StatelessRule, StatelessRule]
    denorm = config.transforms[0]
    assert isinstance(denorm, DenormRule)
    assert denorm.expire_after == timedelta(hours=1)
    assert denorm.join_on == "left.value.after.ID = right.value.after.InvoiceID"
    assert [config.rule_label(i) for i in range(4)] == [
        "new-invoice", "status-update", "invoice-update", "invoice-delete"
    ]
    assert config.source == str(DEMO)
    # one extra output: NewInvoices' records as Debezium change events (delivered only)
    assert [(o.topic, o.envelope, o.staged) for o in config.outputs] == [
        ("NewInvoices", None, "NewInvoices"),
        ("InvoiceChanges", "debezium", "NewInvoices"),
    ]
    assert config.output_topics == ["NewInvoices"]
    assert config.envelope_of("InvoiceChanges") == "debezium"


def test_outputs_name_their_envelope_and_may_carry_another_outputs_records() -> None:
    text = BASE.replace(
        "  - {topic: NewInvoices, pool: Staging}\n",
        "  - {topic: NewInvoices, pool: Staging, envelope: Materialize}\n"
        "  - {topic: Changes, pool: Staging, from: NewInvoices, envelope: debezium}\n",
    ) + DENORM
    config = parse_config(text)
    assert [(o.topic, o.envelope, o.from_) for o in config.outputs] == [
        ("NewInvoices", "materialize", None),
        ("Changes", "debezium", "NewInvoices"),
    ]
    unknown = _error(text.replace("envelope: debezium", "envelope: cdc"))
    assert unknown == (
        "etl.yaml: line 7: `outputs.1.envelope`: unknown envelope 'cdc': "
        "use jdbc, debezium, differential or materialize"
    )
    assert _error(text.replace("from: NewInvoices", "from: NewInvoice")) == (
        "etl.yaml: line 7: output 'Changes': `from` names topic 'NewInvoice', which is not "
        "an output the rules write (did you mean 'NewInvoices'?) (outputs: NewInvoices)"
    )
    assert _error(text.replace("out: NewInvoices", "out: Changes")).endswith(
        "`out` names topic 'Changes', which is delivered from 'NewInvoices': write to 'NewInvoices'"
    )
    assert _error(text.replace("{topic: Invoices, pool: Raw}", "{topic: Invoices, pool: Raw, envelope: jdbc}")) == (
        "etl.yaml: line 3: `envelope` is a key of outputs, not of inputs"
    )


def test_a_single_output_mapping_and_unnamed_rules() -> None:
    text = BASE.replace(
        "outputs:\n  - {topic: NewInvoices, pool: Staging}", "output: {topic: NewInvoices, pool: Staging}"
    ) + "  - {type: stateless, in: Invoices, out: NewInvoices, sql: 'SELECT in.key AS key, in.value AS value'}\n"
    config = parse_config(text)
    assert [o.topic for o in config.outputs] == ["NewInvoices"]
    assert config.rule_label(0) == "1"
    assert config.describe_rule(0) == "rule 1 (stateless)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15m", timedelta(minutes=15)),
        ("1h", timedelta(hours=1)),
        ("30s", timedelta(seconds=30)),
        ("1h30m", timedelta(minutes=90)),
        ("2d", timedelta(days=2)),
        ("500ms", timedelta(milliseconds=500)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_timedelta(text) == expected


@pytest.mark.parametrize("bad", ["15", "1x", "h", "", "-5m", "0s", 15])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_timedelta(bad)


def test_format_duration() -> None:
    assert format_timedelta(timedelta(minutes=90)) == "90m"
    assert format_timedelta(timedelta(hours=2)) == "2h"


def test_denorm_without_join_on() -> None:
    message = _error(BASE + DENORM.replace("    join-on: left.value.after.ID = right.value.after.InvoiceID\n", ""))
    assert message == "etl.yaml: line 8: rule 1 (denorm 'new-invoice'): `join-on` is missing"


def test_txn_without_txn_id() -> None:
    rule = """\
  - type: txn
    in: [Invoices, InvoiceStatus]
    complete-when: bool_or(value.done)
    out: NewInvoices
    sql: SELECT bundle.txn_id AS key, NULL AS value
"""
    message = _error(BASE + rule)
    assert message.startswith("etl.yaml: line 8: rule 1 (txn): ")
    assert "needs `txn-id`" in message


def test_debezium_mode_needs_the_transaction_topic() -> None:
    rule = """\
  - type: txn
    in: [Invoices]
    complete-when: debezium
    out: NewInvoices
    sql: SELECT bundle.txn_id AS key, NULL AS value
"""
    message = _error(BASE + rule)
    assert "`complete-when: debezium` needs `transaction-topic`" in message
    fixed = BASE + rule.replace("    out:", "    transaction-topic: InvoiceStatus\n    out:")
    config = parse_config(fixed)
    txn = config.transforms[0]
    assert isinstance(txn, TxnRule)
    assert txn.debezium
    assert txn.txn_id_expr == "value.transaction.id"
    assert txn.topics == ("Invoices", "InvoiceStatus")


def test_unknown_topic_names_the_rule_line_and_suggests() -> None:
    message = _error(BASE + DENORM.replace("right: InvoiceStatus", "right: InvoiceStatuses"))
    assert message == (
        "etl.yaml: line 12: rule 1 (denorm 'new-invoice'): `right` names topic "
        "'InvoiceStatuses', which is not an input (did you mean 'InvoiceStatus'?) "
        "(inputs: Invoices, InvoiceStatus)"
    )


def test_unknown_output_topic() -> None:
    message = _error(BASE + DENORM.replace("out: NewInvoices", "out: Elsewhere"))
    assert "`out` names topic 'Elsewhere', which is not an output" in message
    assert "line 14" in message


def test_all_outputs_in_one_staging_pool() -> None:
    text = BASE.replace(
        "  - {topic: NewInvoices, pool: Staging}\n",
        "  - {topic: NewInvoices, pool: Staging}\n  - {topic: Other, pool: Staging2}\n",
    ) + DENORM
    message = _error(text)
    assert "all outputs must go to one staging pool" in message
    assert "'Staging', 'Staging2'" in message


def test_unknown_keys_are_refused_with_a_suggestion() -> None:
    message = _error(BASE + DENORM.replace("join-on:", "joinon:"))
    assert "rule 1 (denorm 'new-invoice')" in message
    assert "unknown key `joinon` (did you mean 'join-on'?)" in message
    top = _error("nmae: x\n" + BASE.split("\n", 1)[1] + DENORM)
    assert "unknown key `nmae` (did you mean 'name'?)" in top


def test_unknown_rule_type_and_bad_duration() -> None:
    assert "unknown rule type 'join': use denorm, stateless or txn" in _error(
        BASE + DENORM.replace("type: denorm", "type: join")
    )
    message = _error(BASE + DENORM.replace("expire-after: 1h", "expire-after: soon"))
    assert "line 15" in message
    assert "`expire-after`: invalid duration 'soon'" in message


def test_yaml_syntax_errors_name_the_line() -> None:
    message = _error(BASE + "  - type: [denorm\n")
    assert message.startswith("etl.yaml: line ")
    assert "invalid YAML" in message


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(EtlConfigError, match="no such ETL configuration file"):
        load_config(tmp_path / "nope.yaml")


def test_left_and_right_must_differ() -> None:
    message = _error(BASE + DENORM.replace("right: InvoiceStatus", "right: Invoices"))
    assert "left and right must be different topics" in message


# ------------------------------------------------------------------- the SQL wrapping


def test_wrap_select_adds_the_order_columns_and_the_view() -> None:
    assert wrap_select("SELECT in.key AS key, in.value AS value", "v", ["a", "b"]) == (
        "SELECT a, b, in.key AS key, in.value AS value FROM `v`"
    )
    assert wrap_select(
        "SELECT DISTINCT in.key AS key, NULL AS value WHERE in.value.op = 'd';", "v", ["a"]
    ) == "SELECT DISTINCT a, in.key AS key, NULL AS value FROM `v` WHERE in.value.op = 'd'"


def test_wrap_select_is_not_fooled_by_words_in_strings_fields_and_subqueries() -> None:
    sql = (
        "SELECT 'from where' AS key, in.value.from AS value, "
        "(SELECT max(x) FROM (SELECT 1 AS x)) AS n -- order by\n"
    )
    wrapped = wrap_select(sql, "v", ["a"])
    assert wrapped.startswith("SELECT a, 'from where' AS key, in.value.from AS value, (SELECT max(x)")
    assert wrapped.endswith("FROM `v`")


def test_wrap_select_accepts_from_bundle_only_where_allowed() -> None:
    assert wrap_select("SELECT bundle.txn_id AS key FROM bundle", "v", ["a"], from_names=["bundle"]) == (
        "SELECT a, bundle.txn_id AS key FROM `v`"
    )
    with pytest.raises(SqlShapeError, match="without FROM"):
        wrap_select("SELECT key FROM other", "v", ["a"], from_names=["bundle"])
    with pytest.raises(SqlShapeError, match="without FROM"):
        wrap_select("SELECT in.key AS key FROM bundle", "v", ["a"])
    with pytest.raises(SqlShapeError, match="must be a SELECT"):
        wrap_select("WITH x AS (SELECT 1) SELECT * FROM x", "v", ["a"])
