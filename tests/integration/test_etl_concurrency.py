"""Exactly once under concurrency: a pass whose staging version moved re-plans, and two
concurrent `zync etl` processes on the same configuration never duplicate an output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.api import EtlRunner, load_config
from tests.integration.test_etl_support import DEMO, append_events, demo_batch, make_pools, outputs

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
CONFIG = DEMO / "etl.yaml"


def test_a_pass_that_loses_the_race_replans(spark, lake, monkeypatch: pytest.MonkeyPatch) -> None:
    raw, _ = make_pools(lake)
    append_events(raw, demo_batch(1))
    slow = EtlRunner(load_config(CONFIG), lake, spark)
    fast = EtlRunner(load_config(CONFIG), lake, spark)
    plan = slow._plan
    raced = []

    def racing(positions, checked):
        if not raced:  # another writer commits after `slow` read staging version V
            raced.append(fast.run_pass())
        return plan(positions, checked)

    monkeypatch.setattr(slow, "_plan", racing)
    result = slow.run_pass()
    assert raced[0].committed
    assert raced[0].outputs == {"NewInvoices": 2}
    assert result.attempts == 2  # its commit at V conflicted; the re-plan found the work done
    assert result.nothing_new
    assert not result.committed
    assert [offset for _, offset, _, _ in outputs(spark, lake)] == [0, 1]


def _start(lake_root: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "ZYNC_SPARK_MASTER": "local[1]", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "zync_tui.commands.etl", "etl", str(CONFIG), "--lake", str(lake_root), "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_two(lake_root: Path) -> list[dict]:
    procs = [_start(lake_root), _start(lake_root)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out))
    return results


def test_two_concurrent_etl_processes_never_duplicate(spark, lake) -> None:
    raw, _ = make_pools(lake)
    for n in (1, 2, 3, 4):
        append_events(raw, demo_batch(n))
    results = _run_two(lake.root)
    # one commits the work; the other lost the race at commit time and re-planned (or
    # started planning after the commit): either way it commits nothing new
    committed = [r for r in results if r["committed"]]
    assert len(committed) == 1, results
    rows = outputs(spark, lake)
    assert sum(committed[0]["outputs"].values()) == len(rows) == 8
    assert [offset for _, offset, _, _ in rows] == list(range(8))
    keys = [(json.dumps(key), json.dumps(value, sort_keys=True)) for _, _, key, value in rows]
    assert len(set(keys)) == 8  # no output twice
    assert EtlRunner(load_config(CONFIG), lake, spark).run_pass().nothing_new
