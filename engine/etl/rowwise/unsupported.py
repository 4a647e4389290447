"""The one refusal of the row evaluator: :class:`Unsupported`.

Raised when compiling (a plan node, expression class or type the evaluator does not
implement exactly: the rule is evaluated by Spark) and when running (a value it cannot
be sure about, or one on which Spark would raise an error: the caller evaluates the
whole pass in Spark, which gives the real result or the real error).

An error the evaluator did not foresee (a plan of a shape it misreads, a bug) is never
let through to the pass: :data:`UNFORESEEN` errors become an :class:`Unsupported`
whose reason starts with ``unforeseen`` (:func:`unforeseen`), so the pass goes to Spark;
the tests fail on any such reason.
"""

from __future__ import annotations

import decimal


class Unsupported(Exception):
    """The evaluator cannot give Spark's exact result here; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


#: The errors a misread plan or a bug can raise while compiling or evaluating.
UNFORESEEN = (
    ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError,
    decimal.DecimalException, AssertionError,
)  # fmt: skip


def unforeseen(exc: BaseException) -> Unsupported:
    """The refusal standing for an error nothing foresaw."""
    return Unsupported(f"unforeseen {type(exc).__name__}: {exc}")
