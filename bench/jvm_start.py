"""Benchmark: how fast the JVMs zync starts are ready, with and without class archives.

    .venv/bin/python bench/jvm_start.py [--runs 5]

Each run starts, in a fresh child process so that nothing is shared between runs:

* **spark**: a SparkSession as zync makes it (engine.spark.get_spark, local[2]) and its
  first queries (a SQL statement with a join, a group-by and JSON functions, collected as
  Arrow); prints the seconds to the session, the seconds of the queries, and the CPU
  seconds the JVM used by then (from /proc);
* **spark-s3**: the same with Spark's s3a jars loaded (``ZYNC_SPARK_S3_JARS=true``, as
  for a lake on S3; ``zync setup --with s3`` fetches them), appended after the archive's
  class path;
* **kafka**: the embedded broker (engine.local.broker.start_broker, port 0) until it
  answers a metadata request; the seconds and the broker JVM's CPU seconds by then.

Runs alternate between ``ZYNC_CLASS_ARCHIVES=off`` and the archives `zync setup` made
(made first when missing), and the medians of each side end with the ratio archive/off.
``$ZYNC_JVM_OPTS`` is passed through unchanged (the test suite sets C1 only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SPARK = """
import json, os, sys, time
t0 = time.perf_counter()
from engine.settings.spark import SparkSettings
from engine.spark import get_spark, stop_spark
spark = get_spark(SparkSettings(master="local[2]"))
t1 = time.perf_counter()
spark.sql(
    "WITH r AS (SELECT id, to_json(named_struct('id', id, 'k', id % 7)) AS j FROM range(1000)) "
    "SELECT get_json_object(j, '$.k') AS k, count(*) AS n FROM r JOIN range(100) x "
    "ON r.id = x.id GROUP BY get_json_object(j, '$.k')"
).toArrow()
t2 = time.perf_counter()
pid = spark._jvm.java.lang.ProcessHandle.current().pid()
stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
print(json.dumps({"ready": t1 - t0, "queries": t2 - t1, "cpu": cpu}))
stop_spark()
"""

_KAFKA = """
import json, os, sys, tempfile, time
from pathlib import Path
from engine.local.broker import start_broker
from engine.local.processes import stop_process
with tempfile.TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    proc = start_broker(Path(tmp) / "broker", port=0)
    ready = time.perf_counter() - t0
    stat = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    stop_process(proc)
print(json.dumps({"ready": ready, "cpu": cpu}))
"""


def _one(code: str, archives: bool, s3_jars: bool) -> dict[str, float]:
    env = {
        **os.environ,
        "ZYNC_CLASS_ARCHIVES": "on" if archives else "off",
        "ZYNC_SPARK_S3_JARS": "true" if s3_jars else "false",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"a run failed: {(done.stderr or done.stdout).strip()[-400:]}")
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per side (default 5)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from engine.api import make_broker_class_archive, make_spark_class_archive

    for make in (make_spark_class_archive, make_broker_class_archive):
        archive = make()
        print(f"{archive.kind} archive: {archive.path} ({archive.size / 2**20:.0f} MB)")
    print(f"ZYNC_JVM_OPTS={os.environ.get('ZYNC_JVM_OPTS', '')!r}; load average "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    kinds = [("spark", _SPARK, False), ("spark-s3", _SPARK, True), ("kafka", _KAFKA, False)]
    for kind, code, s3_jars in kinds:
        runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for i in range(2 * args.runs):
            archives = i % 2 == 1
            runs[archives].append(_one(code, archives, s3_jars))
        medians = {
            side: {key: statistics.median(r[key] for r in found) for key in found[0]}
            for side, found in runs.items()
        }
        for side in (False, True):
            figures = ", ".join(f"{key} {value:.2f} s" for key, value in medians[side].items())
            print(f"{kind} {'with archive' if side else 'without    '}: {figures} "
                  f"(median of {args.runs})")  # fmt: skip
        ratios = ", ".join(
            f"{key} {medians[True][key] / medians[False][key]:.2f}" for key in medians[True]
        )
        print(f"{kind} archive / without: {ratios}")


if __name__ == "__main__":
    main()
