"""The consumer thread's buffers, one per pool, and the batching decision: when buffered
records become a :class:`Batch` handed to the decoder (:meth:`Buffers.full` by size,
:meth:`Buffers.due` by time — soon once the consumer has caught up —, everything when
the loop stops). Partitions a workers group
took away are dropped from them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka import Message

    from engine.ingest.options import IngestOptions


@dataclass
class Buffer:
    pool: str
    messages: list[Message] = field(default_factory=list)
    nbytes: int = 0
    first_at: float = 0.0

    def add(self, messages: list[Message], now: float) -> None:
        if not self.messages:
            self.first_at = now
        self.messages.extend(messages)
        self.nbytes += sum(map(len, messages))

    def take(self) -> list[Message]:
        messages, self.messages, self.nbytes = self.messages, [], 0
        return messages

    def drop(self, gone: set[tuple[str, int]]) -> int:
        """Forget the messages of partitions this worker no longer owns; how many."""
        keep = [m for m in self.messages if (m.topic(), m.partition()) not in gone]
        dropped = len(self.messages) - len(keep)
        if dropped:
            self.messages = keep
            self.nbytes = sum(map(len, keep))
        return dropped


@dataclass
class Batch:
    pool: str
    messages: list[Message]
    #: the count of rebalances when the batch was cut (workers group)
    generation: int = 0


class Buffers:
    """One :class:`Buffer` per pool; ``cut(pool, messages)`` hands a batch on."""

    def __init__(
        self,
        pools: Iterable[str],
        route: Mapping[str, str],
        options: IngestOptions,
        cut: Callable[[str, list[Message]], None],
    ) -> None:
        self._buffers = {name: Buffer(name) for name in pools}
        self._single = next(iter(self._buffers.values())) if len(self._buffers) == 1 else None
        self._route = route
        self._options = options
        self._cut = cut

    # -- the batching decision ----------------------------------------------------------

    def full(self, buffer: Buffer) -> bool:
        """Cut now: the buffer holds ``max_records`` records or ``max_bytes`` bytes."""
        opts = self._options
        return len(buffer.messages) >= opts.max_records or buffer.nbytes >= opts.max_bytes

    def due(self, buffer: Buffer, now: float, caught_up: bool = False) -> bool:
        """Cut now: the buffer's oldest record has waited ``interval`` seconds, or
        ``linger`` seconds once the consumer has caught up (its last poll brought less
        than it asked for: no backlog to gather a large batch from)."""
        if not buffer.messages:
            return False
        waited = now - buffer.first_at
        opts = self._options
        return waited >= opts.interval or (caught_up and waited >= opts.linger)

    # -- the consumer thread ------------------------------------------------------------

    def add(self, messages: list[Message], now: float) -> None:
        """Polled records (of input topics), into their pools' buffers; full ones are cut."""
        if self._single is not None:
            self._fill(self._single, messages, now)
            return
        grouped: dict[str, list[Message]] = {}
        route = self._route
        for m in messages:
            grouped.setdefault(route[m.topic()], []).append(m)  # type: ignore[index]
        for name, msgs in grouped.items():
            self._fill(self._buffers[name], msgs, now)

    def cut_due(self, now: float, caught_up: bool = False) -> None:
        """After each poll: cut the buffers whose records waited long enough."""
        for buffer in self._buffers.values():
            if self.due(buffer, now, caught_up):
                self.cut(buffer)

    def cut(self, buffer: Buffer) -> None:
        self._cut(buffer.pool, buffer.take())

    def holding(self) -> list[Buffer]:
        """The buffers that hold records."""
        return [b for b in self._buffers.values() if b.messages]

    def drop(self, gone: set[tuple[str, int]]) -> int:
        """Forget the records of partitions gone to another worker; how many."""
        return sum(buffer.drop(gone) for buffer in self._buffers.values())

    def _fill(self, buffer: Buffer, messages: list[Message], now: float) -> None:
        max_records = self._options.max_records
        while messages:
            room = max_records - len(buffer.messages)
            take, messages = messages[:room], messages[room:]
            buffer.add(take, now)
            if self.full(buffer):
                self.cut(buffer)
