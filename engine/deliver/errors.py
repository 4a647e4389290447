"""Why a delivery cannot go on: the errors of to-kafka, each saying what to do."""

from __future__ import annotations

from engine.errors import ZyncError


class DeliveryError(ZyncError):
    """to-kafka cannot go on; the message says why and what to do."""


class DeliveryBusy(DeliveryError):
    """Another to-kafka is delivering to the same topic."""


class DeliveryFenced(DeliveryError):
    """Another producer with the same transactional id took over the topic."""


class TypeMismatch(DeliveryError):
    """Staged JSON holds a field the topic's recorded type does not have."""
