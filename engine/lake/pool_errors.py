"""What goes wrong with a pool: it cannot be created, opened or written."""

from __future__ import annotations


class PoolError(RuntimeError):
    """A pool cannot be created, opened or written; the message says why."""


class PoolNotFound(PoolError):
    """No pool of that name in the lake."""


class NotAPool(PoolError):
    """A Delta table that is not a zync pool."""
