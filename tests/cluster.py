"""A private Spark standalone cluster on 127.0.0.1, for tests and benchmarks.

:func:`start_cluster` launches a master and N workers with the ``spark-class`` script
that ships inside the pyspark package (``SPARK_HOME`` = the pyspark directory), each in
its own session (process group), with their logs, work dirs and an empty conf dir under
one temporary directory. It returns when the master's JSON status lists every worker
ALIVE (polled with a timeout, no fixed sleeps).

:meth:`StandaloneCluster.stop` stops every JVM it started by PID: workers first (SIGTERM
to their process groups, which hold the executors the workers launched), then the
master; whatever is still alive after a grace period gets SIGKILL. Each process carries
``ZYNC_TEST_CLUSTER=<tag>`` in its environment (executors inherit it from their
worker), so :meth:`StandaloneCluster.leftovers` can prove, with ``/proc``, that nothing
is left.

The second half builds raw data and runs ETL scenarios, for the cluster test and
``bench/cluster.py``: :func:`invoice_events` (a deterministic invoice stream of any
size), :func:`append_events` (into a raw pool with ``Pool.append_records`` and
``Pool.record_types``, as from-kafka does), :func:`run_steps` (passes and appends with
one warm ``EtlRunner``) and :func:`run_in_subprocess`: a process has one SparkSession,
so a run on another master needs its own process::

    ZYNC_SPARK_MASTER=spark://127.0.0.1:7077 python -m tests.cluster etl \\
        '[{"lake": "/tmp/lake", "config": "demo/invoices/etl.yaml", "steps": ["pass"]}]'

A step is ``pass`` or ``append:FILE.jsonl``. It prints one JSON report: the master, the
number of executors, and each job's pass results.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
READY_TIMEOUT = 180.0
STOP_TIMEOUT = 20.0
TAG_VAR = "ZYNC_TEST_CLUSTER"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(RuntimeError):
    """The cluster did not start, or did not stop."""


def spark_home() -> Path:
    """The pyspark package directory, which holds ``bin/spark-class`` and ``jars/``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    from engine.local.processes import free_port

    return free_port()


