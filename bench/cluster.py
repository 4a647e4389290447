"""ETL on a 2-worker Spark standalone cluster vs local[2], on the same machine.

Builds a raw pool of N new records once (the invoice stream of ``tests.cluster``,
default 1,000,000, in commits of 100,000), copies the lake twice, and runs one ETL pass
over each copy in a fresh process: once with ``local[2]``, once on a standalone
cluster (a master and two workers of 1 core each, started here with the pyspark
package's ``spark-class`` and stopped at the end). Each process first runs a pass over
the small demo scenario to warm its JVM up, so the timed pass is a warm one.

Both run on this machine's cores, so this measures correctness (the two staging pools
must be identical) and what the cluster costs in overhead, not a speed-up.

    .venv/bin/python bench/cluster.py [--records 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cluster import (  # noqa: E402 - after the sys.path line that runs it from a checkout
    app_transactions,
    append_events,
    invoice_events,
    run_in_subprocess,
    start_cluster,
    table_rows,
)

CONFIG = ROOT / "demo" / "invoices" / "etl.yaml"
DEMO = ROOT / "demo" / "invoices"


def _lake(root: Path) -> Path:
    from engine.lake.pools import Lake

    lake = Lake(root)
    lake.create_pool("Raw", "raw")
    lake.create_pool("Staging", "staging")
    return root


def _run(label: str, master: str, work: Path, base: Path, warm: Path) -> dict:
    lake = shutil.copytree(base, work / f"lake-{label}")
    warm_lake = shutil.copytree(warm, work / f"warm-{label}")
    warm_steps = [f"append:{DEMO / f'batch{n}.jsonl'}" for n in range(1, 5)] + ["pass"]
    started = time.monotonic()
    report = run_in_subprocess(
        master, [(warm_lake, CONFIG, warm_steps), (lake, CONFIG, ["pass"])], home=work / "home"
    )
    report["process_seconds"] = time.monotonic() - started
    report["lake"] = lake
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args()

    from engine.lake.pools import Lake

    work = args.keep or Path(tempfile.mkdtemp(prefix="zync-bench-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "home").mkdir(exist_ok=True)
    try:
        t = time.monotonic()
        events = invoice_events(args.records)
        base = _lake(work / "base")
        append_events(Lake(base).open_pool("Raw"), events, chunk=100_000)
        del events
        warm = _lake(work / "warm")
        print(
            f"raw pool: {args.records:,} records built in {time.monotonic() - t:.1f}s", flush=True
        )

        local = _run("local", "local[2]", work, base, warm)
        print(f"local[2]: pass {local['jobs'][1]['pass_seconds'][0]:.1f}s", flush=True)

        t = time.monotonic()
        with start_cluster(work / "cluster", workers=2, cores=1, memory="1g") as cluster:
            cluster_start = time.monotonic() - t
            print(f"cluster up in {cluster_start:.1f}s: {cluster.master_url}", flush=True)
            remote = _run("cluster", cluster.master_url, work, base, warm)
            leftovers_before_stop = len(cluster.leftovers())
        assert not cluster.leftovers(), "cluster processes left running"

        same_rows = all(
            table_rows(local["lake"] / pool).equals(table_rows(remote["lake"] / pool))
            for pool in ("Raw", "Staging")
        )
        same_positions = app_transactions(local["lake"] / "Staging") == app_transactions(
            remote["lake"] / "Staging"
        )
        same_results = local["jobs"][1]["passes"] == remote["jobs"][1]["passes"]
        result = local["jobs"][1]["passes"][0]
        lp, rp = local["jobs"][1]["pass_seconds"][0], remote["jobs"][1]["pass_seconds"][0]
        print()
        print(f"ETL pass over {args.records:,} new raw records (invoice scenario)")
        print(
            f"  consumed {sum(result['consumed'].values()):,}, outputs "
            f"{sum(result['outputs'].values()):,}, expired {sum(result['expired'].values()):,}, "
            f"pending {sum(result['pending'].values()):,}"
        )
        print(f"  {'':24}{'local[2]':>12}{'cluster':>12}")
        print(
            f"  {'session start (s)':24}{local['session_seconds']:>12.1f}{remote['session_seconds']:>12.1f}"
        )
        print(
            f"  {'warm-up pass (s)':24}{local['jobs'][0]['seconds']:>12.1f}{remote['jobs'][0]['seconds']:>12.1f}"
        )
        print(f"  {'ETL pass (s)':24}{lp:>12.1f}{rp:>12.1f}")
        print(
            f"  {'whole process (s)':24}{local['process_seconds']:>12.1f}{remote['process_seconds']:>12.1f}"
        )
        print(f"  executors: local 0 (in the driver), cluster {remote['executors']}")
        print(f"  cluster start (master + 2 workers): {cluster_start:.1f}s")
        print(
            f"  overhead of the cluster on the pass: {rp - lp:+.1f}s ({(rp / lp - 1) * 100:+.0f}%)"
        )
        print(
            f"  identical results: pass {same_results}, rows {same_rows}, positions {same_positions}"
        )
        print(
            f"  processes left after stop: {len(cluster.leftovers())} (before: {leftovers_before_stop})"
        )
        return 0 if same_rows and same_positions and same_results else 1
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
