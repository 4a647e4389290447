"""The apply loop's work: each table of a configuration kept up with its staging pool,
one table commit per staging version or batch of them, exactly once (docs/design.md#tables).

:meth:`TableApply.step` reads the table's position (its ``txn`` action: the last staging
version applied), the outputs staging versions after it added to the table's output
(:mod:`engine.apply.staging_changes`), decodes them (:mod:`engine.apply.typed_columns`), folds them into
the batch's net changes (:mod:`engine.apply.changes`) and MERGEs those into the table with
the new position in the same commit (:mod:`engine.apply.merge`). Staging versions are
never split: a commit holds whole versions, at most ``versions_per_commit`` of them. A
commit that loses a race (another apply process, a user's OPTIMIZE) is planned again
on the new snapshot, which may find the versions applied already. A batch with no output
for the table commits nothing, but the position is committed alone once it is
``advance_every`` versions behind, so a restart never reads far back.

:class:`Applier` does this for every table of a configuration.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.apply import changes, merge
from engine.apply.staging_changes import StagingChanges
from engine.apply.target import Shape, Target
from engine.apply.typed_columns import decode
from engine.errors import ZyncError, one_line
from engine.lake import delta
from engine.lake.lake_tables import TableError, commit_metadata

if TYPE_CHECKING:
    from engine.etl.config import EtlConfig, Table
    from engine.lake.pools import Lake, Pool

#: Staging versions one table commit holds at most, by default.
VERSIONS_PER_COMMIT = 1000
#: A table whose output had nothing for this many staging versions commits its position.
ADVANCE_EVERY = 100
MAX_ATTEMPTS = 50


class ApplyError(ZyncError):
    """A batch cannot be applied now (commits kept conflicting, the store failed); one
    line."""


class BadOutput(ApplyError):
    """An output cannot be applied to its table (a NULL key); one line naming the table,
    the output, its offset and the key."""


@dataclass(frozen=True)
class ApplyResult:
    """One step of a table: staging versions ``first..last`` read, ``records`` outputs
    among them; ``table_version`` the commit made (None: none)."""

    table: str
    first: int
    last: int
    records: int
    changed: tuple[int, int] | None
    table_version: int | None
    rows_written: int = 0
    seconds: float = 0.0
    attempts: int = 1

    def line(self) -> str:
        span = f"{self.first}" if self.first == self.last else f"{self.first}..{self.last}"
        if self.table_version is None:
            return f"{self.table}: staging {span}: nothing for the table"
        return (
            f"{self.table}: staging {span} applied ({self.records} output(s)) as table "
            f"version {self.table_version} in {self.seconds:.2f}s"
        )


@dataclass(frozen=True)
class TableStatus:
    """A table as the apply loop last saw it; ``applied`` is the staging version it
    reflects, ``staged`` the staging pool's newest (``lag`` = the difference)."""

    name: str
    output: str
    location: str
    history: bool
    table_version: int | None = None
    applied: int | None = None
    staged: int | None = None
    rows: int | None = None
    commits: int = 0
    records: int = 0
    last_commit_at: float | None = None
    error: str | None = None

    @property
    def lag(self) -> int | None:
        if self.staged is None:
            return None
        return self.staged - (-1 if self.applied is None else self.applied)


@dataclass
class _Counters:
    commits: int = 0
    records: int = 0
    last_commit_at: float | None = None
    error: str | None = None
    results: list[ApplyResult] = field(default_factory=list)


