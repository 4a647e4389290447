"""The window a long-running ETL keeps between passes (engine.etl.window): warm passes
give exactly what cold passes give, whether a cold pass's input is read by delta-spark or
(small) by delta-rs from the Delta log, and whether a warm pass is evaluated by Spark or
row by row on the driver (engine.etl.evaluate_rows); the window is rebuilt after a
restart and after another process committed to staging."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.api import EtlRunner, load_config
from engine.lake.pools import Lake
from tests.integration.test_etl_support import DEMO, append_events, demo_batch, make_pools

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow(seconds=150)]

CONFIG = DEMO / "etl.yaml"


def _txns(table_path: Path) -> dict[str, int]:
    """The latest version of every app transaction in the Delta log."""
    found: dict[str, int] = {}
    for commit in sorted((table_path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                found[action["txn"]["appId"]] = action["txn"]["version"]
    return found


def _staging(lake: Lake) -> tuple[list[dict[str, Any]], dict[str, int]]:
    path = Path(lake.open_pool("Staging").path)
    rows = DeltaTable(str(path)).to_pyarrow_table().sort_by("seqno").to_pylist()
    return rows, _txns(path)


def same_rows(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    """Staging rows alike row by row — outputs, markers, seqnos, offsets — but for the
    outputs' Avro bodies, which a pass evaluated row by row leaves NULL (to-kafka then
    encodes their JSON text: docs/design.md#staged-avro): where present, the same."""
    assert len(got) == len(want)
    for mine, theirs in zip(got, want, strict=True):
        if mine["avro"] is None:
            mine = {**mine, "avro": theirs["avro"]}
        assert mine == theirs


@pytest.fixture(params=["rows", "spark"])
def warm_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Warm passes evaluated row by row on the driver, and by Spark."""
    from engine.etl import evaluate_rows

    if request.param == "spark":
        monkeypatch.setattr(evaluate_rows, "ROWWISE_ROWS", 0)
    return str(request.param)


def _run(lake: Lake, spark: Any, *, keep_window: bool, log_reads: bool = True) -> list[str]:
    """The four demo batches, a pass after each; where each pass read its input, and
    (``+rows``) that it was evaluated row by row."""
    raw, _ = make_pools(lake)
    runner = EtlRunner(
        load_config(CONFIG), lake, spark, keep_window=keep_window, log_reads=log_reads
    )
    read_from = []
    for n in (1, 2, 3, 4):
        append_events(raw, demo_batch(n))
        result = runner.run_pass()
        assert result.committed
        assert result.warm == (result.read_from == "window")
        by_rows = "+rows" if result.timings.evaluated_by == "rows" else ""
        read_from.append(result.read_from + by_rows)
    return read_from


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The four batches passed cold, each pass reading through delta-spark: where the
    passes read and what staging holds after them (made once for the module's tests)."""
    lake = Lake(tmp_path_factory.mktemp("reference"))
    read_from = _run(lake, spark, keep_window=False, log_reads=False)
    return {"read_from": read_from, "staging": _staging(lake)}


def test_warm_passes_commit_what_cold_passes_commit(
    spark, tmp_path: Path, reference, warm_by: str
) -> None:
    lakes = {name: Lake(tmp_path / name) for name in ("warm", "log")}
    rows_ = "+rows" if warm_by == "rows" else ""
    warm, log = f"window{rows_}", f"log{rows_}"
    assert _run(lakes["warm"], spark, keep_window=True) == [log, warm, warm, warm]
    assert _run(lakes["log"], spark, keep_window=False) == [log] * 4
    assert reference["read_from"] == ["spark"] * 4
    reference_rows, reference_txns = reference["staging"]
    assert len(reference_rows) > 8
    for name in ("warm", "log"):
        rows, txns = _staging(lakes[name])
        same_rows(rows, reference_rows)  # outputs, markers, seqnos, offsets
        assert txns == reference_txns, name  # cursors, floors, next offsets, marker floor, clock


