"""Producing while the next transactions are read and encoded.

While one transaction (at most ``batch_records`` records) is produced, the next ones are
read (a reader thread, which also picks the records not delivered yet, in order) and
encoded (an encoder thread: Arrow and polars release the GIL).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from engine.deliver.errors import TypeMismatch

if TYPE_CHECKING:
    from engine.deliver.envelopes.base import Send
    from engine.deliver.rows import Batch, Rows

#: Threads encoding the next transactions while one is produced.
ENCODERS = 1
#: Transactions encoded (or being encoded) ahead of the one being produced.
ENCODE_AHEAD = ENCODERS + 1

_Selected = TypeVar("_Selected")


def produce_ahead(
    chunks: Iterator[Rows],
    select: Callable[[Rows], _Selected],
    encode: Callable[[_Selected], Batch],
    rebuild: Callable[[Rows], Batch],
    send: Send,
    stop: threading.Event,
    name: str,
) -> bool:
    """Produce each chunk in a transaction (``send``) while the next ones are read and
    ``select``-ed (a reader thread, in order) and ``encode``-d (encoder threads); a
    chunk whose encoding meets a :class:`TypeMismatch` is built again by ``rebuild``.
    False when stopped before the end."""
    ready: queue.Queue[tuple[Rows, _Selected] | BaseException | None] = queue.Queue(
        maxsize=ENCODE_AHEAD
    )
    quit_reading = threading.Event()

    def put(item: tuple[Rows, _Selected] | BaseException | None) -> None:
        while not quit_reading.is_set():
            try:
                ready.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def read() -> None:
        try:
            for chunk in chunks:
                if quit_reading.is_set():
                    return
                put((chunk, select(chunk)))
            put(None)  # the end
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            put(exc)

    reader = threading.Thread(target=read, name=f"zync-read-{name}", daemon=True)
    reader.start()
    inflight: deque[tuple[Rows, Future[Batch]]] = deque()
    with ThreadPoolExecutor(max_workers=ENCODERS, thread_name_prefix=f"zync-encode-{name}") as pool:
        try:
            finished = False
            while True:
                while not finished and len(inflight) < ENCODE_AHEAD:
                    item = ready.get()
                    if item is None:
                        finished = True
                    elif isinstance(item, BaseException):
                        raise item
                    else:
                        chunk, selected = item
                        inflight.append((chunk, pool.submit(_encoded, encode, selected)))
                if not inflight:
                    return True
                started = time.monotonic()
                chunk, future = inflight.popleft()
                try:
                    batch = future.result()
                except TypeMismatch:
                    batch = rebuild(chunk)  # typed from the data, then again
                if stop.is_set():
                    return False  # the transaction in flight is done; the rest waits
                send(chunk, batch, started)
        finally:
            quit_reading.set()
            for _, future in inflight:
                future.cancel()


def _encoded(encode: Callable[[_Selected], Batch], selected: _Selected) -> Batch:
    """``encode(selected)``, with what the producing thread would otherwise count."""
    batch = encode(selected)
    batch.value_bytes()
    return batch
