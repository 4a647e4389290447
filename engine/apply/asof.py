"""Tables read as of a staging version: each at the Delta version that reflects exactly
what the staging pool held at that version (docs/design.md#tables, "Reading tables
together").

Every apply commit names the staging versions it covers and the first and last of them
that changed the table (:class:`engine.lake.lake_tables.AppliedCommit`). For a staging
version V, a table's version is:

* the commit covering V, when none of its changes is after V;
* the version before that commit, when all of its changes are after V;
* its newest version, when it has applied everything up to some A < V and the staging
  versions A+1..V hold nothing for it (a table with nothing to apply reflects V too);

and there is none — :class:`AsOfError`, one line — when one commit holds changes from
both sides of V (a batch of several staging versions: ``--versions-per-commit 1`` keeps
every version), when the table has not applied V yet, or when its log no longer holds V.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.apply.staging_changes import StagingChanges
from engine.errors import ZyncError
from engine.lake.lake_tables import LakeTable, TableError, lake_tables, open_table
from engine.lake.pool_errors import PoolError

if TYPE_CHECKING:
    from engine.lake.location import Location
    from engine.lake.pools import Lake, Pool


class AsOfError(ZyncError):
    """No version of a table reflects the staging version asked for; one line."""


@dataclass(frozen=True)
class TableAt:
    """Table ``name`` (at ``location``) read at Delta version ``version``, which
    reflects a version of staging pool ``staging``."""

    name: str
    location: Location
    version: int
    staging: str


def table_version_at(table: LakeTable, staging: Pool, version: int) -> int:
    """The Delta version of ``table`` that reflects staging version ``version``."""
    table.refresh()
    commits = table.applied_commits(since=version)
    head = f"table {table.name!r}"
    for commit in commits:
        if commit.first <= version <= commit.last:
            if commit.changed is None or commit.changed[1] <= version:
                return commit.version
            if commit.changed[0] > version:
                return commit.version - 1
            raise AsOfError(
                f"{head} applied staging versions {commit.first}..{commit.last} in one commit "
                f"(its version {commit.version}) with changes at {commit.changed[0]} and "
                f"{commit.changed[1]}: none of its versions reflects staging version "
                f"{version} alone (`zync apply --versions-per-commit 1` keeps every one)"
            )
    applied = commits[-1].last if commits else -1
    if version > applied:
        if StagingChanges(staging, table.meta.source).read(applied + 1, version).num_rows:
            raise AsOfError(
                f"{head} has not applied staging version {version} yet (it reflects "
                f"{applied if applied >= 0 else 'none'}; is the apply loop running?)"
            )
        return table.version
    oldest = commits[0].first if commits else 0
    raise AsOfError(
        f"{head}'s log no longer holds staging version {version} (it goes back to "
        f"{oldest})"
    )


def tables_as_of_staging(lake: Lake, version: int, pool: str | None = None) -> list[TableAt]:
    """Every table of the lake kept from staging pool ``pool`` (None: the one staging
    pool the lake's tables come from) at its version reflecting staging ``version``."""
    tables = []
    for name, where in lake_tables(lake).items():
        try:
            tables.append(open_table(name, where))
        except (TableError, OSError):
            continue
    if pool is not None:
        tables = [t for t in tables if t.meta.staging == pool]
    if not tables:
        of = f" kept from staging pool {pool!r}" if pool else ""
        raise AsOfError(f"no tables{of} in lake {lake.location} to read as of staging {version}")
    pools = sorted({t.meta.staging for t in tables})
    if len(pools) > 1:
        raise AsOfError(
            f"the lake's tables come from staging pools {', '.join(pools)}: name one, "
            f"e.g. --as-of-staging {pools[0]}:{version}"
        )
    try:
        staging = lake.open_pool(pools[0])
    except PoolError as exc:
        raise AsOfError(str(exc)) from None
    staging.refresh()
    if version < 0 or version > staging.version:
        raise AsOfError(
            f"staging pool {staging.name!r} has no version {version} (its versions are 0 "
            f"to {staging.version})"
        )
    staging_id = str(staging.table.metadata().id)
    found = []
    for table in tables:
        if table.meta.staging_id != staging_id:
            raise AsOfError(
                f"table {table.name!r} was applied from an earlier staging pool "
                f"{staging.name!r} (another Delta table id): it reflects none of this one's "
                "versions"
            )
        at = table_version_at(table, staging, version)
        found.append(TableAt(table.name, table.location, at, staging.name))
    return found
