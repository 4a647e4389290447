"""The observer's snapshots (topics, ETL, dead letters, tables) and an ETL pass as JSON,
and back: what the status document
carries (:mod:`engine.serve.status_document`) and what the console rebuilds from it, so it renders
a remote pipeline with the same types as a local one. Bytes travel as base64."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from engine.etl.result import PassResult
from engine.observe.reports import (
    DeadLetter,
    EtlReport,
    EtlSnapshot,
    RecordRow,
    TopicSnapshot,
    TopicsReport,
)
from engine.observe.tables_view import TableSnapshot, TablesReport


def topics_json(report: TopicsReport) -> dict[str, Any]:
    data = dataclasses.asdict(report)
    data["topics"] = [dataclasses.asdict(t) for t in report.topics]
    return data


def topics_from(data: dict[str, Any]) -> TopicsReport:
    rows = tuple(
        TopicSnapshot(**{**t, "history": tuple(t.get("history") or ())}) for t in data["topics"]
    )
    return TopicsReport(
        taken_at=data["taken_at"],
        topics=rows,
        kafka_error=data.get("kafka_error"),
        registry_error=data.get("registry_error"),
        lake_error=data.get("lake_error"),
    )


def tables_json(report: TablesReport) -> dict[str, Any]:
    return dataclasses.asdict(report)


def tables_from(data: dict[str, Any]) -> TablesReport:
    return TablesReport(
        taken_at=data["taken_at"],
        tables=tuple(TableSnapshot(**t) for t in data["tables"]),
        error=data.get("error"),
    )


def etl_json(report: EtlReport, *, listed: bool) -> dict[str, Any]:
    """``listed``: whether the pending and expired records were listed (a process that
    runs no Spark lists none)."""
    return {
        "taken_at": report.taken_at,
        "rows": [dataclasses.asdict(r) for r in report.rows],
        "pending": [dataclasses.asdict(r) for r in report.pending],
        "expired": [dataclasses.asdict(r) for r in report.expired],
        "staging_version": report.staging_version,
        "error": report.error,
        "listed": listed,
    }


def etl_from(data: dict[str, Any]) -> EtlReport:
    return EtlReport(
        taken_at=data["taken_at"],
        rows=tuple(EtlSnapshot(**r) for r in data["rows"]),
        pending=tuple(RecordRow(**r) for r in data["pending"]),
        expired=tuple(RecordRow(**r) for r in data["expired"]),
        staging_version=data.get("staging_version"),
        error=data.get("error"),
    )


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def dead_letter_json(letter: DeadLetter) -> dict[str, Any]:
    data = dataclasses.asdict(letter)
    data["key_bytes"] = _b64(letter.key_bytes)
    data["value_bytes"] = _b64(letter.value_bytes)
    return data


def dead_letter_from(data: dict[str, Any]) -> DeadLetter:
    return DeadLetter(
        **{
            **data,
            "key_bytes": _unb64(data.get("key_bytes")),
            "value_bytes": _unb64(data.get("value_bytes")),
        }
    )


def pass_from(data: dict[str, Any]) -> PassResult:
    """A pass result from its :meth:`PassResult.to_json` (counts, versions, cursors)."""

    def positions(values: dict[str, int]) -> dict[tuple[str, int], int]:
        out = {}
        for key, value in values.items():
            topic, _, partition = key.rpartition("/")
            out[(topic, int(partition))] = value
        return out

    return PassResult(
        etl=data["etl"],
        dry_run=data.get("dry_run", False),
        committed=data.get("committed", False),
        read_version=data.get("read_version", -1),
        staging_version=data.get("staging_version", -1),
        consumed=dict(data.get("consumed", {})),
        processed=dict(data.get("processed", {})),
        expired=dict(data.get("expired", {})),
        pending=dict(data.get("pending", {})),
        outputs=dict(data.get("outputs", {})),
        expired_rules=dict(data.get("expired_rules", {})),
        pending_rules=dict(data.get("pending_rules", {})),
        offsets={t: (v[0], v[1]) for t, v in data.get("offsets", {}).items()},
        cursors=positions(data.get("cursors", {})),
        moved=positions(data.get("moved", {})),
        attempts=data.get("attempts", 1),
        seconds=data.get("seconds", 0.0),
    )
