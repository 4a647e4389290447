"""The decoder and writer threads, and the hand-overs between them: the consumer thread
puts a cut :class:`~engine.ingest.buffer.Batch` on a one-slot queue, the decoder makes it
a :class:`~engine.ingest.prepare.Prepared` on another, the writer commits it, so
consuming, decoding and the Delta write overlap (docs/design.md#readers-and-writers).
Counts the batches in flight (an idle loop has none), stops both threads in order, and
on failure hands the error to the consumer thread through the shared state. A batch the
decoder gives up (``prepare`` returns None: stopped while waiting for the Schema
Registry) is dropped with every batch after it, so no commit leaves a gap. Before its
first batch the decoder thread makes what decoding needs (``warm``: imports, the Schema
Registry client), while the consumer fetches that batch."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from engine.ingest.buffer import Batch
    from engine.ingest.prepare import Prepared
    from engine.ingest.state import LoopState

_Item = TypeVar("_Item")


class Stages:
    """``prepare`` runs in the decoder thread, ``write`` in the writer thread."""

    def __init__(
        self,
        shared: LoopState,
        prepare: Callable[[Batch], Prepared | None],
        write: Callable[[Prepared], None],
        warm: Callable[[], None] | None = None,
    ) -> None:
        self._shared = shared
        self._prepare = prepare
        self._write = write
        self._warm = warm
        self._batches: queue.Queue[Batch | None] = queue.Queue(maxsize=1)
        self._prepared: queue.Queue[Prepared | None] = queue.Queue(maxsize=1)
        #: batches handed over and not committed or dropped yet (under the shared lock)
        self.inflight = 0
        #: batches handed over so far (consumer thread only)
        self.handed = 0
        self._threads: tuple[threading.Thread, ...] = ()
        self._given_up = False  # the decoder gave a batch up: the later ones go too

    @property
    def started(self) -> bool:
        return bool(self._threads)

    def start(self) -> None:
        self._threads = (
            threading.Thread(target=self._decode_loop, name="zync-decode", daemon=True),
            threading.Thread(target=self._write_loop, name="zync-write", daemon=True),
        )
        for thread in self._threads:
            thread.start()

    def hand_over(self, batch: Batch) -> None:
        """From the consumer thread: wait for the decoder to take ``batch`` (dropped if
        the loop fails meanwhile)."""
        shared = self._shared
        self.handed += 1
        with shared.lock:
            self.inflight += 1
        while True:
            if shared.error is not None:
                with shared.lock:
                    self.inflight -= 1
                return
            try:
                self._batches.put(batch, timeout=0.2)
                return
            except queue.Full:
                continue

    def finish(self, graceful: bool) -> None:
        """Stop both threads once they are done (``graceful``: with every batch handed
        over; otherwise, interrupted or failed, only the commit under way)."""
        if not graceful:
            for waiting in (self._batches, self._prepared):
                while True:
                    try:
                        dropped = waiting.get_nowait()
                    except queue.Empty:
                        break
                    if dropped is not None:
                        self._done()
        self._put(self._batches, None, force=True)
        for thread in self._threads:
            thread.join()

    def _decode_loop(self) -> None:
        """Batches → rows ready to commit (decoded, shaped, dead letters in place); first
        ``warm``, while the consumer fetches the first batch."""
        if self._warm is not None:
            self._warm()
        while True:
            batch = self._batches.get()
            if batch is None:
                self._put(self._prepared, None, force=True)
                return
            prepared = None
            try:
                if self._shared.error is None and not self._given_up:
                    prepared = self._prepare(batch)
                    self._given_up = prepared is None
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer thread
                self._shared.fail(exc)
            if prepared is None or not self._put(self._prepared, prepared):
                self._done()

    def _write_loop(self) -> None:
        """Prepared rows → Delta commits, in order; then stats, mirror, upkeep."""
        while True:
            prepared = self._prepared.get()
            if prepared is None:
                return
            try:
                if self._shared.error is None:
                    self._write(prepared)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer thread
                self._shared.fail(exc)
            finally:
                self._done()

    def _done(self) -> None:
        with self._shared.lock:
            self.inflight -= 1

    def _put(
        self, target: queue.Queue[_Item | None], item: _Item | None, *, force: bool = False
    ) -> bool:
        """Put ``item`` on ``target`` unless the loop failed meanwhile (``force``: even
        then, making room by dropping what waits there)."""
        while True:
            try:
                target.put(item, timeout=0.2)
                return True
            except queue.Full:
                if self._shared.error is None:
                    continue
                if not force:
                    return False
                try:
                    dropped = target.get_nowait()
                except queue.Empty:
                    continue
                if dropped is not None:
                    self._done()
