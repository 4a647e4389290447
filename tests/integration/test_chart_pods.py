"""The pods of `zync build`'s chart, run as processes (issue 36): the chart of the invoice
scenario is rendered by helm with values for the test broker, registry and an s3:// lake
(moto), and each Deployment's container — command, arguments, environment, its ConfigMaps
and Secrets at the paths it mounts (tests/pods.py) — runs as a local process, from-kafka
with 2 replicas in its consumer group. The scenario passes exactly once; every probe the
manifests name answers at its port and path; SIGTERM stops every pod cleanly within its
termination grace period."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_run import (
    EXPECTED,
    demo_driver,
    invoice_scenario,
    plain,
    publish_in_file_order,
)
from tests.integration.test_to_kafka import profiles, read_topic
from tests.pods import Pod, pods
from tests.s3 import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.s3, pytest.mark.slow(seconds=100)]

OUTPUTS = 8
INPUTS = 12
TOKEN = "control-token-of-the-test"


def _render(helm: Path, chart: Path, values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = subprocess.run(
        [str(helm), "template", "inv", str(chart), "-n", "data", "-f", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _values(broker: Any, registry: Any, moto: Any, lake: str) -> dict[str, Any]:
    return {
        "image": {"repository": "registry.example.com/data/zync"},
        "kafka": {"bootstrapServers": broker.address},
        "schemaRegistry": {"url": registry.url},
        "lake": {"url": lake, "s3": {"region": REGION, "endpoint": moto.endpoint, "allowHttp": True,
                                     "credentialsSecret": {"name": "zync-lake"}}},
        "api": {"controlTokenSecret": {"name": "zync-control"}},
        "spark": {"master": "local[2]", "driverMemory": "1g",
                  "conf": {"spark.sql.shuffle.partitions": "4"}},
        "etl": {"jvmOptions": os.environ["ZYNC_JVM_OPTS"], "interval": "500ms"},
        "fromKafka": {"replicas": 2},
    }  # fmt: skip


def _rows(lake: str, pool: str) -> list[dict[str, Any]]:
    from engine.lake.pools import Lake

    table = Lake(lake).open_pool(pool).dataset().to_table(columns=["kafka", "marker"])
    return list(table.to_pylist())


def test_the_charts_pods_as_processes_run_the_scenario_exactly_once(
    tmp_path: Path, broker: Any, registry: Any, moto: Any, s3_url: str
) -> None:
    from engine.chart.build import plan_chart, write_chart
    from engine.gotools.tools import require
    from engine.kafka.clients import ensure_topic

    kafka, reg = profiles(broker, registry)
    scenario = invoice_scenario(tmp_path)
    for name in ("Invoices", "InvoiceStatus"):  # two partitions each: both replicas get some
        ensure_topic(kafka, scenario.topic(name), partitions=2)
    demo = demo_driver(scenario, s3_url, kafka, reg)
    chart = tmp_path / "chart"
    write_chart(plan_chart(scenario.config), chart)
    docs = _render(require("helm"), chart, _values(broker, registry, moto, s3_url), tmp_path)
    secrets = {
        "zync-lake": {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY},
        "zync-control": {"token": TOKEN},
    }
    short = Path(tempfile.mkdtemp(prefix="zync-pods-"))  # the pods' sockets: paths ≤ 107 bytes
    running = pods(docs, secrets, short)
    roles = Counter(p.template["metadata"]["labels"]["app.kubernetes.io/component"] for p in running)
    assert roles == {"from-kafka": 2, "etl": 1, "to-kafka": 2, "apply": 1}
    try:
        for pod in running:
            pod.start()
        for pod in running:  # the probes the manifests name, at their ports and paths
            pod.wait_for("startupProbe", 200, timeout=180)
            pod.wait_for("readinessProbe", 200, timeout=180)
        etl = next(p for p in running if p.name.startswith("inv-zync-invoices-etl-"))
        assert "spark.json" in os.listdir(etl.root / "home")  # the settings it mounts
        publish_in_file_order(demo, s3_url, batches=4)
        got = read_topic(kafka, scenario.output, registry=reg, expect=OUTPUTS, timeout=240)
        assert [(r.key, plain(r.value)) for r in got] == EXPECTED
        changes = read_topic(kafka, scenario.topic("InvoiceChanges"), registry=reg, expect=OUTPUTS, timeout=120)
        assert sorted(int(r.headers["zync.offset"]) for r in changes) == list(range(OUTPUTS))
        _assert_exactly_once_in_the_lake(s3_url)
        _assert_table_soon(s3_url, {
            100: ("Alice", "taco", "closed"), 101: ("Bob", "burrito", "paid"),
            102: ("Charlie", "enchilada", "paid"), 103: ("Dan", "beans", "collections"),
        })  # fmt: skip
        ingest = [p for p in running if p.name.startswith("inv-zync-invoices-from-kafka-")]
        for pod in ingest:  # both replicas hold a share of the partitions
            assert "zync_consumer_lag_records{" in _get(pod, "/metrics"), pod.tail()
        for pod in running:
            assert pod.probe("livenessProbe") == 200
            assert pod.probe("readinessProbe") == 200
        _assert_control_needs_the_token(running)
        # every pod stops on SIGTERM, after its commit in flight, within its grace period
        for pod in running:
            code, seconds = pod.terminate()
            assert code == 0, f"{pod.name}: exit {code} after SIGTERM: {pod.tail()}"
            last = json.loads(pod.tail(1))
            assert last["message"] == "stopped", pod.tail()
            assert seconds < pod.spec["terminationGracePeriodSeconds"]
    finally:
        for pod in running:
            pod.kill()
        shutil.rmtree(short, ignore_errors=True)
    # nothing was delivered twice by the stops either
    again = read_topic(kafka, scenario.output, registry=reg, timeout=30)
    assert len(again) == OUTPUTS


def _assert_table_soon(lake: str, expected: dict[int, tuple[str, str, str]]) -> None:
    """The apply pod keeps the configuration's invoices table on the s3:// lake."""
    from deltalake import DeltaTable

    from engine.lake.location import parse_location

    where = parse_location(lake).join("invoices")
    deadline = time.monotonic() + 120
    rows: dict[int, tuple[str, str, str]] = {}
    while rows != expected:
        assert time.monotonic() < deadline, f"the invoices table holds {rows}"
        time.sleep(0.5)
        if DeltaTable.is_deltatable(where.uri, storage_options=where.storage_options()):
            table = DeltaTable(where.uri, storage_options=where.storage_options())
            rows = {
                r["ID"]: (r["customer"], r["item"], r["invoice_status"])
                for r in table.to_pyarrow_table().to_pylist()
            }


