"""Regenerate the console's pictures in screenshots/ by running the invoice demo.

    .venv/bin/python scripts/screenshots.py [--out screenshots] [--size 100x30]

A private broker and registry (free ports, a temporary zync home, stopped by PID at the
end), a temporary lake and the real loops; the console is built by the same factory as
`zync demo` and driven by Textual's Pilot. Pictures (SVG, and PNG when `rsvg-convert`
or `cairosvg` is available):

* ``after-batch-2-*``: Dan's invoice waits for its status row (Pending, Topics);
* ``after-batch-4-*``: all 8 outputs in Staging and on NewInvoices (Topics, Loops, ETL, Log);
* ``expired-*``: an invoice whose status never comes, expired once the Invoices topic
  is an hour past it (Expired, and the full record);
* ``broker-down-*``: the broker stopped under the running console (Topics, Loops).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# An invoice whose status row never arrives, then a change to another invoice two hours
# later (event time): the first expires under the rule's `expire-after: 1h`.
LATE = [
    {
        "topic": "Invoices",
        "key": {"ID": 104},
        "value": {
            "before": None,
            "after": {"ID": 104, "customer": "Eve", "item": "salsa"},
            "source": {"version": "2.7.3.Final", "connector": "postgresql", "name": "shop",
                       "ts_ms": 1714560000000, "snapshot": "false", "db": "shop", "schema": "public",
                       "table": "Invoices", "lsn": 1200},
            "op": "c",
            "ts_ms": 1714560000005,
        },
    },
    {
        "topic": "Invoices",
        "key": {"ID": 100},
        "value": {
            "before": {"ID": 100, "customer": "Alice", "item": "taco"},
            "after": {"ID": 100, "customer": "Alice", "item": "taco supreme"},
            "source": {"version": "2.7.3.Final", "connector": "postgresql", "name": "shop",
                       "ts_ms": 1714567200000, "snapshot": "false", "db": "shop", "schema": "public",
                       "table": "Invoices", "lsn": 1208},
            "op": "u",
            "ts_ms": 1714567200005,
        },
    },
]


def to_png(svg: Path) -> Path | None:
    png = svg.with_suffix(".png")
    if shutil.which("rsvg-convert"):
        # Textual's SVG relies on the browser keeping runs of spaces; librsvg collapses
        # them unless told to preserve them (indentation would be lost).
        text = svg.read_text(encoding="utf-8").replace("<svg ", '<svg xml:space="preserve" ', 1)
        subprocess.run(["rsvg-convert", "-b", "#1e1e1e", "-o", str(png)], input=text.encode(), check=True)
        return png
    try:
        import cairosvg  # type: ignore[import-not-found]
    except ImportError:
        return None
    cairosvg.svg2png(url=str(svg), write_to=str(png))
    return png


async def wait(pilot: Any, predicate: Any, limit: float, what: str, thread: bool = False) -> None:
    deadline = time.monotonic() + limit
    while True:
        ok = await asyncio.to_thread(predicate) if thread else predicate()
        if ok:
            return
        if time.monotonic() > deadline:
            app = pilot.app
            loops = "; ".join(f"{v.name} {v.state} {v.error or ''}" for v in app.backend.loops())
            log = "\n".join(" | ".join(r) for r in table_rows(app, "log")[:20])
            pending = table_rows(app, "pending")
            raise SystemExit(
                f"screenshots: timed out after {limit:g}s waiting for {what}\n"
                f"loops: {loops}\npending: {pending}\nlog:\n{log}"
            )
        await pilot.pause(0.25)


def table_rows(app: Any, panel: str) -> list[list[str]]:
    from zync_tui.console.widgets.tables import LiveTable

    table = app.screen_stack[0].query_one(f"#{panel}-panel").query_one(LiveTable)
    table.flush()  # the rows it shows when it comes into view, here and now
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def run(out: Path, size: tuple[int, int]) -> list[Path]:
    from demo.scenario import Demo, DemoRecord
    from engine.api import KafkaProfile, RegistryProfile
    from engine.local import broker, processes, registry
    from zync_tui.console.app import make_app

    work = Path(tempfile.mkdtemp(prefix="zync-shots-"))
    os.environ["ZYNC_HOME"] = str(work / "home")
    broker = broker.start_broker(work / "broker", port=0)
    registry = registry.start_registry(work / "registry", port=0)
    shots: list[Path] = []
    app = make_app(
        demo=True,
        lake=work / "lake",
        kafka={"bootstrap_servers": f"{processes.HOST}:{broker.port}"},
        registry={"url": registry.address},
        start_stack=False,
    )

    async def shot(name: str, *keys: str) -> None:
        for key in keys:
            await pilot.press(key)
            await pilot.pause(0.1)
        await pilot.pause(1.2)  # a fresh poll of every panel
        svg = out / f"{name}.svg"
        app.save_screenshot(filename=svg.name, path=str(out))
        shots.append(svg)
        print(f"screenshots: {svg}", flush=True)

    try:
        async with app.run_test(size=size) as pilot:
            await wait(pilot, lambda: app.ready, 180, "the engine")
            # the console's engine runs in its own process: a demo driver of our own reads
            # the lake and the topic, and publishes the late records
            driver = Demo(
                lake_root=work / "lake",
                start_stack=False,
                kafka=KafkaProfile(bootstrap_servers=f"{processes.HOST}:{broker.port}"),
                registry=RegistryProfile(url=registry.address),
            )
            total = app.backend.batches_total()

            def published() -> int:
                return total - app.backend.batches_left()

            for batch in (1, 2):
                await pilot.press("n")
                await wait(pilot, lambda b=batch: published() == b and "demo" not in app.busy, 60, f"batch {batch}")
            await wait(pilot, lambda: any("103" in r[3] for r in table_rows(app, "pending"))
                       and len(table_rows(app, "pending")) == 1, 300, "Dan pending")
            await shot("after-batch-2-pending", "4")
            await shot("after-batch-2-topics", "1")
            for batch in (3, 4):
                await pilot.press("n")
                await wait(pilot, lambda b=batch: published() == b and "demo" not in app.busy, 60, f"batch {batch}")
            await wait(pilot, lambda: len(driver.staging_outputs()) >= 8, 300, "8 outputs in Staging", thread=True)
            await wait(pilot, lambda: any(r[0] == "NewInvoices" and r[5] == "7" for r in table_rows(app, "topics")),
                       120, "NewInvoices on the Topics panel")
            await shot("after-batch-4-topics", "1")
            await shot("after-batch-4-loops", "2")
            await shot("after-batch-4-etl", "3")
            await shot("after-batch-4-log", "6")
            await asyncio.to_thread(driver.publish, [DemoRecord(r["topic"], r["key"], r["value"]) for r in LATE])
            await wait(pilot, lambda: len(table_rows(app, "expired")) >= 1, 300, "an expired record")
            await shot("expired", "5")
            await shot("expired-record", "enter")
            await pilot.press("escape")
            processes.stop_process(broker, timeout=10)
            await pilot.press("1")
            await wait(pilot, lambda: "Kafka DOWN" in str(app.screen_stack[0].query_one("#status").render()), 60, "Kafka DOWN")
            await shot("broker-down-topics", "1")
            await shot("broker-down-loops", "2")
    finally:
        app.backend.close()
        processes.stop_process(broker, timeout=10)
        processes.stop_process(registry, timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    return shots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--size", default="100x30", help="terminal size, WIDTHxHEIGHT")
    parser.add_argument("--png-only", action="store_true", help="only convert the SVGs already in --out")
    args = parser.parse_args()
    if args.png_only:
        converted = [to_png(svg) for svg in sorted(args.out.glob("*.svg"))]
        print(f"screenshots: {sum(1 for p in converted if p)} PNGs in {args.out}")
        return
    width, height = (int(n) for n in args.size.lower().split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    shots = asyncio.run(run(args.out.resolve(), (width, height)))
    pngs = [to_png(svg) for svg in shots]
    if not all(pngs):
        print("screenshots: no rsvg-convert or cairosvg here: SVG only "
              "(apt-get install librsvg2-bin, or pip install cairosvg)")
    print(f"screenshots: {len(shots)} pictures in {args.out}")


if __name__ == "__main__":
    main()
