"""The one refusal of the row evaluator: :class:`Unsupported`.

Raised when compiling (a plan node, expression class or type the evaluator does not
implement exactly: the rule is evaluated by Spark) and when running (a value it cannot
be sure about, or one on which Spark would raise an error: the caller evaluates the
whole pass in Spark, which gives the real result or the real error).
"""

from __future__ import annotations


class Unsupported(Exception):
    """The evaluator cannot give Spark's exact result here; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
