"""`zync run` on an ``s3://`` lake (moto's server): the invoice scenario from Kafka to
Kafka, then `zync query`, `pending`, `expired` and `pool show` on the same lake — every
command reaching S3 with the standard AWS settings only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_run import (
    EXPECTED,
    ROOT,
    demo_driver,
    invoice_scenario,
    plain,
    publish_in_file_order,
    spark_home,
)
from tests.integration.test_to_kafka import profiles, read_topic
from tests.s3 import SECRET_KEY

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=130), pytest.mark.s3]


def _zync(module: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert SECRET_KEY not in result.stdout + result.stderr
    return result


def test_zync_run_and_the_inspection_commands_on_an_s3_lake(tmp_path, broker, registry, s3_url: str) -> None:
    kafka, reg = profiles(broker, registry)
    scenario = invoice_scenario(tmp_path)
    demo = demo_driver(scenario, s3_url, kafka, reg)  # creates the pools on S3
    home = Path(os.environ["ZYNC_HOME"])
    spark_home(home)
    env = {**os.environ, "ZYNC_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    connection = ["-b", broker.address, "-r", registry.url]
    log_path = tmp_path / "run.log"
    with log_path.open("w") as log:
        run = subprocess.Popen(
            [sys.executable, "-m", "zync_tui.commands.run", "run", str(scenario.config),
             "--lake", s3_url, "--etl-interval", "500ms", *connection],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            publish_in_file_order(demo, s3_url, batches=4)
            got = read_topic(kafka, scenario.output, registry=reg, expect=8, timeout=240)
            assert [(r.key, plain(r.value)) for r in got] == EXPECTED, log_path.read_text()
        finally:
            run.send_signal(signal.SIGTERM)
            try:
                code = run.wait(120)
            finally:
                if run.poll() is None:
                    run.kill()
    output = log_path.read_text()
    assert code == 0, output
    assert f"lake {s3_url}" in output
    assert SECRET_KEY not in output

    # the same lake through $ZYNC_LAKE, read by the inspection commands
    lake_env = {**env, "ZYNC_LAKE": s3_url}
    query = _zync("zync_tui.cli", ["query", "SELECT count(*) AS n FROM Staging WHERE kafka.topic IS NOT NULL",
                                   "--format", "json"], lake_env)
    assert query.returncode == 0, query.stderr
    pending = _zync("zync_tui.cli", ["pending", str(scenario.config), "--json"], lake_env)
    assert pending.returncode == 0, pending.stderr
    assert json.loads(pending.stdout) == []
    expired = _zync("zync_tui.cli", ["expired", str(scenario.config), "--json"], lake_env)
    assert expired.returncode == 0, expired.stderr
    # to-kafka on its own: reads its position back from the topics and delivers nothing twice
    delivered = _zync("zync_tui.cli", ["to-kafka", str(scenario.config), *connection], lake_env)
    assert delivered.returncode == 0, delivered.stderr
    again = read_topic(kafka, scenario.output, registry=reg, timeout=30)
    assert [(r.key, plain(r.value)) for r in again] == EXPECTED
    shown = _zync("zync_tui.cli", ["pool", "show", "Staging", "--json"], lake_env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["path"] == f"{s3_url}/Staging"
