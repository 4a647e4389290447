"""deploy/monitoring: the alerting rules pass `promtool check rules` and their unit tests
(`promtool test rules`, with the promtool `zync setup` built), and the rules and the
Grafana dashboard name only metrics zync exports."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from engine.gotools.tools import GoToolError, require

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "zync-alerts.yaml"
RULE_TESTS = MONITORING / "zync-alerts.test.yaml"
DASHBOARD = MONITORING / "zync-dashboard.json"


@pytest.fixture(scope="module")
def promtool() -> Path:
    try:
        return require("promtool")  # built by `zync setup`, never here
    except GoToolError as exc:
        pytest.fail(str(exc))


def _run(promtool: Path, *args: str) -> str:
    done = subprocess.run(
        [str(promtool), *args], cwd=MONITORING, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_rules_are_valid(promtool: Path) -> None:
    out = _run(promtool, "check", "rules", RULES.name)
    assert "SUCCESS" in out


def test_the_rules_unit_tests_pass(promtool: Path) -> None:
    out = _run(promtool, "test", "rules", RULE_TESTS.name)
    assert "SUCCESS" in out


def _exported() -> set[str]:
    """Every zync_ metric name the engine declares (loops' Metric(...), the collector's
    families, the event histograms), with the series a histogram adds."""
    names: set[str] = set()
    for path in (ROOT / "engine").rglob("*.py"):
        text = path.read_text()
        names |= set(re.findall(r'Metric\(\s*"([a-z_]+)"', text))
        names |= set(re.findall(r'PREFIX \+ "([a-z_]+)"', text))
        names |= set(re.findall(r'EventHistogram\(\s*"([a-z_]+)"', text))
        for name in re.findall(r'EventHistogram\(\s*"([a-z_]+)"', text):
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    names |= {"kafka_up", "registry_up", "lake_up"}  # f"{PREFIX}{name}_up" in metrics.py
    return {f"zync_{n}" for n in names}


def test_rules_and_dashboard_name_only_exported_metrics() -> None:
    exported = _exported()
    assert "zync_consumer_lag_records" in exported
    used = set(re.findall(r"\bzync_[a-z_]+", RULES.read_text()))
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            used |= set(re.findall(r"\bzync_[a-z_]+", target["expr"]))
    assert used - exported == set()
