"""The key footer, built again only when the keys it shows change.

Textual's :class:`~textual.widgets.Footer` recomposes — unmounts and mounts a widget per
key, then restyles them — whenever the screen's bindings are updated, which happens on
every focus change: each panel key moves the focus to that panel's table, so each
switch rebuilt the same footer (profiled: about a quarter of a tab switch's work).
:class:`KeysFooter` compares what the footer would show (key, label, action, enabled,
tooltip, group of each shown binding, and the command palette's key) with what it shows,
and recomposes only when they differ.
"""

from __future__ import annotations

from collections.abc import Hashable

from textual.screen import Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    """A :class:`~textual.widgets.Footer` that skips rebuilding the same keys."""

    def __init__(self, *, compact: bool = False, show_command_palette: bool = True) -> None:
        super().__init__(compact=compact, show_command_palette=show_command_palette)
        self._shown: tuple[Hashable, ...] | None = None

    def _keys(self, screen: Screen[object]) -> tuple[Hashable, ...]:
        """What :meth:`Footer.compose` draws from ``screen``'s bindings, as a value."""
        shown: list[Hashable] = [
            (
                binding.key,
                binding.key_display,
                binding.description,
                binding.action,
                enabled,
                tooltip,
                None if binding.group is None else binding.group.description,
            )
            for (_, binding, enabled, tooltip) in screen.active_bindings.values()
            if binding.show or binding.key == self.app.COMMAND_PALETTE_BINDING
        ]
        return (self.show_command_palette, self.app.ENABLE_COMMAND_PALETTE, *shown)

    def bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen and screen.app.app_focus:
            keys = self._keys(screen)
            if keys == self._shown and self._bindings_ready:
                return
            self._shown = keys
        super().bindings_changed(screen)
