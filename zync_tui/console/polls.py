"""When the console polls the engine: each kind of poll (topics, loops, ETL, log) runs
again a moment after the previous one has finished, so polls never overlap and a slow
one (a broker that times out) does not hold the others back.

:class:`PollSchedule` keeps that bookkeeping; the app gives it the function that starts
a poll's worker, the one that sets a timer and whether it still runs, and tells it when a
worker has ended.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.timer import Timer

POLLS = ("topics", "loops", "etl", "log")


class PollSchedule:
    """Re-arms each poll with a timer once its worker has ended; a refresh asked while a
    poll runs is queued (run once more right after), never doubled."""

    def __init__(
        self,
        run: Callable[[str], None],
        set_timer: Callable[[float, Callable[[], None], str], Timer],
        running: Callable[[], bool],
        *,
        interval: float,
        log_interval: float,
    ) -> None:
        self._run = run
        self._set_timer = set_timer
        self._running = running  # False once the app is shutting down
        self.interval = interval
        self.log_interval = log_interval
        #: what is in flight: polls, and other one-at-a-time work the app adds ("demo")
        self.busy: set[str] = set()
        #: polls that have delivered at least once, and how many times
        self.polled: set[str] = set()
        self.count: dict[str, int] = {p: 0 for p in POLLS}
        self._timers: dict[str, Timer] = {}
        self._again: set[str] = set()

    def start(self, poll: str) -> None:
        """Run ``poll`` now, or right after the one in flight."""
        if not self._running():
            return
        self._timers.pop(poll, None)
        if poll in self.busy:
            self._again.add(poll)
            return
        self.busy.add(poll)
        self._run(poll)

    def ended(self, poll: str) -> None:
        """``poll``'s worker ended (whatever happened): arm the next one."""
        self.busy.discard(poll)
        self.polled.add(poll)
        self.count[poll] += 1
        if not self._running():
            return
        if poll in self._again:
            self._again.discard(poll)
            self.start(poll)
            return
        delay = self.log_interval if poll == "log" else self.interval
        self._timers[poll] = self._set_timer(delay, lambda: self.start(poll), f"poll-{poll}")

    def refresh(self) -> None:
        """Every poll now (those in flight once more when they end)."""
        for poll in POLLS:
            timer = self._timers.pop(poll, None)
            if timer is not None:
                timer.stop()
            self.start(poll)

    def stop(self) -> None:
        """No more timers (shutting down)."""
        for timer in self._timers.values():
            timer.stop()
        self._timers.clear()
