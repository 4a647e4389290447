"""CLI defaults that mirror an engine constant (the command modules load engine.api late,
so they cannot import it at definition time): both say the same."""

from __future__ import annotations

import inspect

from engine.services.etl import ETL_INTERVAL
from zync_tui.commands.run import run


def test_zync_run_etl_interval_is_the_engines() -> None:
    assert inspect.signature(run).parameters["etl_interval"].default == ETL_INTERVAL
