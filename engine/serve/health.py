"""Liveness and readiness, from the loops' statuses, heartbeats and reports.

* **Live** unless a loop failed, or is wedged: it made no progress for longer than
  ``wedged_after`` seconds and was not waiting on purpose (no work, Kafka or the registry
  out of reach: :mod:`engine.heartbeat`). Only then would a restart help.
* **Ready** once every loop of the process runs and has reached what it needs (Kafka, the
  registry, the lake), and while it still can: a loop starting, stopped or failed, or a
  dependency it finds out of reach, is a reason — one line each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.durations import format_seconds
from engine.services.report import LoopReport

if TYPE_CHECKING:
    from engine.services.service import Service, ServiceDetail, ServiceStatus

#: Seconds without progress (and no deliberate wait) after which a loop is wedged.
WEDGED_AFTER = 300.0

NAMES = {"kafka": "Kafka", "registry": "the Schema Registry", "lake": "the lake"}


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoopFacts:
    """One loop at one moment: its status and its report."""

    name: str
    status: ServiceStatus[ServiceDetail]
    report: LoopReport


def gather(loops: Mapping[str, Service[ServiceDetail]]) -> list[LoopFacts]:
    facts = []
    for name, service in loops.items():
        status = service.status()
        try:
            report = service.report(status)
        except Exception as exc:  # noqa: BLE001 - a report never breaks the API
            report = LoopReport(not_ready=(f"{name}: its report failed: {exc}",))
        facts.append(LoopFacts(name, status, report))
    return facts


def liveness(facts: list[LoopFacts], wedged_after: float = WEDGED_AFTER) -> Verdict:
    reasons = []
    for loop in facts:
        status = loop.status
        if status.state == "failed":
            reasons.append(f"{loop.name} failed: {status.last_error or 'no error kept'}")
            continue
        beat = status.heartbeat
        if beat is not None and beat.wedged(wedged_after):
            where = f" ({beat.slowest})" if beat.slowest else ""
            reasons.append(
                f"{loop.name}{where} is wedged: no progress for "
                f"{format_seconds(beat.since_progress or 0.0)} and not waiting on purpose "
                f"(bound {format_seconds(wedged_after)})"
            )
    return Verdict(not reasons, tuple(reasons))


def readiness(facts: list[LoopFacts]) -> Verdict:
    reasons: list[str] = []
    for loop in facts:
        status = loop.status
        if status.state != "running":
            why = f": {status.last_error}" if status.last_error else ""
            reasons.append(f"{loop.name} is {status.state}{why}")
            continue
        for need in loop.report.dependencies:
            if need.up is False:
                reasons.append(
                    f"{loop.name}: {need.detail or NAMES.get(need.name, need.name) + ' is out of reach'}"
                )
        reasons.extend(loop.report.not_ready)
    return Verdict(not reasons, tuple(reasons))
