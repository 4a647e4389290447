"""The tables snapshot: every table the configured ETLs keep (and every other table of the
lake), as its Delta log says — version, rows, the staging version it reflects and when
it was last applied — read-only, through delta-rs.

The apply loop's own status (:class:`engine.apply.loop.TableStatus`) knows more while it
runs — staging versions it looked at and found nothing in for a table — and the console
lays it over this snapshot; this one is what a console watching a lake it does not run
sees.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import one_line

if TYPE_CHECKING:
    from engine.apply.loop import TableStatus
    from engine.etl.config import EtlConfig
    from engine.lake.lake_tables import LakeTable
    from engine.lake.location import Location
    from engine.lake.pools import Lake, Pool


@dataclass(frozen=True)
class TableSnapshot:
    """One table: ``applied`` is the last staging version applied (its position),
    ``staged`` its staging pool's newest version (None: not known)."""

    name: str
    output: str
    staging: str
    history: bool
    location: str
    version: int | None = None
    rows: int | None = None
    applied: int | None = None
    staged: int | None = None
    applied_at: float | None = None
    error: str | None = None

    @property
    def lag(self) -> int | None:
        """Staging versions not applied yet (some may hold nothing for this table)."""
        if self.staged is None:
            return None
        return self.staged - (-1 if self.applied is None else self.applied)


@dataclass(frozen=True)
class TablesReport:
    taken_at: float
    tables: tuple[TableSnapshot, ...] = ()
    error: str | None = None


def with_apply_status(report: TablesReport, statuses: Sequence[TableStatus]) -> TablesReport:
    """``report`` with what a running apply loop knows laid over it: the staging version
    each table reflects (staging versions it looked at and found nothing in for the table
    included), the newest it saw, and its last error."""
    seen = {s.name: s for s in statuses}
    rows = []
    for table in report.tables:
        status = seen.get(table.name)
        if status is not None:
            table = dataclasses.replace(
                table,
                applied=status.applied if status.applied is not None else table.applied,
                staged=status.staged if status.staged is not None else table.staged,
                error=status.error or table.error,
            )
        rows.append(table)
    return dataclasses.replace(report, tables=tuple(rows))


class TablesView:
    """Snapshots of a lake's tables; tables and staging pools opened once and refreshed."""

    def __init__(self, lake: Lake, etls: Sequence[EtlConfig], now: Callable[[], float]) -> None:
        self.lake = lake
        self.etls = list(etls)
        self.now = now
        self._lock = threading.Lock()
        self._tables: dict[str, LakeTable] = {}
        self._staging: dict[str, Pool] = {}

    def report(self) -> TablesReport:
        with self._lock:
            try:
                wanted = self._wanted()
            except Exception as exc:  # noqa: BLE001 - the lake's error, in words
                return TablesReport(self.now(), error=one_line(exc))
            return TablesReport(self.now(), tuple(self._snapshot(*w) for w in wanted))

    def _wanted(self) -> list[tuple[str, Location, str, str, bool]]:
        """(name, location, output, staging pool, history) of the configured tables, then
        of the lake's other tables."""
        from engine.lake.lake_tables import lake_tables, table_location  # deferred: deltalake

        found: dict[str, tuple[str, Location, str, str, bool]] = {}
        for config in self.etls:
            for spec in config.tables:
                where = table_location(self.lake, spec.name, spec.location)
                found[spec.name] = (spec.name, where, spec.from_, config.staging_pool, spec.history)
        for name, where in lake_tables(self.lake).items():
            found.setdefault(name, (name, where, "", "", False))
        return list(found.values())

    def _snapshot(
        self, name: str, where: Location, output: str, staging: str, history: bool
    ) -> TableSnapshot:
        from engine.lake import delta  # deferred: deltalake
        from engine.lake.lake_tables import applied_commit, open_table

        base = TableSnapshot(name, output, staging, history, where.uri)
        try:
            table = self._tables.get(name)
            if table is None or table.location != where:
                table = self._tables[name] = open_table(name, where)
            else:
                table.refresh()
        except delta.TableNotFoundError:
            return TableSnapshot(**{**base.__dict__, "error": "not made yet: nothing applied"})
        except Exception as exc:  # noqa: BLE001 - shown in words
            return TableSnapshot(**{**base.__dict__, "error": one_line(exc)})
        meta = table.meta
        # the newest apply commit: among the last few (OPTIMIZE and such may follow it)
        commits = sorted(
            (c for c in map(applied_commit, table.table.history(8)) if c is not None),
            key=lambda c: c.version,
        )
        return TableSnapshot(
            name=name,
            output=output or meta.source,
            staging=staging or meta.staging,
            history=meta.history,
            location=where.uri,
            version=table.version,
            rows=table.rows(),
            applied=table.applied(),
            staged=self._staged(staging or meta.staging),
            applied_at=commits[-1].at.timestamp() if commits else None,
        )

    def _staged(self, name: str) -> int | None:
        try:
            pool = self._staging.get(name)
            if pool is None:
                pool = self._staging[name] = self.lake.open_pool(name)
            return pool.refresh()
        except Exception:  # noqa: BLE001 - the staging pool's own snapshot says why
            return None