def test_a_large_cold_input_is_read_by_spark(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More rows to look at than LOG_READ_ROWS: the first pass reads through delta-spark,
    the next ones from the window."""
    from engine.etl import window

    monkeypatch.setattr(window, "LOG_READ_ROWS", 3)
    assert _run(Lake(tmp_path / "big"), spark, keep_window=True) == [
        "spark", "window+rows", "window+rows", "window+rows"
    ]


def test_a_restart_reads_cold_then_warm(spark, tmp_path: Path, reference) -> None:
    """A new runner (a restarted process) has no window: its first pass reads cold and
    commits what the old runner would have; the next one is warm again."""
    lake = Lake(tmp_path / "restarted")
    raw, _ = make_pools(lake)
    first = EtlRunner(load_config(CONFIG), lake, spark)
    for n in (1, 2):
        append_events(raw, demo_batch(n))
        first.run_pass()
    second = EtlRunner(load_config(CONFIG), lake, spark)  # the restart
    append_events(raw, demo_batch(3))
    assert second.run_pass().read_from == "log"
    append_events(raw, demo_batch(4))
    assert second.run_pass().warm
    rows, txns = _staging(lake)
    same_rows(rows, reference["staging"][0])
    assert txns == reference["staging"][1]


def test_another_writer_in_between_drops_the_window(spark, tmp_path: Path, reference) -> None:
    """Another process committed to staging between two passes: the window no longer
    holds, the pass reads cold and nothing is output twice."""
    lake = Lake(tmp_path / "shared")
    raw, _ = make_pools(lake)
    ours = EtlRunner(load_config(CONFIG), lake, spark)
    theirs = EtlRunner(load_config(CONFIG), lake, spark)
    append_events(raw, demo_batch(1))
    assert ours.run_pass().committed
    append_events(raw, demo_batch(2))
    assert theirs.run_pass().committed  # staging moved under our window
    append_events(raw, demo_batch(3))
    result = ours.run_pass()
    assert result.committed
    assert result.read_from == "log"
    append_events(raw, demo_batch(4))
    assert ours.run_pass().warm
    rows, txns = _staging(lake)
    same_rows(rows, reference["staging"][0])
    assert txns == reference["staging"][1]


def test_tables_that_sent_nothing_yet_keep_a_pass_row_by_row(spark, tmp_path: Path) -> None:
    """A whole database's first passes: most tables have sent nothing yet (no types, no
    records). A pass over the few that did is evaluated row by row all the same, and
    commits what Spark commits; so is the next, once every table has sent."""
    import yaml

    from engine.etl import evaluate_rows
    from tests.fixtures import wide

    config_path = tmp_path / "width.yaml"
    config_path.write_text(yaml.safe_dump(wide.pass_through_config(6, name="width")))

    def changes(tables: range, n: int) -> list[dict[str, Any]]:
        events = []
        for t in tables:
            key, value = wide.change(t, n, columns=8)
            events.append({"topic": wide.topic(t), "key": key, "value": value})
        return events

    def run(name: str) -> tuple[list[str | None], list[dict[str, Any]]]:
        lake = Lake(tmp_path / name)
        raw, _ = make_pools(lake)
        runner = EtlRunner(load_config(config_path), lake, spark)
        by = []
        for tables, n in ((range(2), 0), (range(2), 1), (range(6), 2)):
            append_events(raw, changes(tables, n))
            result = runner.run_pass()
            assert result.committed
            by.append(result.timings.evaluated_by)
        return by, _staging(lake)[0]

    rows_by, rows = run("rows")
    assert rows_by[1:] == ["rows", "rows"]  # 4 of 6 tables untyped: still row by row
    original = evaluate_rows.ROWWISE_ROWS
    evaluate_rows.ROWWISE_ROWS = 0
    try:
        spark_by, reference = run("spark")
    finally:
        evaluate_rows.ROWWISE_ROWS = original
    assert "rows" not in spark_by
    same_rows(rows, reference)
