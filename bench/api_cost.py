"""Benchmark: what serving the API costs the loops, and how fast /metrics answers.

    .venv/bin/python bench/api_cost.py [--records 300000] [--runs 3] [--pairs 60]

1. Ingest (as bench/peers.py): a private broker and Schema Registry, N Debezium-like
   Avro records on a 1-partition topic; ``zync from-kafka`` timed from its start until
   its pool holds the N records, ``--runs`` times each way, alternating: **no scrape**
   (``--no-api``) and **a scrape a second** (the API on a free port, bench/api_load.py's
   Scraper at ``/metrics`` every second — the scrapes' p95 is the figure for a busy
   process). Prints the medians and the throughput ratio (bar: the API costs ≤ 5 %).
2. End to end (bench/e2e_latency.py, a ``zync run`` of the invoice scenario), three
   times in this run: without the API (``--no-api``), with a scrape a second, then with
   a hostile client too (rounds of 1,000 concurrent scrapes, malformed requests, a
   slowloris connection). Prints each run's p50/p95 (bars: the API costs no latency; the
   hostile client slows it by ≤ 10 %).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_load import Scraper, percentile  # noqa: E402 - after the sys.path line
from bench.avro_records import encoded_records, produce  # noqa: E402
from bench.peers import Stack, timed_until_full  # noqa: E402


def ingest(stack: Stack, topic: str, n: int, label: str, scrape: bool) -> tuple[float, list[float]]:
    """Seconds until the pool holds ``n`` records, and the scrapes' times."""
    from engine.local.processes import free_port

    lake = stack.work / "lake"
    pool = f"bench_{label}"
    argv = [str(Path(sys.executable).with_name("zync")), "from-kafka", "-t", topic, "-p", pool,
            "--lake", str(lake), "--create-pool", "--exit-after", "2s", "--quiet"]  # fmt: skip
    scraper = None
    if scrape:
        port = free_port()
        argv += ["--http", f"127.0.0.1:{port}", "--http-public-read"]
        scraper = Scraper(f"http://127.0.0.1:{port}")
        scraper.start()
    else:
        argv.append("--no-api")
    try:
        seconds, _ = timed_until_full(label, argv, stack.env(), lake / pool, n, stack.work)
    finally:
        if scraper is not None:
            scraper.stop.set()
            scraper.join(30)
    return seconds, scraper.times if scraper else []


def main() -> None:
    from bench.stopping import stop_on_sigterm

    stop_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=60, help="bench/e2e_latency.py --pairs")
    parser.add_argument("--skip-e2e", action="store_true")
    args = parser.parse_args()

    from engine.kafka.registry_client import RegistrySchemas
    from engine.local import broker, processes, registry
    from engine.settings.registry import RegistryProfile
    from tests.fixtures import debezium as dbz

    with tempfile.TemporaryDirectory(prefix="zync-bench-api-") as tmp:
        work = Path(tmp)
        broker_proc = broker.start_broker(work / "broker", port=0, timeout=60)
        registry_proc = registry.start_registry(work / "registry", port=0, timeout=60)
        try:
            stack = Stack(broker_proc.address, registry_proc.address, work)
            schemas = RegistrySchemas(RegistryProfile(url=registry_proc.address))
            topic = "bench.api.p1"
            value_id = schemas.register(f"{topic}-value", dbz.AVRO_VALUE_SCHEMA)
            key_id = schemas.register(f"{topic}-key", dbz.AVRO_KEY_SCHEMA)
            produce(stack.profile, topic, args.records, *encoded_records(value_id, key_id))
            plain, scraped, scrapes = [], [], []
            for k in range(args.runs):
                order = (False, True) if k % 2 == 0 else (True, False)
                for scrape in order:
                    seconds, times = ingest(stack, topic, args.records, f"r{k}-{int(scrape)}", scrape)
                    (scraped if scrape else plain).append(seconds)
                    scrapes += times
                    print(f"  run {k + 1}: {'a scrape a second' if scrape else 'no API'} "
                          f"{seconds:.2f}s", flush=True)
            a, b = sorted(plain)[len(plain) // 2], sorted(scraped)[len(scraped) // 2]
            print(f"from-kafka {args.records:,} records: no API {args.records / a:,.0f} rec/s, "
                  f"scraped every 1 s {args.records / b:,.0f} rec/s ({(b / a - 1) * 100:+.1f} % "
                  "time; bar: <= 5 %)")
            print(f"/metrics during the busy ingest: {len(scrapes)} scrapes, p50 "
                  f"{percentile(scrapes, 0.5) * 1000:.1f} ms, p95 {percentile(scrapes, 0.95) * 1000:.1f} ms, "
                  f"max {max(scrapes, default=0) * 1000:.1f} ms (bar: p95 <= 50 ms)", flush=True)
        finally:
            processes.stop_process(registry_proc)
            processes.stop_process(broker_proc)
    if args.skip_e2e:
        return
    for extra in (["--no-api"], ["--scrape"], ["--scrape", "--hostile"]):
        print(f"== bench/e2e_latency.py {' '.join(extra)}", flush=True)
        subprocess.run(
            [sys.executable, "-m", "bench.e2e_latency", "--pairs", str(args.pairs), *extra],
            cwd=ROOT, env=os.environ, check=False,
        )  # fmt: skip
    print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
