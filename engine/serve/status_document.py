"""The status document, ``GET /v1/status`` (schema :data:`SCHEMA`, documented in
docs/design.md#the-status-document): everything the console shows of a process.

Sections (``?sections=process,health,loops,topics,etl,dead_letters,tables,demo``; default
all):

* ``process`` — pipeline, role, host, pid, start time, versions, whether it takes control;
* ``health`` — ``live``/``ready`` and their reasons (what /healthz and /readyz answer);
* ``loops`` — per loop: state, last commit, counts, errors, heartbeat, dependencies, and
  its own ``detail`` (each loop declares it: engine/services/report.py);
* ``topics``, ``etl``, ``dead_letters`` — the observer's snapshots (null when the
  process has no observer; ``etl.listed`` false when it lists no pending records);
* ``tables`` — the tables of the configuration (and of the lake), with what this
  process's apply loop knows laid over them (null without an observer);
* ``demo`` — batches left and in all (only when the process runs the demo).

Fields are only added within a schema version; a change of meaning is a new version.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from engine import __version__
from engine.serve.documents import dead_letter_json, etl_json, tables_json, topics_json
from engine.serve.health import LoopFacts, liveness, readiness

if TYPE_CHECKING:
    from engine.serve.served_process import ServedProcess

SCHEMA = "zync.status/v1"
SECTIONS = ("process", "health", "loops", "topics", "etl", "dead_letters", "tables", "demo")


def wanted_sections(text: str | None) -> tuple[str, ...]:
    """The sections asked for (all when none); raises ValueError naming an unknown one."""
    if not text:
        return SECTIONS
    asked = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in asked if s not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown section {unknown[0]!r}: use {', '.join(SECTIONS)}")
    return asked


def loop_json(loop: LoopFacts, process: ServedProcess) -> dict[str, Any]:
    status = loop.status
    commit = status.last_commit
    beat = status.heartbeat
    return {
        "name": loop.name,
        "state": status.state,
        "host": process.host,
        "pid": process.pid,
        "started_at": status.started_at,
        "last_commit": None
        if commit is None
        else {"version": commit.version, "at": commit.at, "records": commit.records, "where": commit.where},
        "commits": status.commits,
        "records": status.records,
        "rate": status.rate,
        "errors": status.errors,
        "last_error": status.last_error,
        "heartbeat": None
        if beat is None
        else {
            "since_progress_seconds": beat.since_progress,
            "waiting": list(beat.waiting),
            "wedged": beat.wedged(process.wedged_after),
        },
        "dependencies": {d.name: {"up": d.up, "detail": d.detail} for d in loop.report.dependencies},
        "detail": dict(loop.report.detail),
    }


def process_json(process: ServedProcess) -> dict[str, Any]:
    return {
        "pipeline": process.pipeline,
        "role": process.role,
        "host": process.host,
        "pid": process.pid,
        "started_at": process.started_at,
        "version": __version__,
        "python": platform.python_version(),
        "loops": list(process.loops()),
        "control": process.control_note() is None,
        "control_note": process.control_note(),
        "note": process.note(),
        "setup": dict(process.setup()),
        "wedged_after_seconds": process.wedged_after,
    }


def document(process: ServedProcess, sections: Iterable[str] = SECTIONS) -> dict[str, Any]:
    """The status document with ``sections``."""
    wanted = set(sections)
    doc: dict[str, Any] = {"schema": SCHEMA}
    facts = process.facts() if wanted & {"health", "loops"} else []
    if "process" in wanted:
        doc["process"] = process_json(process)
    if "health" in wanted:
        live, ready = liveness(facts, process.wedged_after), readiness(facts)
        doc["health"] = {
            "live": live.ok,
            "live_reasons": list(live.reasons),
            "ready": ready.ok,
            "ready_reasons": list(ready.reasons),
        }
    if "loops" in wanted:
        doc["loops"] = [loop_json(loop, process) for loop in facts]
    if "topics" in wanted:
        topics = process.topics()
        doc["topics"] = None if topics is None else topics_json(topics)
    if "etl" in wanted:
        etl = process.etl()
        doc["etl"] = None if etl is None else etl_json(etl, listed=process.listings)
    if "dead_letters" in wanted:
        letters = process.dead_letters()
        doc["dead_letters"] = None if letters is None else [dead_letter_json(d) for d in letters]
    if "tables" in wanted:
        tables = process.tables()
        doc["tables"] = None if tables is None else tables_json(tables)
    if "demo" in wanted:
        demo = process.demo()
        if demo is not None:
            doc["demo"] = {"batches_left": demo.batches_left(), "batches_total": demo.batches_total()}
    return doc