class TableApply:
    """Keeps one table up with its staging pool."""

    def __init__(
        self,
        config: EtlConfig,
        spec: Table,
        lake: Lake,
        staging: Pool,
        *,
        versions_per_commit: int = VERSIONS_PER_COMMIT,
        advance_every: int = ADVANCE_EVERY,
    ) -> None:
        if versions_per_commit < 1:
            raise ApplyError("versions per commit must be at least 1")
        self.spec = spec
        self.staging = staging
        self.target = Target(config, spec, lake, staging)
        self.reader = StagingChanges(staging, self.target.topic)
        self.versions_per_commit = versions_per_commit
        self.advance_every = advance_every
        self.frontier = -1  # staging versions up to here hold nothing more for the table
        self.counters = _Counters()
        self._status = self._look(None)

    @property
    def name(self) -> str:
        return self.spec.name

    def catch_up(
        self, staged: int, on_step: Callable[[], None] | None = None
    ) -> list[ApplyResult]:
        """Apply every staging version up to ``staged``, a commit per batch (``on_step``
        is called after each)."""
        done = []
        try:
            while True:
                result = self.step(staged)
                if on_step is not None:
                    on_step()
                if result is None:
                    break
                done.append(result)
        except ZyncError as exc:
            self.counters.error = str(exc)
            raise
        finally:
            with contextlib.suppress(Exception):  # the status keeps what it had
                self._status = self._look(staged)
        self.counters.error = None
        return done

    def step(self, staged: int) -> ApplyResult | None:
        """Apply the next batch of staging versions up to ``staged`` (None: nothing to
        do, or the output has no type yet); a lost race is planned again."""
        delay = 0.005
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                result = self._attempt(staged, attempt)
            except delta.CommitFailedError:
                pass  # another writer committed first: plan again on its snapshot
            except (TableError, BadOutput):
                raise
            except (delta.DeltaError, OSError) as exc:
                # e.g. a file a concurrent VACUUM removed under a read: try again a while
                if attempt >= 5:
                    raise ApplyError(f"table {self.name!r}: {one_line(exc)}") from None
            else:
                if result is not None and result.table_version is not None:
                    self.counters.commits += 1
                    self.counters.records += result.records
                    self.counters.last_commit_at = time.time()
                return result
            time.sleep(random.uniform(0, delay))
            delay = min(delay * 2, 0.5)
        raise ApplyError(
            f"table {self.name!r}: gave up after {MAX_ATTEMPTS} conflicting commits"
        )

    def _attempt(self, staged: int, attempt: int) -> ApplyResult | None:
        started = time.monotonic()
        table = self.target.open()
        shape = self.target.shape()
        if table is None or shape is None:
            return None
        table.refresh()
        position = table.applied()
        applied = -1 if position is None else position
        first = max(applied, self.frontier) + 1
        if first > staged:
            self.frontier = max(self.frontier, applied)
            return None
        last = min(staged, first + self.versions_per_commit - 1)
        self.target.check(shape)
        table.guard.require_safe_commits()  # an S3 store that ignores conditional writes
        rows = self.reader.read(first, last)
        if not rows.num_rows:
            self.frontier = last
            if last - applied < self.advance_every:
                return ApplyResult(self.name, first, last, 0, None, None)
            merge.advance(table, last, commit_metadata(self.staging.name, applied + 1, last, None, 0))
            return self._done(applied + 1, last, rows, None, 0, started, attempt)
        versions = rows.column("version")
        changed = (int(pc.min(versions).as_py()), int(pc.max(versions).as_py()))
        decoded = decode(rows, shape.fields, self.spec.keys, shape.key_type)
        self._refuse_null_keys(decoded)
        metadata = commit_metadata(self.staging.name, applied + 1, last, changed, rows.num_rows)
        written = self._merge(decoded, shape, last, metadata)
        self.frontier = last
        return self._done(applied + 1, last, rows, changed, written, started, attempt)

    def _merge(self, decoded: pa.Table, shape: Shape, last: int, metadata: dict[str, str]) -> int:
        table = self.target.table
        assert table is not None
        keys, names = self.spec.keys, shape.names
        if self.spec.history:
            current = merge.current_rows(table, keys, decoded)
            source = changes.history_changes(decoded, keys, names, current)
            metrics = merge.merge_history(table, source, keys, names, last, metadata)
        else:
            source = changes.current_changes(decoded, keys, names)
            metrics = merge.merge_current(table, source, keys, names, last, metadata)
        return metrics.get("num_output_rows", 0)

    def _done(
        self,
        first: int,
        last: int,
        rows: pa.Table,
        changed: tuple[int, int] | None,
        written: int,
        started: float,
        attempt: int,
    ) -> ApplyResult:
        lake_table = self.target.table
        assert lake_table is not None
        version = lake_table.refresh()
        return ApplyResult(
            self.name,
            first,
            last,
            rows.num_rows,
            changed,
            version,
            written,
            time.monotonic() - started,
            attempt,
        )

    def _refuse_null_keys(self, decoded: pa.Table) -> None:
        for key in self.spec.keys:
            column = decoded.column(key)
            if column.null_count:
                offset = decoded.column("offset").filter(pc.is_null(column))[0].as_py()
                raise BadOutput(
                    f"table {self.name!r}: output {self.spec.from_!r} offset {offset} has "
                    f"no key {key!r} (NULL in its value, or in its key for a tombstone): "
                    "nothing of this batch was applied"
                )

    def status(self) -> TableStatus:
        """What the loop saw after its last catch-up (safe from any thread)."""
        return self._status

    def _look(self, staged: int | None) -> TableStatus:
        table = self.target.table
        applied = None
        rows = None
        version = None
        if table is not None:
            position = table.applied()
            applied = max(-1 if position is None else position, self.frontier)
            rows = table.rows()
            version = table.version
        return TableStatus(
            name=self.name,
            output=self.spec.from_,
            location=self.target.location.uri,
            history=self.spec.history,
            table_version=version,
            applied=applied,
            staged=staged,
            rows=rows,
            commits=self.counters.commits,
            records=self.counters.records,
            last_commit_at=self.counters.last_commit_at,
            error=self.counters.error,
        )


class Applier:
    """Every table of one ETL configuration, applied from its staging pool."""

    def __init__(
        self,
        config: EtlConfig,
        lake: Lake,
        *,
        versions_per_commit: int = VERSIONS_PER_COMMIT,
        advance_every: int = ADVANCE_EVERY,
    ) -> None:
        if not config.tables:
            raise ApplyError(f"{config.source}: no tables to apply (add `tables:` to it)")
        self.config = config
        self.lake = lake
        self.versions_per_commit = versions_per_commit
        self.advance_every = advance_every
        self._staging: Pool | None = None
        self._tables: list[TableApply] = []
        self.staged: int | None = None
        #: called after each step of a table (the apply service's heartbeat)
        self.on_step: Callable[[], None] | None = None

    def staging(self) -> Pool:
        """The staging pool (opened once; raises :class:`engine.lake.pools.PoolError`
        while it does not exist)."""
        if self._staging is None:
            self._staging = self.lake.open_pool(self.config.staging_pool)
            self._tables = [
                TableApply(
                    self.config,
                    spec,
                    self.lake,
                    self._staging,
                    versions_per_commit=self.versions_per_commit,
                    advance_every=self.advance_every,
                )
                for spec in self.config.tables
            ]
        return self._staging

    @property
    def tables(self) -> list[TableApply]:
        self.staging()
        return list(self._tables)

    def run_once(self) -> list[ApplyResult]:
        """Apply every table up to the staging pool's newest version."""
        staging = self.staging()
        self.staged = staging.refresh()
        done = []
        for table in self._tables:
            done.extend(table.catch_up(self.staged, self.on_step))
        return done

    def status(self) -> tuple[TableStatus, ...]:
        if self._staging is None:
            return ()
        return tuple(t.status() for t in self._tables)
