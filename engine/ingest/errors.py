"""The errors from-kafka raises: it cannot start or go on, or a record is bad under
``--on-error fail``."""

from __future__ import annotations

from engine.errors import ZyncError


class IngestError(ZyncError):
    """from-kafka cannot start or continue; the message says why and what to do."""


class BadRecord(IngestError):
    """A record could not be decoded or shaped and ``on_error`` is ``fail``."""

    def __init__(self, message: str, topic: str, partition: int, offset: int) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
