"""A loop's heartbeat: when it last made progress, and whether it waits on purpose.

A loop thread calls :meth:`Heartbeat.beat` when it makes progress (a poll came back, a
batch was committed, a pass moved to its next phase, a delivery looked at the staging
pool) and wraps the waits it chooses in :meth:`Heartbeat.waiting` — no work to do, Kafka
or the Schema Registry out of reach — so that anyone may tell a loop that waits from a
loop that is stuck. A loop is **wedged** when it made no progress for longer than a bound
and was not waiting on purpose meanwhile (:meth:`Heartbeat.reading`): the one case a
restart would help, which is what liveness probes ask (docs/design.md#operating-zync).

A loop with several threads (to-kafka: one per output) gives each its own
:meth:`Heartbeat.pulse`; the loop is wedged when one of them is. Beats cost a clock read
and a store: call them freely in hot loops.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class HeartbeatReading:
    """A heartbeat at one moment: seconds since the last progress (None: no beat yet)
    and the deliberate waits under way (their reasons)."""

    since_progress: float | None
    waiting: tuple[str, ...] = ()
    #: the pulse that has gone longest without progress (a thread's name), if any
    slowest: str | None = None

    def wedged(self, bound: float) -> bool:
        """No progress for more than ``bound`` seconds, and no deliberate wait."""
        return (
            not self.waiting and self.since_progress is not None and self.since_progress > bound
        )


class Heartbeat:
    """Progress marks and deliberate waits of one loop (see the module's docstring)."""

    def __init__(self, name: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._clock = clock
        self._lock = threading.Lock()
        self._last: float | None = None
        self._waits: dict[int, str] = {}
        self._next_wait = 0
        self._pulses: dict[str, Heartbeat] = {}

    def beat(self) -> None:
        """Progress, now."""
        self._last = self._clock()

    def start(self) -> None:
        """A (re)start of the loop: progress now, no waits left over."""
        with self._lock:
            self._waits.clear()
            self._pulses.clear()
        self.beat()

    @contextmanager
    def waiting(self, why: str) -> Iterator[None]:
        """A wait the loop chose (``why``: a few words); progress when it ends."""
        token = self.begin_wait(why)
        try:
            yield
        finally:
            self.end_wait(token)

    def wait_on(self, event: threading.Event, seconds: float, why: str) -> bool:
        """``event.wait(seconds)``, as a deliberate wait; whether the event is set."""
        with self.waiting(why):
            return event.wait(seconds)

    def begin_wait(self, why: str) -> int:
        """A deliberate wait begins (one that spans calls: an outage); end it with
        :meth:`end_wait` and the token returned."""
        with self._lock:
            self._next_wait += 1
            token = self._next_wait
            self._waits[token] = why
        return token

    def end_wait(self, token: int) -> None:
        with self._lock:
            self._waits.pop(token, None)
        self.beat()

    def pulse(self, name: str) -> Heartbeat:
        """A heartbeat of its own for one thread of the loop (until :meth:`start`)."""
        return self.adopt(Heartbeat(name, self._clock))

    def adopt(self, child: Heartbeat) -> Heartbeat:
        """Count ``child`` (a thread's heartbeat) as one of the loop's (until :meth:`start`)."""
        child.beat()
        with self._lock:
            self._pulses[child.name] = child
        return child

    def reading(self) -> HeartbeatReading:
        """How long since progress, and the waits under way — of the slowest pulse when
        the loop has some, else of the loop's own thread."""
        now = self._clock()
        with self._lock:
            waits = tuple(self._waits.values())
            pulses = list(self._pulses.values())
        own = HeartbeatReading(None if self._last is None else max(0.0, now - self._last), waits)
        if not pulses:
            return own
        readings = [(p.name, p.reading()) for p in pulses]
        stuck = [(name, r) for name, r in readings if not r.waiting]
        if not stuck:  # every pulse waits on purpose
            return HeartbeatReading(
                own.since_progress, waits + tuple(w for _, r in readings for w in r.waiting)
            )
        name, slowest = max(stuck, key=lambda item: item[1].since_progress or 0.0)
        return HeartbeatReading(slowest.since_progress, waits, name)
