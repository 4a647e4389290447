"""The window a long-running ETL keeps between passes (engine.etl.window): warm passes
give exactly what cold passes give, and the window is rebuilt after a restart and after
another process committed to staging."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.etl import EtlRunner, load_config
from engine.lake.pools import Lake
from tests.integration.test_etl_support import DEMO, append_events, demo_batch, make_pools

pytestmark = [pytest.mark.integration, pytest.mark.spark]

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


def _run(lake: Lake, spark: Any, *, keep_window: bool) -> list[bool]:
    raw, _ = make_pools(lake)
    runner = EtlRunner(load_config(CONFIG), lake, spark, keep_window=keep_window)
    warm = []
    for n in (1, 2, 3, 4):
        append_events(raw, demo_batch(n))
        result = runner.run_pass()
        assert result.committed
        warm.append(result.warm)
    return warm


def test_warm_passes_commit_what_cold_passes_commit(spark, tmp_path: Path) -> None:
    warm_lake, cold_lake = Lake(tmp_path / "warm"), Lake(tmp_path / "cold")
    assert _run(warm_lake, spark, keep_window=True) == [False, True, True, True]
    assert _run(cold_lake, spark, keep_window=False) == [False, False, False, False]
    warm_rows, warm_txns = _staging(warm_lake)
    cold_rows, cold_txns = _staging(cold_lake)
    assert len(warm_rows) > 8
    assert warm_rows == cold_rows  # outputs, markers, seqnos, offsets
    assert warm_txns == cold_txns  # cursors, floors, next offsets, marker floor, clock


def test_a_restart_reads_cold_then_warm(spark, tmp_path: Path) -> None:
    """A new runner (a restarted process) has no window: its first pass reads cold and
    commits what the old runner would have; the next one is warm again."""
    lake, reference = Lake(tmp_path / "restarted"), Lake(tmp_path / "reference")
    _run(reference, spark, keep_window=False)
    raw, _ = make_pools(lake)
    first = EtlRunner(load_config(CONFIG), lake, spark)
    for n in (1, 2):
        append_events(raw, demo_batch(n))
        first.run_pass()
    second = EtlRunner(load_config(CONFIG), lake, spark)  # the restart
    append_events(raw, demo_batch(3))
    assert not second.run_pass().warm
    append_events(raw, demo_batch(4))
    assert second.run_pass().warm
    assert _staging(lake) == _staging(reference)


def test_another_writer_in_between_drops_the_window(spark, tmp_path: Path) -> None:
    """Another process committed to staging between two passes: the window no longer
    holds, the pass reads cold and nothing is output twice."""
    lake, reference = Lake(tmp_path / "shared"), Lake(tmp_path / "reference")
    _run(reference, spark, keep_window=False)
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
    assert not result.warm
    append_events(raw, demo_batch(4))
    assert ours.run_pass().warm
    assert _staging(lake) == _staging(reference)
