"""One module per group of `zync` commands; each adds its commands with ``register(app)``."""

from __future__ import annotations

from collections.abc import Callable

import typer

#: Settings every zync typer app shares.
APP_SETTINGS = {
    "no_args_is_help": True,
    "pretty_exceptions_show_locals": False,
    "rich_markup_mode": "rich",
    "context_settings": {"help_option_names": ["-h", "--help"]},
}


def standalone_app(register: Callable[[typer.Typer], None]) -> typer.Typer:
    """A typer app with just one module's commands (tests, ``python -m``)."""
    app = typer.Typer(**APP_SETTINGS)  # type: ignore[arg-type]
    register(app)

    @app.callback()
    def _root() -> None:
        """zync commands, standalone."""

    return app
