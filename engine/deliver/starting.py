"""How a delivery starts: waiting for its staging pool to exist, for the pool's first
staged output (a pipeline's first start), and for its turn among many outputs starting
at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from engine.deliver.errors import DeliveryError
from engine.deliver.status_board import StatusBoard

if TYPE_CHECKING:
    from engine.lake.pools import Lake, Pool


def open_staging_pool(
    lake: Lake, name: str, topic: str, board: StatusBoard, stop: threading.Event, wait: bool
) -> Pool | None:
    """The staging pool ``name``; with ``wait``, waits for it to exist (saying so once)
    until ``stop`` (None)."""
    from engine.lake.pool_errors import PoolError  # deferred: deltalake

    announced = False
    while True:
        try:
            pool = lake.open_pool(name)
        except PoolError as exc:
            if not wait:
                raise DeliveryError(str(exc)) from None
            if not announced:
                board.emit("waiting", f"{topic}: waiting for pool {name!r}")
                announced = True
            if board.heartbeat.wait_on(stop, 1.0, f"waiting for pool {name!r}"):
                return None
            continue
        if pool.kind != "staging":
            raise DeliveryError(
                f"pool {name!r} is a {pool.kind} pool: to-kafka delivers the outputs of a "
                "staging pool"
            )
        return pool


def await_first_output(
    pool: Pool, board: StatusBoard, topic: str, woken: threading.Event, poll: float, stop: threading.Event
) -> bool:
    """Until the staging pool holds an output (at once when it does): before the ETL's
    first commit there is nothing to deliver, recover or check on the output topic, so
    the output's start (its producer's transactions, the topic's tail) waits for that
    commit instead of contending with the ETL's first pass for the CPU — 200 outputs
    starting beside it held a first pass back 9–14 s. ``woken``: the ETL's commit in this
    process (else the pool is polled every ``poll`` seconds). False: ``stop`` came first."""
    if pool.last_seqno() >= 0:
        return True
    board.set(state="idle")  # it holds its topic's claim (Kafka reached) and its pool
    board.emit("waiting", f"{topic}: waiting for the first output staged in pool {pool.name!r}")
    while not stop.is_set():
        if board.heartbeat.wait_on(woken, poll, f"waiting for outputs in pool {pool.name!r}"):
            woken.clear()
        pool.refresh()
        if pool.last_seqno() >= 0:
            return True
    return False


@contextmanager
def start_turn(
    gate: threading.Semaphore | None, board: StatusBoard, stop: threading.Event
) -> Iterator[bool]:
    """A delivery's turn to start, among many outputs that take turns (``gate``; None:
    always its turn): False when ``stop`` came first."""
    if gate is None:
        yield True
        return
    with board.heartbeat.waiting("waiting for the other outputs to start"):
        while not gate.acquire(timeout=0.2):
            if stop.is_set():
                yield False
                return
    try:
        yield True
    finally:
        gate.release()
