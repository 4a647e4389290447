"""Tables: Delta tables kept from a staging pool's outputs (docs/design.md#tables).

A table is a plain Delta table, Change Data Feed on, whose rows are one output's records
applied as the current state per key (SCD type 1) or as every version of it (type 2,
``history``). What it is kept from is written in its table properties, as JSON under
``zync.table``: the ETL, the staging pool (name and Delta table id), the output topic,
the keys and whether it keeps history — so a table is never applied from something else.

Its position is a Delta ``txn`` action, app id ``zync.apply/<topic>``, version = the last
staging version applied, committed in the same commit as the rows (as from-kafka keeps
Kafka offsets). Each commit of the apply loop also names, in its commit info, the staging
versions it covers and those among them that changed the table (``zync.staging.*``, and
``userMetadata``, which ``DESCRIBE HISTORY`` shows): :meth:`LakeTable.applied_commits`
reads them back, which is how a reader finds the table version that reflects a staging
version (:mod:`engine.apply.asof`).

A table lives at ``<lake>/<name>`` beside the pools, or at a location of its own; then
the lake keeps its address in ``<lake>/_zync/tables/<name>`` so ``zync query`` finds it
by name (:func:`lake_tables`).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from engine.errors import ZyncError
from engine.lake import delta
from engine.lake.commit_guard import CommitGuard
from engine.lake.location import Location, parse_location

if TYPE_CHECKING:
    from engine.lake.pools import Lake

PROPERTY = "zync.table"
APP_PREFIX = "zync.apply/"
#: Commit info keys of an apply commit: the staging versions it covers (first..last) and
#: the first and last of them whose outputs changed the table (absent: none did).
FIRST = "zync.staging.first"
LAST = "zync.staging.last"
CHANGED_FIRST = "zync.staging.changed_first"
CHANGED_LAST = "zync.staging.changed_last"
STAGING = "zync.staging.pool"
PROCESS = "zync.apply.process"
CATALOG = ("_zync", "tables")


class TableError(ZyncError):
    """A table cannot be created, opened or applied; the message says why, in one line."""


def apply_app(topic: str) -> str:
    """The Delta txn app id holding the last staging version applied from ``topic``."""
    return f"{APP_PREFIX}{topic}"


@dataclass(frozen=True)
class TableMeta:
    """What a table is kept from (its ``zync.table`` property)."""

    etl: str
    staging: str
    staging_id: str
    source: str  # the output topic whose records it applies
    keys: tuple[str, ...]
    history: bool

    def to_property(self) -> str:
        return json.dumps(
            {
                "etl": self.etl,
                "staging": self.staging,
                "staging_id": self.staging_id,
                "from": self.source,
                "keys": list(self.keys),
                "history": self.history,
            },
            sort_keys=True,
        )

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> TableMeta | None:
        try:
            data = json.loads(properties[PROPERTY])
            return cls(
                etl=str(data["etl"]),
                staging=str(data["staging"]),
                staging_id=str(data["staging_id"]),
                source=str(data["from"]),
                keys=tuple(str(k) for k in data["keys"]),
                history=bool(data["history"]),
            )
        except (KeyError, ValueError, TypeError):
            return None

    def describe(self) -> str:
        kind = "history (SCD2)" if self.history else "current state (SCD1)"
        return (
            f"{kind} of {self.staging}/{self.source} by {', '.join(self.keys)}, "
            f"ETL {self.etl!r}"
        )


@dataclass(frozen=True)
class AppliedCommit:
    """One commit of the apply loop: table version ``version`` holds the staging versions
    ``first..last``; ``changed`` the first and last of them that changed it (None: no
    change, the commit only moved the position)."""

    version: int
    first: int
    last: int
    changed: tuple[int, int] | None
    at: datetime


class LakeTable:
    """One table: its Delta table (keep one object and :meth:`refresh` it), what it is
    kept from, and its position."""

    def __init__(self, name: str, location: Location, table: DeltaTable, meta: TableMeta) -> None:
        self.name = name
        self.location = location
        self.table = table
        self.meta = meta
        self.guard = CommitGuard(location)

    def __repr__(self) -> str:
        return f"LakeTable({self.name!r}, version={self.version})"

    @property
    def version(self) -> int:
        return self.table.version()

    @property
    def app(self) -> str:
        return apply_app(self.meta.source)

    def refresh(self) -> int:
        self.table.update_incremental()
        return self.table.version()

    def applied(self) -> int | None:
        """The last staging version applied, in the loaded snapshot (None: none yet)."""
        return self.table.transaction_version(self.app)

    def rows(self) -> int:
        """Rows of the loaded snapshot (from the Delta log's statistics, no data read)."""
        actions = pa.table(self.table.get_add_actions(flatten=True))
        if not actions.num_rows:
            return 0
        return int(pc.sum(actions.column("num_records")).as_py() or 0)

    def columns(self) -> list[str]:
        return [field.name for field in self.table.schema().fields]

    def applied_commits(self, since: int | None = None) -> list[AppliedCommit]:
        """The apply loop's commits still in the table's log, oldest first; with
        ``since``, only the newest ones, back to the one holding staging version
        ``since`` (the log is read from its end, a few commits more each time)."""
        limit = 64
        while True:
            entries = self.table.history(limit if since is not None else None)
            found = sorted(
                (c for c in map(applied_commit, entries) if c is not None), key=lambda c: c.version
            )
            if since is None or len(entries) < limit or (found and found[0].first <= since):
                return found
            limit *= 4


def applied_commit(entry: dict[str, Any]) -> AppliedCommit | None:
    """The apply commit a ``DeltaTable.history()`` entry describes (None: another)."""
    try:
        first, last = int(entry[FIRST]), int(entry[LAST])
        version = int(entry["version"])
    except (KeyError, TypeError, ValueError):
        return None
    changed = None
    if CHANGED_FIRST in entry and CHANGED_LAST in entry:
        changed = (int(entry[CHANGED_FIRST]), int(entry[CHANGED_LAST]))
    at = datetime.fromtimestamp(int(entry.get("timestamp", 0)) / 1000, UTC)
    return AppliedCommit(version, first, last, changed, at)


def commit_metadata(
    staging: str, first: int, last: int, changed: tuple[int, int] | None, records: int
) -> dict[str, str]:
    """The commit info of an apply commit (see :class:`AppliedCommit`), with the process
    that made it (host:pid); ``userMetadata`` says it in words for ``DESCRIBE HISTORY``."""
    span = f"{first}" if first == last else f"{first}..{last}"
    words = f"zync apply: {staging} versions {span}, {records} output(s)"
    found: dict[str, str] = {
        STAGING: staging,
        FIRST: str(first),
        LAST: str(last),
        PROCESS: f"{socket.gethostname()}:{os.getpid()}",
    }
    if changed is not None:
        found |= {CHANGED_FIRST: str(changed[0]), CHANGED_LAST: str(changed[1])}
        changes = f"{changed[0]}" if changed[0] == changed[1] else f"{changed[0]}..{changed[1]}"
        words += f" (changes at {changes})"
    else:
        words += " (no change)"
    return found | {"userMetadata": words}


# ----------------------------------------------------------------------------------------
# where tables are


def table_location(lake: Lake, name: str, location: str | None = None) -> Location:
    """Where table ``name`` lives: ``location`` (a directory or URL), else
    ``<lake>/<name>``."""
    if location is None:
        return lake.location.join(name)
    return parse_location(location, lake.location.storage, origin=f"table {name!r}")


def remember(lake: Lake, name: str, where: Location) -> None:
    """Keep the address of a table that lives outside the lake's root in the lake
    (``_zync/tables/<name>``), so readers find it by name."""
    if where == lake.location.join(name):
        return
    entry = lake.location.join(*CATALOG)
    entry.make_dirs()
    fs, path = entry.join(name).filesystem()
    with fs.open_output_stream(path) as out:
        out.write(where.uri.encode())


def lake_tables(lake: Lake, names: list[str] | None = None) -> dict[str, Location]:
    """Every table of the lake by name: the Delta tables under its root that are tables
    (``names``: the Delta tables there, when the caller listed them), and those it keeps
    the address of."""
    found: dict[str, Location] = {}
    for name in lake.pool_names() if names is None else names:
        where = lake.location.join(name)
        try:
            table = delta.open_table(where)
        except (TableNotFoundError, delta.DeltaError, OSError):
            continue
        if TableMeta.from_properties(table.metadata().configuration) is not None:
            found[name] = where
    catalog = lake.location.join(*CATALOG)
    if catalog.is_local and not catalog.path.is_dir():
        return found
    import pyarrow.fs  # deferred: loaded on use

    fs, path = catalog.filesystem()
    selector = pyarrow.fs.FileSelector(path, allow_not_found=True)
    for info in fs.get_file_info(selector):
        if info.type != pyarrow.fs.FileType.File:
            continue
        with fs.open_input_stream(info.path) as handle:
            uri = handle.read().decode().strip()
        name = info.path.rsplit("/", 1)[-1]
        found.setdefault(name, parse_location(uri, lake.location.storage))
    return found


def open_table(name: str, where: Location) -> LakeTable:
    """Open table ``name`` at ``where``; :class:`TableError` when the Delta table there is
    no table, ``TableNotFoundError`` when there is none."""
    table = delta.open_table(where)
    meta = TableMeta.from_properties(table.metadata().configuration)
    if meta is None:
        raise TableError(
            f"{where} is a Delta table but not a zync table (no {PROPERTY} property): "
            f"table {name!r} cannot be kept there"
        )
    return LakeTable(name, where, table, meta)


def create_table(name: str, where: Location, meta: TableMeta, schema: pa.Schema) -> LakeTable:
    """Create table ``name`` (Change Data Feed on) or, when another process just did,
    open it."""
    guard = CommitGuard(where)
    guard.require_safe_commits()
    where.make_dirs()
    try:
        DeltaTable.create(
            where.uri,
            schema=schema,
            mode="error",
            name=name,
            description=f"zync table: {meta.describe()}",
            configuration={"delta.enableChangeDataFeed": "true", PROPERTY: meta.to_property()},
            storage_options=where.storage_options(),
            raise_if_key_not_exists=False,
        )
    except Exception as exc:  # noqa: BLE001 - another creator won the race, or a real error
        try:
            return open_table(name, where)
        except TableNotFoundError:
            raise TableError(f"cannot create table {name!r} at {where}: {exc}") from None
    return open_table(name, where)
