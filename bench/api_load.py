"""What the benchmarks throw at a zync process's API (bench/api_cost.py, bench/e2e_latency.py).

:class:`Scraper` scrapes ``/metrics`` every second, as Prometheus would, and keeps each
scrape's time; :class:`Hostile` keeps a hostile client busy: rounds of 1,000 concurrent
scrapes, malformed requests, and a slowloris connection (a byte a second). Both run in
threads until stopped, and send traffic to 127.0.0.1 only. :class:`HostileProcess` runs
the hostile client in a process of its own, as another program would: in the bench's
process, its thousand connections took the interpreter lock from the threads that
produce the events and time their arrival, and the bench counted that against zync.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import socket
import threading
import time
import urllib.request
from typing import Any


class Scraper(threading.Thread):
    """``GET /metrics`` every ``every`` seconds; :attr:`times` in seconds."""

    def __init__(self, url: str, token: str | None = None, every: float = 1.0) -> None:
        super().__init__(daemon=True, name="bench-scraper")
        self.url = url.rstrip("/") + "/metrics"
        self.token = token
        self.every = every
        self.stop = threading.Event()
        self.times: list[float] = []
        self.failures = 0

    def run(self) -> None:
        while not self.stop.wait(self.every):
            request = urllib.request.Request(self.url)
            if self.token:
                request.add_header("Authorization", f"Bearer {self.token}")
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    response.read()
            except OSError:
                self.failures += 1
                continue
            self.times.append(time.perf_counter() - started)


#: The hostile client's own address (loopback too): another client than the scraper's.
HOSTILE_FROM = ("127.0.0.2", 0)


class Hostile(threading.Thread):
    """A hostile client of ``127.0.0.1:port``, from 127.0.0.2 (another client than the
    scraper and the probes): rounds of ``storm`` concurrent scrapes, malformed requests
    and a slowloris connection, until stopped."""

    def __init__(self, port: int, token: str | None = None, storm: int = 1000, pause: float = 1.0) -> None:
        super().__init__(daemon=True, name="bench-hostile")
        self.port = port
        self.token = token
        self.storm = storm
        self.pause = pause
        self.stop = threading.Event()
        self.rounds = 0
        self.served = 0

    def run(self) -> None:
        slow: socket.socket | None = None
        while not self.stop.is_set():
            if slow is None:
                with contextlib.suppress(OSError):
                    slow = socket.create_connection(("127.0.0.1", self.port), source_address=HOSTILE_FROM)
                    slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            elif not self._drip(slow):
                slow = None
            self._malformed()
            self.served += sum(asyncio.run(self._scrapes()))
            self.rounds += 1
            self.stop.wait(self.pause)
        if slow is not None:
            slow.close()

    def _drip(self, slow: socket.socket) -> bool:
        try:
            slow.sendall(b"X")
        except OSError:
            slow.close()
            return False
        return True

    def _malformed(self) -> None:
        for junk in (b"\x16\x03\x01 not http\r\n\r\n", b"GET /" + b"a" * 40_000 + b" HTTP/1.1\r\n\r\n"):
            with contextlib.suppress(OSError), socket.create_connection(
                ("127.0.0.1", self.port), source_address=HOSTILE_FROM
            ) as s:
                s.sendall(junk)
                s.settimeout(5)
                s.recv(100)

    async def _scrapes(self) -> list[int]:
        auth = f"Authorization: Bearer {self.token}\r\n" if self.token else ""
        request = f"GET /metrics HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n".encode()

        async def one() -> int:
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", self.port, local_addr=HOSTILE_FROM
                )
                writer.write(request)
                await writer.drain()
                status = await asyncio.wait_for(reader.readline(), 60)
                await reader.read()
                writer.close()
            except (OSError, TimeoutError):
                return 0
            return 1 if status.startswith(b"HTTP/1.1 200") else 0

        return await asyncio.gather(*(one() for _ in range(self.storm)))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def _hostile_main(port: int, token: str | None, stop: Any, counts: Any) -> None:
    """The hostile client's process: :class:`Hostile` until ``stop`` is set, then its
    rounds and scrapes served into ``counts``."""
    hostile = Hostile(port, token)
    hostile.stop = stop
    hostile.run()
    used = os.times()
    counts[0], counts[1] = hostile.rounds, hostile.served
    counts[2] = round((used.user + used.system) * 1000)


class HostileProcess:
    """:class:`Hostile` in a process of its own (spawned: nothing of the bench's state),
    with the same ``start`` / ``stop.set()`` / ``join`` / ``rounds`` / ``served``."""

    storm = 1000

    def __init__(self, port: int, token: str | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        self.stop = context.Event()
        self._counts = context.Array("q", 3)
        self._process = context.Process(
            target=_hostile_main, args=(port, token, self.stop, self._counts),
            name="bench-hostile", daemon=True,
        )

    def start(self) -> None:
        self._process.start()

    def join(self, timeout: float | None = None) -> None:
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(10)

    @property
    def rounds(self) -> int:
        return int(self._counts[0])

    @property
    def served(self) -> int:
        return int(self._counts[1])

    @property
    def cpu_seconds(self) -> float:
        """The CPU the hostile client's process used (user and system), once joined."""
        return int(self._counts[2]) / 1000
