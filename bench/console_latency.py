"""Benchmark: how fast the console answers a key while the engine works.

    .venv/bin/python bench/console_latency.py [--presses 300] [--backlog 40000]
                                              [--gap 0.15] [--size 80x24] [--in-process]
                                              [--engine api|forwarding|both]

1. Starts a private Apache Kafka broker and Schema Registry on 127.0.0.1 (tests.stack),
   and the console exactly as `zync demo` builds it (``make_app(demo=True)``) on a lake in
   a temporary directory, driven by Textual's Pilot at the terminal size given (80x24:
   an operator's SSH window). The engine runs in the child process the console starts,
   as it does for a user (``--in-process``: in the console's own process):
   from-kafka, the ETL loop and to-kafka start by themselves.
2. Waits until the ETL loop runs, publishes the first demo batch (which registers the
   demo's Avro schemas), then keeps the engine busy: a thread publishes a backlog of
   ``--backlog`` invoice + status pairs (copies of the demo's records with new ids) in
   chunks, so from-kafka ingests and the ETL loop runs passes over new records the whole
   time.
3. Presses the panel keys 1 … 6 in turn, ``--presses`` times, ``--gap`` seconds apart.
   Each press is timed from the key reaching the app until every widget of the screen
   has handled what followed (the key, the panel switch, its layout) and the screen has
   been painted (:func:`press`); the new panel must then be the active one.

``--engine``: how the console reaches its engine in the child — ``api`` (the engine
serves its HTTP API on a Unix socket, as `zync demo` now does), ``forwarding`` (the
console's earlier way, a multiprocessing manager forwarding each call by name: its
module is read from git, ``FORWARDING_REV``), or ``both``, one after the other in this
run (a fresh broker, registry and lake each), for a comparison on the same machine.

Prints the p50 / p95 / max of key → screen updated, and how many records from-kafka
ingested and the ETL loop consumed while the keys were pressed. The bar (issue "Latency"): p95 ≤
100 ms. The headless driver does not write to a terminal; the time a terminal takes to
draw is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402 - after the sys.path line
from textual.widgets import TabbedContent  # noqa: E402

from demo.scenario import Demo, DemoRecord, read_batch  # noqa: E402
from engine.settings.kafka import KafkaProfile  # noqa: E402
from engine.settings.registry import RegistryProfile  # noqa: E402
from tests.stack import start_broker, start_registry  # noqa: E402
from zync_tui.console.app import make_app  # noqa: E402
from zync_tui.console.keys import PANELS  # noqa: E402

CHUNK = 2_000
#: The commit whose zync_tui/console/hosted.py forwarded the console's calls by name.
FORWARDING_REV = "bced9fa"


def forwarding_backend(settings: Any, work: Path) -> Any:
    """The console's earlier engine process (a multiprocessing manager forwarding every
    call by name), its module read from git at :data:`FORWARDING_REV`."""
    import importlib
    import subprocess

    source = subprocess.run(
        ["git", "show", f"{FORWARDING_REV}:zync_tui/console/hosted.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    where = work / "forwarding"
    where.mkdir(exist_ok=True)
    (where / "zync_forwarding_engine.py").write_text(source)
    sys.path.insert(0, str(where))  # the manager's spawned child imports it by name too
    module = importlib.import_module("zync_forwarding_engine")
    return module.EngineProcess(settings)


def backlog(pairs: int) -> list[list[DemoRecord]]:
    """Invoice + status pairs shaped like the demo's first batch, with new ids, in
    chunks of :data:`CHUNK` records."""
    batch = read_batch(ROOT / "demo" / "invoices" / "batch1.jsonl")
    invoice = next(r for r in batch if r.topic == "Invoices" and r.value.get("after"))
    status = next(r for r in batch if r.topic == "InvoiceStatus" and r.value.get("after"))
    records: list[DemoRecord] = []
    for n in range(pairs):
        invoice_id, status_id = 1_000_000 + n, 5_000_000 + n
        inv = copy.deepcopy(invoice.value)
        inv["after"]["ID"] = invoice_id
        st = copy.deepcopy(status.value)
        st["after"]["ID"] = status_id
        st["after"]["InvoiceID"] = invoice_id
        records.append(DemoRecord("Invoices", {"ID": invoice_id}, inv))
        records.append(DemoRecord("InvoiceStatus", {"ID": status_id}, st))
    return [records[i : i + CHUNK] for i in range(0, len(records), CHUNK)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def until(pilot: Any, predicate: Any, limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {limit:g} s waiting for {what}")
        await pilot.pause(0.2)


async def press(pilot: Any, key: str, shown: Callable[[], bool]) -> float:
    """Seconds from a key reaching the app until every widget of the screen has handled
    what followed and the screen has been painted again (``shown``: the key's effect is
    visible in the widget tree).

    Pilot's own ``press`` also waits until the process looks idle (``wait_for_idle``:
    sleeps that keep overshooting while the engine's threads work), which measures the
    machine, not the key; so the key goes to the driver as Pilot sends it, and the wait
    is for the screen only (Pilot's ``_wait_for_screen``, then one paint)."""
    app = pilot.app
    event = events.Key(key, key)
    event.set_sender(app)
    started = time.perf_counter()
    app._driver.send_message(event)
    deadline = started + 30
    while not shown() and time.perf_counter() < deadline:  # noqa: ASYNC110 - polls the app
        await asyncio.sleep(0.001)
    await pilot._wait_for_screen()
    app.screen._on_timer_update()
    return time.perf_counter() - started


def loop_records(app: Any, name: str) -> int:
    """Records the loop has handled, as the Loops panel shows them."""
    for loop in app.backend.loops():
        if loop.name == name:
            return int(loop.records or 0)
    return 0


def raw_records(driver: Any) -> int:
    """Records in the raw pool (its last seqno + 1)."""
    return int(driver.lake.open_pool("Raw").last_seqno()) + 1


async def measure(args: argparse.Namespace, work: Path, engine: str = "api") -> tuple[float, float]:
    width, height = (int(x) for x in args.size.split("x"))
    broker = start_broker(work / "broker")
    registry = start_registry(work / "registry")
    backend = None
    if engine == "forwarding" and not args.in_process:
        from zync_tui.console.backend import EngineSettings

        backend = forwarding_backend(
            EngineSettings(
                lake_root=work / "lake",
                kafka_overrides={"bootstrap_servers": broker.address},
                registry_overrides={"url": registry.url},
                demo=True,
                start_stack=False,
            ),
            work,
        )
    app = make_app(
        demo=True,
        lake=work / "lake",
        kafka={"bootstrap_servers": broker.address},
        registry={"url": registry.url},
        start_stack=False,
        in_process=args.in_process,
        backend=backend,
    )
    # the bench's own demo driver publishes the backlog and reads the raw pool (the
    # console's engine runs in another process)
    driver = Demo(
        lake_root=work / "lake",
        start_stack=False,
        kafka=KafkaProfile(bootstrap_servers=broker.address),
        registry=RegistryProfile(url=registry.url),
    )
    chunks = backlog(args.backlog)
    stop = threading.Event()
    errors: list[BaseException] = []
    try:
        async with app.run_test(size=(width, height)) as pilot:
            started = time.monotonic()
            await until(pilot, lambda: app.ready, 180, "the engine to start")
            total = app.backend.batches_total()
            await pilot.press("n")
            await until(pilot, lambda: app.backend.batches_left() == total - 1, 60, "demo batch 1")
            await until(pilot, lambda: loop_records(app, "etl") > 0, 180, "a first ETL pass")
            print(f"console ready, batch 1 through the ETL {time.monotonic() - started:.1f} s "
                  "after start")

            def publisher() -> None:
                try:
                    for chunk in chunks:
                        if stop.is_set():
                            return
                        driver.publish(chunk)
                except BaseException as exc:  # noqa: BLE001 - reported after the run
                    errors.append(exc)

            thread = threading.Thread(target=publisher, daemon=True)
            thread.start()
            await until(pilot, lambda: raw_records(driver) > 1_000, 120, "the backlog")
            tabs = app.screen_stack[0].query_one(TabbedContent)
            etl_before = loop_records(app, "etl")
            ingest_before = await asyncio.to_thread(raw_records, driver)
            began = time.monotonic()
            timings: list[float] = []
            for i in range(args.presses):
                index = (i + 1) % len(PANELS)
                panel = PANELS[index]
                timings.append(
                    await press(pilot, str(index + 1), lambda p=panel: tabs.active == p)
                )
                if tabs.active != PANELS[index]:
                    raise SystemExit(f"key {index + 1} did not show {PANELS[index]}")
                await asyncio.sleep(args.gap)
            seconds = time.monotonic() - began
            etl = loop_records(app, "etl") - etl_before
            ingest = await asyncio.to_thread(raw_records, driver) - ingest_before
            stop.set()
            thread.join(120)
            if errors:
                raise SystemExit(f"publishing the backlog failed: {errors[0]}")
            ms = [t * 1000 for t in timings]
            print(f"{len(ms)} presses over {seconds:.1f} s at {args.size}; meanwhile "
                  f"from-kafka ingested {ingest:,} records and the ETL consumed {etl:,}")
            print(f"[{engine}] key -> screen updated: p50 {statistics.median(ms):.1f} ms, "
                  f"p95 {percentile(ms, 0.95):.1f} ms, max {max(ms):.1f} ms "
                  "(bar: p95 <= 100 ms)", flush=True)
            result = statistics.median(ms), percentile(ms, 0.95)
            print("stopping the loops (a pass in flight ends first)…", flush=True)
            app.backend.close()
    finally:
        stop.set()
        app.backend.close()
        registry.stop()
        broker.stop()
    return result


def main() -> None:
    from bench.stopping import stop_on_sigterm

    stop_on_sigterm()  # a killed run still stops its broker and registry
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presses", type=int, default=300)
    parser.add_argument("--backlog", type=int, default=40_000, help="invoice + status pairs")
    parser.add_argument("--gap", type=float, default=0.15, help="seconds between presses")
    parser.add_argument("--size", default="80x24", help="terminal columns x rows")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the engine in the console's process (the default is a child process, "
        "as `zync demo` does)",
    )
    parser.add_argument(
        "--engine", choices=("api", "forwarding", "both"), default="api",
        help="how the console reaches its engine's process (both: each in turn, this run)",
    )  # fmt: skip
    args = parser.parse_args()
    results = {}
    for engine in ("api", "forwarding") if args.engine == "both" else (args.engine,):
        with tempfile.TemporaryDirectory(prefix="zync-console-bench-") as work:
            results[engine] = asyncio.run(measure(args, Path(work), engine))
    if len(results) == 2:
        (a50, a95), (f50, f95) = results["api"], results["forwarding"]
        print(f"over the API p50 {a50:.1f} ms, p95 {a95:.1f} ms; over the forwarding p50 "
              f"{f50:.1f} ms, p95 {f95:.1f} ms (bar: the API's p95 no worse)")


if __name__ == "__main__":
    main()
