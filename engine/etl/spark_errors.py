"""Spark's analysis errors as the ETL reports them: pyspark's own logging of errors we
catch kept quiet, and the first line of an error without SQLSTATE and plan."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_spark_errors() -> Iterator[None]:
    """Keep pyspark from logging analysis errors we catch and report ourselves."""
    names = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
    loggers = [logging.getLogger(name) for name in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def spark_message(exc: BaseException) -> str:
    """The first line of a Spark error, without SQLSTATE and plan."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"\s*SQLSTATE: \w+;?.*$", "", text)
    text = re.sub(r";\s*line \d+ pos \d+;?$", "", text)
    return text.strip()
