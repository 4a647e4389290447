"""How the CLI reports failures: one line, in words, no traceback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

err_console = Console(stderr=True, highlight=False)


class UserError(Exception):
    """A failure the user can act on; its message is shown as is."""


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``message`` as the one-line error and return the Exit to raise."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)
    return typer.Exit(code)


def warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}", markup=True, soft_wrap=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the engine's user-facing errors into a one-line message and exit code 1.

    Ctrl-C exits with 130 and no traceback. Anything unexpected still raises, with a
    traceback, because that is a bug to report.
    """
    from engine.api import ZyncError  # deferred: engine.api takes a second to import

    try:
        yield
    except KeyboardInterrupt:
        err_console.print("interrupted")
        raise typer.Exit(130) from None
    except (ZyncError, UserError) as exc:
        raise fail(str(exc)) from None
    except BrokenPipeError:
        sys.stderr.close()
        raise typer.Exit(0) from None


@contextmanager
def lake_errors() -> Iterator[None]:
    """:func:`user_errors`, plus the lake's own errors (PoolError, delta-rs) as one line."""
    from engine.api import DeltaError, PoolError  # deferred: engine.api takes a second to import

    with user_errors():
        try:
            yield
        except (PoolError, DeltaError) as exc:
            raise UserError(str(exc).strip().splitlines()[0]) from None