def _assert_exactly_once_in_the_lake(lake: str) -> None:
    raw = [r["kafka"] for r in _rows(lake, "Raw") if r["marker"] is None]
    assert len(raw) == INPUTS
    assert len({(k["topic"], k["partition"], k["offset"]) for k in raw}) == INPUTS
    staging = _rows(lake, "Staging")
    outputs = sorted(r["kafka"]["offset"] for r in staging if r["marker"] is None)
    assert outputs == list(range(OUTPUTS))
    markers = Counter(
        (m["marker"]["topic"], m["marker"]["partition"], m["marker"]["offset"])
        for m in staging
        if m["marker"] is not None
    )
    assert len(markers) == INPUTS
    assert max(markers.values()) == 1


def _get(pod: Pod, path: str, token: str | None = None, method: str = "GET") -> str:
    import urllib.request

    request = urllib.request.Request(pod.url(path), method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as reply:
        return str(reply.read().decode())


def _assert_control_needs_the_token(running: list[Pod]) -> None:
    """The token the chart hands over from its Secret guards control over TCP."""
    import urllib.error

    etl = next(p for p in running if p.name.startswith("inv-zync-invoices-etl-"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        _get(etl, "/v1/etl/pass", method="POST")
    assert refused.value.code == 401
    result = json.loads(_get(etl, "/v1/etl/pass", token=TOKEN, method="POST"))
    assert result, result
