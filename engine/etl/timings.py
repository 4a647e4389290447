"""Where a pass spends its time: seconds per phase and the Spark jobs it ran.

A pass fills one :class:`Timings` (``with timings.phase("evaluate"): ...``); the phases
of a pass are ``refresh`` (pools and positions from the Delta logs), ``check`` (the
configuration against the input types), ``read`` (the window and the new raw rows, or
the markers of a cold pass), ``evaluate`` (the Spark jobs: rules, fates, outputs),
``decide`` (expiry, cursors and numbering on the driver), ``write`` (outputs written by
the executors), ``commit`` (the one Delta commit) and ``window`` (what the next pass
keeps). ``zync etl --profile`` prints them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SparkOwner(Protocol):
    @property
    def spark(self) -> SparkSession: ...


@dataclass
class Timings:
    """Seconds per phase (in the order they first ran) and the Spark jobs counted."""

    seconds: dict[str, float] = field(default_factory=dict)
    spark_jobs: int = 0
    #: Who evaluated the rules: ``spark``, or ``rows`` (on the driver, row by row:
    #: engine.etl.evaluate_rows); and, when Spark did though rows were tried, why.
    evaluated_by: str = "spark"
    row_refusal: str | None = None
    #: called as each phase begins and ends (a loop's heartbeat: progress)
    on_phase: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        if self.on_phase is not None:
            self.on_phase()
        try:
            yield
        finally:
            if self.on_phase is not None:
                self.on_phase()
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def lines(self) -> list[str]:
        """The phases as text, one per line, with each one's share of their total."""
        total = sum(self.seconds.values()) or 1.0
        out = [
            f"  {name:<9} {secs * 1000:8.1f} ms  {100 * secs / total:5.1f}%"
            for name, secs in self.seconds.items()
        ]
        out.append(f"  spark jobs {self.spark_jobs}")
        if self.evaluated_by == "rows":
            out.append("  evaluated row by row on the driver")
        elif self.row_refusal:
            out.append(f"  evaluated by Spark (not row by row: {self.row_refusal})")
        return out


@contextmanager
def spark_jobs(pools: SparkOwner, timings: Timings) -> Iterator[Timings]:
    """Count the Spark jobs run inside the block (this thread's job group) into
    ``timings``; no Spark is started for it."""
    from engine.spark import spark_running  # deferred: engine.spark loads the JVM config

    if not spark_running():
        yield timings
        return
    context = pools.spark.sparkContext
    group = f"zync-etl-{id(timings)}"
    context.setJobGroup(group, "zync ETL pass", interruptOnCancel=False)
    try:
        yield timings
    finally:
        timings.spark_jobs = len(context.statusTracker().getJobIdsForGroup(group))
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
