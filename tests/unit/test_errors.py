"""engine.errors.one_line: the one line an error is shown as."""

from __future__ import annotations

from engine.errors import ZyncError, one_line


def test_the_first_line_or_the_class_name() -> None:
    assert one_line(ValueError("bad\nmore")) == "bad"
    assert one_line(ValueError("  ")) == "ValueError"


def test_typed_names_foreign_errors_only() -> None:
    assert one_line(KeyError("x"), typed=True) == "KeyError: 'x'"
    assert one_line(ZyncError("said for users"), typed=True) == "said for users"
    assert one_line(ZyncError(), typed=True) == "ZyncError"


def test_limit_cuts_long_lines() -> None:
    assert one_line(ValueError("x" * 400), limit=300) == "x" * 297 + "..."
    assert one_line(ValueError("x" * 300), limit=300) == "x" * 300
