"""What the console's workers report, as past-tense messages.

Workers run the engine in threads and post one of these when they finish; the app's
handlers update the panels. Poll results declare :meth:`can_replace`, so a newer
snapshot replaces one still queued (the console never falls behind its own polls).
"""

from __future__ import annotations

from typing import Any

from textual.message import Message


class _Polled(Message):
    def can_replace(self, message: Message) -> bool:
        return type(message) is type(self)


class EngineStarted(Message):
    """The engine was set up (profiles, configuration, lake, loops); notes say how."""

    def __init__(self, notes: list[str]) -> None:
        super().__init__()
        self.notes = notes


class EngineFailed(Message):
    """Setting the engine up failed; the console keeps showing what it can."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class TopicsPolled(_Polled):
    def __init__(self, report: Any) -> None:
        super().__init__()
        self.report = report


class LoopsPolled(_Polled):
    def __init__(self, loops: list[Any]) -> None:
        super().__init__()
        self.loops = loops


class EtlPolled(_Polled):
    def __init__(self, report: Any) -> None:
        super().__init__()
        self.report = report


class LogPolled(Message):
    def __init__(self, entries: list[Any]) -> None:
        super().__init__()
        self.entries = entries


class LoopChanged(Message):
    """A loop was started or stopped (``action`` is ``start`` or ``stop``)."""

    def __init__(self, loop: str, action: str, error: str | None = None) -> None:
        super().__init__()
        self.loop = loop
        self.action = action
        self.error = error


class EtlPassStarted(Message):
    pass


class EtlPassFinished(Message):
    """One ETL pass ended; ``result`` is its outcome, or ``error`` says why it failed."""

    def __init__(self, result: Any = None, error: str | None = None, seconds: float = 0.0) -> None:
        super().__init__()
        self.result = result
        self.error = error
        self.seconds = seconds


class BatchPublished(Message):
    """The demo published its next batch (``error`` when it could not)."""

    def __init__(self, text: str, error: str | None = None) -> None:
        super().__init__()
        self.text = text
        self.error = error


class DeadLettersLoaded(Message):
    def __init__(self, letters: list[Any], error: str | None = None) -> None:
        super().__init__()
        self.letters = letters
        self.error = error
