"""Benchmark: how fast the console answers a key while the engine works.

    .venv/bin/python bench/console_latency.py [--presses 300] [--backlog 40000]
                                              [--gap 0.15] [--size 80x24]
                                              [--legs floor,fake,engine] [--wide]
                                              [--rounds 1] [--engine api|forwarding|both]
                                              [--in-process]

Each run measures, in one process and in the same minutes, its legs (``--legs``):

* **floor**: a bare Textual app — a TabbedContent of six panes, each a 40-row DataTable —
  whose keys 1 … 6 switch panes: what the toolkit itself costs a switch on this machine.
* **fake**: the console over the tests' fake engine (tests/console/fakes.py), its polls
  every second as in production, every snapshot's numbers moving on: the console's own
  cost with no engine beside it. Bar (issue 38): p95 within 1.3× the floor's.
* **engine**: the console as a user runs it, its engine a child process serving the API
  (``--in-process``: in the console's process) on a private Apache Kafka broker and
  Schema Registry (tests.stack) and a lake in a temporary directory, the loops started by
  themselves, while a backlog is published from another process, so that from-kafka
  ingests and the ETL loop runs passes over new records the whole time. The invoice
  configuration is the demo's (``make_app(demo=True)``), its backlog ``--backlog`` invoice
  + status pairs. Bars: p95 ≤ 100 ms, p50 ≤ 40 ms.

``--wide``: the fake and engine legs run twice, with the invoice configuration and with a
whole database's (tests/fixtures/wide.py: 200 Debezium topics of 60-column rows, a
pass-through rule and an output topic each; the fake: 200 topics, rules, outputs and
tables, 600 pending records), one after the other, the order alternating between
rounds. Bar (issue 41): p95 at 200 topics no worse than with the invoice configuration.

Each leg presses the panel keys 1 … 6 in turn, ``--presses`` times, ``--gap`` seconds
apart. A press is timed from the key reaching the app until every widget of the screen
has handled what followed (the key, the panel switch, its layout) and the screen has
been painted (:func:`press`); the new panel must then be the active one. The headless
driver does not write to a terminal: a terminal's drawing is not counted.

``--engine``: how the console reaches its engine — ``api`` (as `zync tui` does), or
``forwarding`` (the earlier way, a multiprocessing manager forwarding each call by name:
its module is read from git, ``FORWARDING_REV``), or ``both``, one after the other.

Prints p50 / p95 / max per leg with the load average beside it, and the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402 - after the sys.path line
from textual.app import App, ComposeResult  # noqa: E402
from textual.binding import Binding  # noqa: E402
from textual.widgets import DataTable, TabbedContent, TabPane  # noqa: E402

CHUNK = 2_000
#: The commit whose zync_tui/console/hosted.py forwarded the console's calls by name.
FORWARDING_REV = "bced9fa"
#: Tables of the wide configuration, and events each gets before the console starts.
WIDE_TABLES = 200
WIDE_COLUMNS = 60


@dataclass
class Leg:
    """One measured leg: its name, the key timings (ms), the CPU time the console's main
    thread spent in each press (ms), the load average meanwhile."""

    name: str
    ms: list[float]
    cpu: list[float]
    load: tuple[float, float]
    note: str = ""

    @property
    def p50(self) -> float:
        return statistics.median(self.ms)

    @property
    def p95(self) -> float:
        return percentile(self.ms, 0.95)

    def line(self) -> str:
        return (
            f"[{self.name}] key -> screen: p50 {self.p50:.1f} ms, p95 {self.p95:.1f} ms, max "
            f"{max(self.ms):.1f} ms; the main thread's CPU per press p50 {statistics.median(self.cpu):.1f} "
            f"ms, p95 {percentile(self.cpu, 0.95):.1f} ms ({len(self.ms)} presses; load average "
            f"{self.load[0]:.1f} before, {self.load[1]:.1f} after){self.note}"
        )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load() -> float:
    return os.getloadavg()[0]


# ---------------------------------------------------------------- timing a press


async def press(pilot: Any, key: str, shown: Callable[[], bool]) -> tuple[float, float, float]:
    """When a key reached the app and when every widget of the screen had handled what
    followed and the screen had been painted again (``shown``: the key's effect is
    visible in the widget tree), as ``time.monotonic()`` readings; and the CPU seconds
    the main thread (the app's event loop) spent meanwhile.

    Pilot's own ``press`` also waits until the process looks idle (``wait_for_idle``:
    sleeps that keep overshooting while the engine's threads work), which measures the
    machine, not the key; so the key goes to the driver as Pilot sends it, and the wait
    is for the screen only (Pilot's ``_wait_for_screen``, then one paint)."""
    app = pilot.app
    event = events.Key(key, key)
    event.set_sender(app)
    started, cpu = time.monotonic(), time.thread_time()
    app._driver.send_message(event)
    deadline = started + 30
    while not shown() and time.monotonic() < deadline:  # noqa: ASYNC110 - polls the app
        await asyncio.sleep(0.001)
    await pilot._wait_for_screen()
    app.screen._on_timer_update()
    return started, time.monotonic(), time.thread_time() - cpu


async def press_panels(
    pilot: Any, panels: list[str], args: argparse.Namespace, name: str
) -> tuple[list[float], list[float]]:
    """Press 1 … 6 in turn; the milliseconds of each press and of the main thread's CPU
    in it."""
    tabs = pilot.app.screen_stack[0].query_one(TabbedContent)
    spans: list[tuple[float, float, float]] = []
    for i in range(args.presses):
        index = (i + 1) % len(panels)
        spans.append(await press(pilot, str(index + 1), lambda p=panels[index]: tabs.active == p))
        if tabs.active != panels[index]:
            raise SystemExit(f"[{name}] key {index + 1} did not show {panels[index]}")
        await asyncio.sleep(args.gap)
    return [(e - s) * 1000 for s, e, _ in spans], [c * 1000 for _, _, c in spans]


# ---------------------------------------------------------------- the floor


class BareTabs(App[None]):
    """Six panes of a TabbedContent, each a 40-row DataTable; keys 1 … 6 switch."""

    BINDINGS = [Binding(str(i + 1), f"show('pane-{i}')") for i in range(6)]

    def compose(self) -> ComposeResult:
        with TabbedContent(initial="pane-0"):
            for i in range(6):
                with TabPane(f"{i + 1} Pane", id=f"pane-{i}"):
                    yield DataTable(id=f"table-{i}")

    def on_mount(self) -> None:
        for i, table in enumerate(self.query(DataTable)):
            table.add_columns("name", "partition", "low", "high", "lag", "rate")
            table.add_rows([(f"topic-{i}-{n}", "0", str(n), str(n * 7), str(n % 5), f"{n / 3:.1f}/s") for n in range(40)])

    def action_show(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane


async def floor_leg(args: argparse.Namespace, size: tuple[int, int]) -> Leg:
    app = BareTabs()
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.5)
        before = load()
        ms, cpu = await press_panels(pilot, [f"pane-{i}" for i in range(6)], args, "floor")
    return Leg("floor: bare Textual app", ms, cpu, (before, load()))


# ---------------------------------------------------------------- the fake engine


async def fake_leg(args: argparse.Namespace, size: tuple[int, int], config: str) -> Leg:
    from tests.console.fakes import FakeBackend, WideBackend
    from zync_tui.console.app import make_app
    from zync_tui.console.keys import PANELS
    from zync_tui.console.polls import POLLS

    backend = WideBackend(WIDE_TABLES, moving=True) if config == "wide" else FakeBackend(demo=True, moving=True)
    app = make_app(backend=backend, interval=1.0)
    async with app.run_test(size=size) as pilot:
        deadline = time.monotonic() + 60
        while not set(POLLS) <= app.polled:
            if time.monotonic() > deadline:
                raise SystemExit("[fake] the first polls did not come")
            await pilot.pause(0.1)
        before = load()
        ms, cpu = await press_panels(pilot, list(PANELS), args, f"fake-{config}")
    return Leg(f"fake engine, {config}", ms, cpu, (before, load()))


# ---------------------------------------------------------------- the real engine


def invoice_backlog(pairs: int) -> list[list[Any]]:
    """Invoice + status pairs shaped like the demo's first batch, with new ids, in
    chunks of :data:`CHUNK` records."""
    from demo.scenario import DemoRecord, read_batch

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


def publish_backlog(config: str, bootstrap: str, registry: str, work: str, count: int) -> None:
    """The backlog, published from a process of its own (its serialisation must not share
    the console's interpreter lock): ``count`` invoice + status pairs, or ``count`` wide
    change events spread over the tables."""
    if config == "invoice":
        from demo.scenario import Demo
        from engine.settings.kafka import KafkaProfile
        from engine.settings.registry import RegistryProfile

        driver = Demo(
            lake_root=Path(work) / "publisher-lake", start_stack=False,
            kafka=KafkaProfile(bootstrap_servers=bootstrap), registry=RegistryProfile(url=registry),
        )  # fmt: skip
        for chunk in invoice_backlog(count):
            driver.publish(chunk)
        return
    from bench.peers import Stack
    from bench.width import produce
    from tests.fixtures import wide

    stack = Stack(bootstrap, registry, Path(work))
    schemas = {wide.topic(t): (wide.key_schema(t), wide.value_schema(t, WIDE_COLUMNS)) for t in range(WIDE_TABLES)}
    # the first two events of each table were published before the console started;
    # one call, so one serializer per topic, as a connector keeps them (one per round
    # registered every schema again: the registry and this process took a core)
    rounds = max(1, -(-count // WIDE_TABLES))
    events = {wide.topic(t): [wide.change(t, n, columns=WIDE_COLUMNS) for n in range(2, 2 + rounds)] for t in range(WIDE_TABLES)}
    produce(stack, events, "avro", schemas)


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
    return _DemoAsCapability(module.EngineProcess(settings))


class _DemoAsCapability:
    """The earlier engine process as today's console asks a backend: its demo batches
    behind ``backend.demo`` (None outside the demo), where it had a flag and the three
    calls on itself; everything else forwarded as it is."""

    def __init__(self, process: Any) -> None:
        self._process = process

    @property
    def demo(self) -> Any:
        return self._process if self._process.demo else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._process, name)


async def until(pilot: Any, predicate: Callable[[], bool], limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {limit:g} s waiting for {what}")
        await pilot.pause(0.2)


def loop_records(app: Any, name: str) -> int:
    """Records the loop has handled, as the Loops panel shows them."""
    for loop in app.backend.loops():
        if loop.name == name:
            return int(loop.records or 0)
    return 0


def raw_records(lake: Path) -> int:
    """Records in the raw pool (its last seqno + 1)."""
    from engine.api import Lake

    return int(Lake(lake).open_pool("Raw").last_seqno()) + 1


def wide_setup(broker: str, registry: str, work: Path) -> Path:
    """Two change events of each of the wide configuration's tables (their schemas
    registered, their topics made), and the configuration's file."""
    import yaml

    from bench.peers import Stack
    from bench.width import produce
    from tests.fixtures import wide

    stack = Stack(broker, registry, work)
    schemas = {wide.topic(t): (wide.key_schema(t), wide.value_schema(t, WIDE_COLUMNS)) for t in range(WIDE_TABLES)}
    produce(stack, {wide.topic(t): [wide.change(t, n, columns=WIDE_COLUMNS) for n in range(2)] for t in range(WIDE_TABLES)}, "avro", schemas)
    path = work / "wide.yaml"
    path.write_text(yaml.safe_dump(wide.pass_through_config(WIDE_TABLES), sort_keys=False))
    return path


async def engine_leg(args: argparse.Namespace, size: tuple[int, int], config: str, engine: str, work: Path) -> Leg:
    from tests.stack import start_broker, start_registry
    from zync_tui.console.app import make_app
    from zync_tui.console.keys import PANELS

    broker = start_broker(work / "broker")
    registry = start_registry(work / "registry")
    profiles = {"kafka": {"bootstrap_servers": broker.address}, "registry": {"url": registry.url}}
    demo = config == "invoice"
    path = None if demo else wide_setup(broker.address, registry.url, work)
    backend = None
    if engine == "forwarding" and not args.in_process:
        from zync_tui.console.backend import EngineSettings

        settings = EngineSettings(
            config_path=path, lake_root=work / "lake", kafka_overrides=profiles["kafka"],
            registry_overrides=profiles["registry"], demo=demo, start_stack=False,
        )  # fmt: skip
        backend = forwarding_backend(settings, work)
    app = make_app(
        path, demo=demo, lake=work / "lake", start_stack=False, in_process=args.in_process,
        backend=backend, kafka=profiles["kafka"], registry=profiles["registry"],
    )  # fmt: skip
    count = args.backlog if demo else args.backlog // 4
    publisher = multiprocessing.get_context("spawn").Process(
        target=publish_backlog, args=(config, broker.address, registry.url, str(work), count), daemon=True
    )
    name = f"engine over {engine}{' in process' if args.in_process else ''}, {config}"
    try:
        async with app.run_test(size=size) as pilot:
            started = time.monotonic()
            await until(pilot, lambda: app.ready, 300, "the engine to start")
            if demo:
                total = app.backend.demo.batches_total()
                await pilot.press("n")
                await until(pilot, lambda: app.backend.demo.batches_left() == total - 1, 60, "demo batch 1")
            await until(pilot, lambda: loop_records(app, "etl") > 0, 300, "a first ETL pass")
            print(f"[{name}] console ready, the first events through the ETL "
                  f"{time.monotonic() - started:.1f} s after start", flush=True)
            publisher.start()
            await until(pilot, lambda: raw_records(work / "lake") > (1_000 if demo else 1_000), 300, "the backlog")
            etl_before = loop_records(app, "etl")
            ingest_before = await asyncio.to_thread(raw_records, work / "lake")
            began, before = time.monotonic(), load()
            ms, cpu = await press_panels(pilot, list(PANELS), args, f"engine-{engine}-{config}")
            seconds, after = time.monotonic() - began, load()
            etl = loop_records(app, "etl") - etl_before
            ingest = await asyncio.to_thread(raw_records, work / "lake") - ingest_before
            note = (f"; over {seconds:.0f} s from-kafka ingested {ingest:,} records and the "
                    f"ETL consumed {etl:,}")  # fmt: skip
            print("stopping the loops (a pass in flight ends first)…", flush=True)
            app.backend.close()
    finally:
        if publisher.pid is not None:
            publisher.terminate()
            publisher.join(30)
        app.backend.close()
        registry.stop()
        broker.stop()
    return Leg(name, ms, cpu, (before, after), note)


# ---------------------------------------------------------------- the run


async def run_leg(args: argparse.Namespace, leg: str, config: str, engine: str) -> Leg:
    size = tuple(int(x) for x in args.size.split("x"))
    assert len(size) == 2
    if leg == "floor":
        return await floor_leg(args, (size[0], size[1]))
    if leg == "fake":
        return await fake_leg(args, (size[0], size[1]), config)
    with tempfile.TemporaryDirectory(prefix="zync-console-bench-") as work:
        return await engine_leg(args, (size[0], size[1]), config, engine, Path(work))


def plan(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(leg, configuration, engine) in the order run: each round alternates the order of
    the configurations and of the engines."""
    legs = args.legs.split(",")
    configs = ["invoice", "wide"] if args.wide else ["invoice"]
    engines = ["api", "forwarding"] if args.engine == "both" else [args.engine]
    runs: list[tuple[str, str, str]] = []
    for round_ in range(args.rounds):
        order = configs if round_ % 2 == 0 else configs[::-1]
        engine_order = engines if round_ % 2 == 0 else engines[::-1]
        if "floor" in legs:
            runs.append(("floor", "-", "-"))
        if "fake" in legs:
            runs += [("fake", c, "-") for c in order]
        if "engine" in legs:
            runs += [("engine", c, e) for c in order for e in engine_order]
    return runs


def summary(results: list[tuple[tuple[str, str, str], Leg]]) -> None:
    def p95s(leg: str, config: str = "-", engine: str = "-") -> list[float]:
        return [r.p95 for (lg, c, e), r in results if (lg, c, e) == (leg, config, engine)]

    floor = p95s("floor")
    for config in ("invoice", "wide"):
        fake = p95s("fake", config)
        if floor and fake:
            ratio = statistics.median(fake) / statistics.median(floor)
            print(f"fake engine, {config}: p95 / floor p95 = {ratio:.2f} (bar <= 1.3)")
    for engine in ("api", "forwarding"):
        for config in ("invoice", "wide"):
            for (lg, c, e), r in results:
                if (lg, c, e) == ("engine", config, engine):
                    ok = "met" if r.p95 <= 100 and r.p50 <= 40 else "NOT met"
                    print(f"engine over {engine}, {config}: p50 {r.p50:.1f} ms, p95 {r.p95:.1f} ms "
                          f"(bars p50 <= 40 ms, p95 <= 100 ms: {ok})")
    for leg, engine in (("fake", "-"), ("engine", "api"), ("engine", "forwarding")):
        wide, invoice = p95s(leg, "wide", engine), p95s(leg, "invoice", engine)
        if wide and invoice:
            ratio = statistics.median(wide) / statistics.median(invoice)
            print(f"{leg}{'' if engine == '-' else ' over ' + engine}: p95 at {WIDE_TABLES} topics / "
                  f"invoice = {ratio:.2f} (bar <= 1.0, within this machine's spread)")
    api, forwarding = p95s("engine", "invoice", "api"), p95s("engine", "invoice", "forwarding")
    if api and forwarding:
        print(f"engine p95 over the API / over the forwarding = {statistics.median(api) / statistics.median(forwarding):.2f}")


def main() -> None:
    from bench.stopping import stop_on_sigterm

    stop_on_sigterm()  # a killed run still stops its broker and registry
    # multiprocessing's resource tracker started now: started later, under the Pilot,
    # it would pass the captured stderr's descriptor (-1) and the publisher not start
    resource_tracker.ensure_running()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presses", type=int, default=300)
    parser.add_argument("--backlog", type=int, default=40_000,
                        help="invoice + status pairs (the wide configuration: a quarter as many events)")
    parser.add_argument("--gap", type=float, default=0.15, help="seconds between presses")
    parser.add_argument("--size", default="80x24", help="terminal columns x rows")
    parser.add_argument("--legs", default="floor,fake,engine", help="which legs, comma-separated")
    parser.add_argument("--wide", action="store_true",
                        help=f"also the {WIDE_TABLES}-topic configuration (fake and engine legs)")
    parser.add_argument("--rounds", type=int, default=1, help="the legs again, order alternating")
    parser.add_argument("--in-process", action="store_true",
                        help="run the engine in the console's process (the default is a child process)")
    parser.add_argument("--engine", choices=("api", "forwarding", "both"), default="api",
                        help="how the console reaches its engine's process (both: each in turn)")
    args = parser.parse_args()
    print(f"console pid {os.getpid()}; load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    results = []
    for leg, config, engine in plan(args):
        result = asyncio.run(run_leg(args, leg, config, engine))
        print(result.line(), flush=True)
        results.append(((leg, config, engine), result))
    summary(results)


if __name__ == "__main__":
    main()