def _environ_of(pid: int) -> dict[str, str]:
    try:
        raw = (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[name.decode(errors="replace")] = value.decode(errors="replace")
    return env


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return not stat[stat.rfind(")") + 2 :].startswith("Z")


def tagged_pids(tag: str) -> list[int]:
    """Live processes whose environment holds ``ZYNC_TEST_CLUSTER=tag``."""
    found = []
    for entry in Path("/proc").iterdir():
        if (
            entry.name.isdigit()
            and _environ_of(int(entry.name)).get(TAG_VAR) == tag
            and _alive(int(entry.name))
        ):
            found.append(int(entry.name))
    return sorted(found)


@dataclass
class _Daemon:
    role: str
    process: subprocess.Popen[bytes]
    log_file: Path
    ui_port: int

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class StandaloneCluster:
    """A running master and its workers (see the module docstring)."""

    tag: str
    port: int
    ui_port: int
    directory: Path
    daemons: list[_Daemon] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    @property
    def pids(self) -> list[int]:
        return [d.pid for d in self.daemons]

    def status(self, timeout: float = 5.0) -> dict[str, Any]:
        """The master's JSON status (``/json/``): workers, their state, cores, apps."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=timeout) as resp:
            return json.loads(resp.read().decode())

    def alive_workers(self) -> int:
        try:
            status = self.status()
        except (OSError, ValueError):
            return 0
        return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")

    def leftovers(self) -> list[int]:
        """Live processes this cluster started (daemons, executors, Python workers)."""
        return tagged_pids(self.tag)

    def describe(self, pids: Iterable[int]) -> str:
        out = []
        for pid in pids:
            try:
                cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                cmd = b"?"
            out.append(f"{pid}: {cmd.decode(errors='replace')[:160]}")
        return "; ".join(out)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop every process this cluster started; raises :class:`ClusterError` if
        any survives SIGKILL. Safe to call twice."""
        workers = [d for d in self.daemons if d.role != "master"]
        masters = [d for d in self.daemons if d.role == "master"]
        for group in (workers, masters):
            for daemon in group:
                _signal_group(daemon.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for daemon in group:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    daemon.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            for daemon in group:
                _signal_group(daemon.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    daemon.process.wait(timeout=5)
        # executors and Python workers that left their worker's group, if any
        deadline = time.monotonic() + 10
        while (left := self.leftovers()) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        if left := self.leftovers():
            raise ClusterError(f"cluster processes survive SIGKILL: {self.describe(left)}")

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pid: int, signum: int) -> None:
    """Signal the process group a daemon leads (it was started in its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def cluster_env(home: Path, tag: str, conf_dir: Path) -> dict[str, str]:
    """The environment of the daemons: SPARK_HOME = pyspark, our Java and Python."""
    from engine.jvm.java import resolve_java

    env = dict(os.environ)
    for name in (
        "SPARK_MASTER_HOST",
        "SPARK_WORKER_OPTS",
        "SPARK_MASTER_OPTS",
        "SPARK_DAEMON_JAVA_OPTS",
    ):
        env.pop(name, None)
    env.update(
        {
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(conf_dir),
            "JAVA_HOME": str(resolve_java().home),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_DAEMON_JAVA_OPTS": os.environ.get("ZYNC_JVM_OPTS", ""),
            "PYSPARK_PYTHON": sys.executable,
            TAG_VAR: tag,
        }
    )
    return env


def start_cluster(
    directory: Path,
    *,
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
    timeout: float = READY_TIMEOUT,
) -> StandaloneCluster:
    """Start a master and ``workers`` workers on 127.0.0.1 (see the module docstring)."""
    directory = Path(directory)
    home = spark_home()
    spark_class = home / "bin" / "spark-class"
    conf_dir = directory / "conf"
    logs = directory / "logs"
    for d in (conf_dir, logs):
        d.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex
    env = cluster_env(home, tag, conf_dir)
    cluster = StandaloneCluster(
        tag=tag, port=_free_port(), ui_port=_free_port(), directory=directory
    )
    atexit.register(_stop_quietly, cluster)  # a safety net if teardown never runs

    def launch(role: str, argv: Sequence[str], ui_port: int) -> _Daemon:
        log_file = logs / f"{role}.log"
        with open(log_file, "wb") as log:
            process = subprocess.Popen(
                [str(spark_class), *argv],
                env=env,
                cwd=directory,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        daemon = _Daemon(role, process, log_file, ui_port)
        cluster.daemons.append(daemon)
        return daemon

    try:
        master = launch(
            "master",
            [
                MASTER_CLASS,
                "--host",
                HOST,
                "--port",
                str(cluster.port),
                "--webui-port",
                str(cluster.ui_port),
            ],
            cluster.ui_port,
        )
        for i in range(1, workers + 1):
            work_dir = directory / f"work-{i}"
            work_dir.mkdir(exist_ok=True)
            ui = _free_port()
            launch(
                f"worker-{i}",
                [
                    WORKER_CLASS,
                    cluster.master_url,
                    "--host",
                    HOST,
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--webui-port",
                    str(ui),
                    "--work-dir",
                    str(work_dir),
                ],
                ui,
            )
        deadline = time.monotonic() + timeout
        while cluster.alive_workers() < workers:
            for daemon in cluster.daemons:
                if daemon.process.poll() is not None:
                    raise ClusterError(
                        f"spark {daemon.role} exited with {daemon.process.returncode}: "
                        f"{daemon.log_tail()}"
                    )
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"spark cluster not ready after {timeout:.0f}s "
                    f"({cluster.alive_workers()} of {workers} workers alive): {master.log_tail()}"
                )
            time.sleep(0.25)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _stop_quietly(cluster: StandaloneCluster) -> None:
    with contextlib.suppress(Exception):
        cluster.stop(timeout=5)


# ----------------------------------------------------------------------- raw data, runs

BASE_MS = 1_714_557_600_000  # 2024-05-01T10:00:00Z
TYPE_SAMPLE = 5_000


def _timestamp_ms(event: Mapping[str, Any]) -> int:
    if "timestamp" in event:
        return int(event["timestamp"])
    value = event.get("value")
    if isinstance(value, dict) and isinstance(value.get("ts_ms"), int):
        return int(value["ts_ms"])
    return BASE_MS


def append_events(pool: Any, events: Sequence[Mapping[str, Any]], chunk: int = 50_000) -> int:
    """Append ``{"topic", "key", "value"[, "partition", "timestamp" (ms)]}`` events to a
    raw pool the way from-kafka does (rows + positions with ``Pool.append_records``,
    topic types with ``Pool.record_types``), in commits of ``chunk`` events, with
    contiguous offsets per (topic, partition) after the pool's positions. Types are
    inferred from the first events of each topic. Returns the rows committed."""

    from engine.kafka.typemap.to_spark import json_value_to_spark
    from engine.lake.pool_record import record_rows
    from engine.lake.topic_types import TopicTypes

    samples: dict[str, tuple[list[Any], list[Any]]] = {}
    for event in events:
        keys, values = samples.setdefault(event["topic"], ([], []))
        if len(keys) + len(values) < TYPE_SAMPLE:
            if event.get("key") is not None:
                keys.append(event["key"])
            if event.get("value") is not None:
                values.append(event["value"])
    pool.record_types(
        {
            topic: TopicTypes(
                key=json_value_to_spark(keys).json() if keys else None,
                value=json_value_to_spark(values).json() if values else None,
            )
            for topic, (keys, values) in sorted(samples.items())
        }
    )
    pool.refresh()
    next_offset: dict[tuple[str, int], int] = {}
    committed = 0
    dumps = json.dumps
    utc = dt.UTC
    for begin in range(0, len(events), chunk):
        part = events[begin : begin + chunk]
        kafka, keys_out, values_out = [], [], []
        for event in part:
            tp = (event["topic"], int(event.get("partition", 0)))
            offset = next_offset.get(tp)
            if offset is None:
                last = pool.position(*tp)
                offset = 0 if last is None else last + 1
            next_offset[tp] = offset + 1
            kafka.append(
                {
                    "topic": tp[0],
                    "partition": tp[1],
                    "offset": offset,
                    "timestamp": dt.datetime.fromtimestamp(_timestamp_ms(event) / 1000, tz=utc),
                }
            )
            key, value = event.get("key"), event.get("value")
            keys_out.append(None if key is None else dumps(key, separators=(",", ":")))
            values_out.append(None if value is None else dumps(value, separators=(",", ":")))
        rows = record_rows(kafka, keys_out, values_out)
        touched = {(e["topic"], int(e.get("partition", 0))) for e in part}
        positions = {tp: next_offset[tp] - 1 for tp in touched}
        committed += pool.append_records(rows, positions).rows
    return committed


def invoice_events(
    count: int, *, partitions: int = 2, first_id: int = 0, spacing_ms: int = 100
) -> list[dict[str, Any]]:
    """``count`` Debezium-like events of the invoice scenario (topics Invoices and
    InvoiceStatus, ``partitions`` partitions each, keyed by invoice id), deterministic.

    Per invoice: a create; its status create two invoices later (so left rows wait for
    their right rows, and across a batch boundary across passes); every 7th invoice's
    status comes before the invoice, every 11th never comes (pending, then expired: one
    event per ``spacing_ms``, expire-after 1h); every 5th status and 13th invoice get an update;
    every 17th invoice is deleted (delete + tombstone).
    """
    events: list[dict[str, Any]] = []
    delayed: list[list[dict[str, Any]]] = []
    invoice = first_id
    while len(events) < count:
        i = invoice
        ms = BASE_MS + len(events) * spacing_ms
        part = i % partitions
        source = {"table": "Invoices", "lsn": i}
        row = {"ID": i, "customer": f"c{i % 1000}", "item": f"item-{i % 97}"}
        inv = {
            "topic": "Invoices",
            "partition": part,
            "key": {"ID": i},
            "value": {"before": None, "after": row, "source": source, "op": "c", "ts_ms": ms},
        }
        status_row = {"ID": 10_000_000 + i, "InvoiceID": i, "status": "pending"}
        status = {
            "topic": "InvoiceStatus",
            "partition": part,
            "key": {"ID": 10_000_000 + i},
            "value": {
                "before": None,
                "after": status_row,
                "source": {"table": "InvoiceStatus", "lsn": i},
                "op": "c",
                "ts_ms": ms,
            },
        }
        now: list[dict[str, Any]] = []
        later: list[dict[str, Any]] = []
        if i % 7 == 0:
            now += [status, inv]
        elif i % 11 == 0:
            now.append(inv)
        else:
            now.append(inv)
            later.append(status)
        if i % 5 == 0 and i % 11:
            paid = {**status_row, "status": "paid"}
            later.append(
                {
                    **status,
                    "value": {**status["value"], "before": status_row, "after": paid, "op": "u"},
                }
            )
        if i % 13 == 0:
            changed = {**row, "item": f"item-{(i + 1) % 97}"}
            later.append(
                {**inv, "value": {**inv["value"], "before": row, "after": changed, "op": "u"}}
            )
        if i % 17 == 0:
            later.append(
                {**inv, "value": {**inv["value"], "before": row, "after": None, "op": "d"}}
            )
            later.append({**inv, "value": None})
        delayed.append(later)
        if len(delayed) > 2:
            now += delayed.pop(0)
        for event in now:
            event["timestamp"] = BASE_MS + len(events) * spacing_ms
            events.append(event)
        invoice += 1
    return events[:count]


def write_jsonl(path: Path, events: Iterable[Mapping[str, Any]]) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for event in events:
            out.write(json.dumps(event, separators=(",", ":")))
            out.write("\n")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def run_steps(
    lake_dir: Path,
    config_path: Path,
    steps: Sequence[str],
    spark: Any,
    timings: list[float] | None = None,
) -> list[dict[str, Any]]:
    """Run ``steps`` on the lake: ``pass`` (one ETL pass with one warm runner) or
    ``append:FILE.jsonl`` (:func:`append_events` into the first input's raw pool).
    Returns each pass's result as JSON without its timing, which goes to ``timings``."""
    from engine.api import EtlRunner, load_config
    from engine.lake.pools import Lake

    lake = Lake(lake_dir)
    config = load_config(config_path)
    runner = EtlRunner(config, lake, spark)
    results = []
    for step in steps:
        if step == "pass":
            data = runner.run_pass().to_json()
            seconds = data.pop("seconds", None)
            # where the time went differs from run to run; the results must not
            data.pop("phases", None)
            data.pop("spark_jobs", None)
            if timings is not None:
                timings.append(seconds)
            results.append(data)
        elif step.startswith("append:"):
            raw = lake.open_pool(config.inputs[0].pool)
            append_events(raw, read_jsonl(Path(step.removeprefix("append:"))))
        else:
            raise SystemExit(f"unknown step {step!r}: use `pass` or `append:FILE.jsonl`")
    return results


#: With :func:`small_passes`: above this many candidates a pass's outputs are written
#: by the executors (engine.etl.evaluate.DRIVER_OUTPUT_ROWS, 20,000 in production).
SMALL_DRIVER_OUTPUT_ROWS = 1_000


def small_passes(patch: Any | None = None) -> None:
    """Make this process's passes take the large-pass paths on little data: cold reads
    through delta-spark (no delta-rs log read) and outputs of more than
    :data:`SMALL_DRIVER_OUTPUT_ROWS` candidates written by the executors. ``patch`` (a
    ``pytest.MonkeyPatch``) undoes it afterwards; without one it lasts the process."""
    from engine.etl import evaluate, window

    for module, name, value in (
        (evaluate, "DRIVER_OUTPUT_ROWS", SMALL_DRIVER_OUTPUT_ROWS),
        (window, "LOG_READ_ROWS", 0),
    ):
        if patch is not None:
            patch.setattr(module, name, value)
        else:
            setattr(module, name, value)


def run_in_subprocess(
    master: str,
    jobs: Sequence[tuple[Path, Path, Sequence[str]]],
    *,
    home: Path,
    timeout: float = 1200,
    small: bool = False,
) -> dict[str, Any]:
    """Run ETL jobs ``(lake, config, steps)`` in a fresh process whose SparkSession uses
    ``master`` (through ``$ZYNC_SPARK_MASTER``, with ``home`` as its zync home); its
    JSON report. ``small``: with :func:`small_passes`."""
    spec = [
        {"lake": str(lake), "config": str(cfg), "steps": list(steps)} for lake, cfg, steps in jobs
    ]
    env = {**os.environ, "ZYNC_SPARK_MASTER": master, "ZYNC_HOME": str(home)}
    flags = ["--small-passes"] if small else []
    result = subprocess.run(
        [sys.executable, "-m", "tests.cluster", "etl", *flags, json.dumps(spec)],
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"ETL on {master} failed ({result.returncode}): {result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def table_rows(path: Path) -> Any:
    """Every row of the Delta table at ``path`` (delta-rs, no Spark), by seqno."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path)).to_pyarrow_table()
    return table.sort_by([("seqno", "ascending")])


def app_transactions(path: Path) -> dict[str, int]:
    """The Delta ``txn`` positions of a table (app id → version), read from its log."""
    found: dict[str, int] = {}
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            if line.startswith('{"txn"'):
                txn = json.loads(line)["txn"]
                found[txn["appId"]] = txn["version"]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.cluster etl JOBS_JSON``: run ETL jobs (a JSON list of
    ``{"lake", "config", "steps"}``) in this process on ``$ZYNC_SPARK_MASTER``; print
    a JSON report with the master, the number of executors and each job's passes."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.cluster")
    sub = parser.add_subparsers(dest="command", required=True)
    etl = sub.add_parser("etl", help="run ETL jobs here (master from $ZYNC_SPARK_MASTER)")
    etl.add_argument("jobs", help='JSON: [{"lake": DIR, "config": YAML, "steps": [...]}]')
    etl.add_argument("--small-passes", action="store_true", help="see small_passes()")
    args = parser.parse_args(argv)
    if args.small_passes:
        small_passes()

    from engine.spark import get_spark, stop_spark

    report: dict[str, Any] = {"jobs": []}
    started = time.monotonic()
    spark = get_spark()  # settings from $ZYNC_SPARK_MASTER / spark.json, like every command
    report["session_seconds"] = round(time.monotonic() - started, 3)
    try:
        for job in json.loads(args.jobs):
            begin = time.monotonic()
            timings: list[float] = []
            passes = run_steps(Path(job["lake"]), Path(job["config"]), job["steps"], spark, timings)
            report["jobs"].append(
                {
                    "passes": passes,
                    "pass_seconds": timings,
                    "seconds": round(time.monotonic() - begin, 3),
                }
            )
        report["master"] = spark.sparkContext.master
        report["executors"] = int(spark.sparkContext._jsc.sc().getExecutorIds().size())
    finally:
        stop_spark()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
