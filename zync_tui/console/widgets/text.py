"""Words on the screen changed only when they change.

``Static.update`` lays the whole screen out again (a line may wrap differently), and the
console's polls bring the same words most of the time: :func:`say` updates a line only
when its text differs, and without a new layout when the line's height is fixed.
"""

from __future__ import annotations

from textual.widgets import Static


def say(line: Static, text: str, *, fixed: bool = False) -> None:
    """Show ``text`` in ``line`` unless it already does (``fixed``: its height does not
    depend on the text, so no layout follows)."""
    if line.content != text:
        line.update(text, layout=not fixed)
