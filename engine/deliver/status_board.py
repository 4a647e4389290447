"""What a delivery tells: events (one status line each) and a status snapshot for the
console, kept by a :class:`StatusBoard` that any thread may read."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from engine.heartbeat import Heartbeat


@dataclass(frozen=True)
class DeliveryEvent:
    """Something a delivery did, for a status line (``message`` is that line)."""

    kind: str  # started | resumed | delivered | caught-up | waiting | retrying | types |
    # unreachable | back (an outage of Kafka: engine.deliver.faults) | stopped | failed
    topic: str
    message: str
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    version: int | None = None
    at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class DeliveryStatus:
    """A snapshot of one delivery, for the console.

    ``staged_offset``: the largest pool offset staged for the topic (None: nothing yet);
    ``delivered_offset``: the largest pool offset delivered (None: nothing yet);
    ``lag``: records staged but not delivered; ``rate``: records/s of the last batch.
    """

    topic: str
    pool: str
    envelope: str
    format: str
    state: str = "starting"  # starting | catching-up | delivering | idle | stopped | failed
    partitions: int | None = None
    staged_offset: int | None = None
    delivered_offset: int | None = None
    version: int | None = None
    records_delivered: int = 0
    #: bytes of the message values produced
    bytes_delivered: int = 0
    last_produce_time: float | None = None
    rate: float | None = None
    last_error: str | None = None
    #: when Kafka stopped answering (an outage under way, engine.deliver.faults), else None
    unreachable_since: float | None = None

    @property
    def lag(self) -> int | None:
        if self.staged_offset is None:
            return None
        delivered = -1 if self.delivered_offset is None else self.delivered_offset
        return max(0, self.staged_offset - delivered)


class StatusBoard:
    """The current :class:`DeliveryStatus` of one delivery (read from any thread) and
    where its events go."""

    def __init__(self, status: DeliveryStatus) -> None:
        self._lock = threading.Lock()
        self._status = status
        self.on_event: Callable[[DeliveryEvent], None] | None = None
        #: the delivery's liveness: its loop beats, its waits for Kafka are deliberate
        self.heartbeat = Heartbeat(status.topic)

    def get(self) -> DeliveryStatus:
        with self._lock:
            return self._status

    def set(self, **changes: Any) -> None:
        with self._lock:
            self._status = replace(self._status, **changes)

    def emit(
        self,
        kind: str,
        message: str,
        *,
        records: int = 0,
        first_offset: int | None = None,
        last_offset: int | None = None,
        version: int | None = None,
    ) -> None:
        if self.on_event is None:
            return
        event = DeliveryEvent(
            kind=kind,
            topic=self._status.topic,  # never changes
            message=message,
            records=records,
            first_offset=first_offset,
            last_offset=last_offset,
            version=version,
        )
        self.on_event(event)

    def delivered_text(self) -> str:
        """The largest pool offset delivered, or ``-``."""
        delivered = self.get().delivered_offset
        return "-" if delivered is None else str(delivered)
