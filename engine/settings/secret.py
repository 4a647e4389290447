"""A password held so that it never shows in a repr, a log line or a message."""

from __future__ import annotations

import hmac


class Secret:
    """A string that never shows itself: ``repr`` is ``'***'`` and ``str`` is ``***``.

    Call :meth:`reveal` where the real value is needed (a client's configuration).
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("Secret holds a string")
        self._value = value

    def reveal(self) -> str:
        """The secret value itself; never log or print it."""
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    def __str__(self) -> str:
        return "***"

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))
