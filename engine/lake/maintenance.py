"""Pool upkeep: compaction, vacuum and checkpoints.

Why each matters (measured on this project's lakes):

* **Checkpoints.** Loading a Delta table replays its log since the last checkpoint, and
  a commit reloads it: without checkpoints a commit cost ~25 ms on a short log and
  ~560 ms after 1,000 small commits. delta-rs writes one every ``delta.checkpointInterval``
  commits (100) after its own commits; :class:`Upkeep` makes sure of it from the ingest
  loop whatever the table's settings, and :func:`checkpoint` writes one on demand.
* **Compaction.** A delta-rs append plans over every live file, so its cost grows with
  the number of files (measured here: ~12 ms with one file, ~48 ms with 300 small ones).
  Each from-kafka commit adds one file; :func:`compact` rewrites small files into large
  ones (``optimize.compact``: a ``dataChange=false`` commit, so positions, seqnos and
  types are untouched and readers see the same rows).
* **Vacuum** deletes the files no snapshot younger than the retention needs (the files
  compaction replaced, for instance). Time travel (``zync query --as-of``) to versions
  older than the retention may then fail, as in any Delta table.

Every function here is safe while from-kafka or an ETL writes the same pool: compaction
commits through delta-rs' conflict checker (an append does not conflict with it, and an
exactly-once writer whose planned version was taken re-plans), a checkpoint is a
read-only summary of an existing version.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties

if TYPE_CHECKING:
    from engine.lake.pools import Pool

#: Delta's default: keep files for 7 days, as other Delta writers expect.
DEFAULT_RETENTION_HOURS = 168
#: Write a checkpoint at least every this many commits.
CHECKPOINT_EVERY = 100
#: Compact when a pool has at least this many live files below SMALL_FILE_BYTES.
COMPACT_SMALL_FILES = 200
SMALL_FILE_BYTES = 16 * 2**20
#: Target file size for compaction (delta-rs' default is 100 MiB).
TARGET_FILE_BYTES = 128 * 2**20


@dataclass(frozen=True)
class CompactResult:
    """What :func:`compact` did (``version`` None: there was nothing to compact)."""

    version: int | None
    files_removed: int
    files_added: int
    seconds: float


@dataclass(frozen=True)
class VacuumResult:
    """The files :func:`vacuum` deleted (or would delete, with ``dry_run``)."""

    files: tuple[str, ...]
    dry_run: bool
    retention_hours: int


@dataclass(frozen=True)
class FileCounts:
    files: int
    small_files: int
    bytes: int


def file_counts(pool: Pool, small_file_bytes: int = SMALL_FILE_BYTES) -> FileCounts:
    """How many live files the pool has, how many are small, and their total size."""
    actions = pa.table(pool.table.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return FileCounts(0, 0, 0)
    sizes = actions.column("size_bytes")
    small = pc.sum(pc.less(sizes, small_file_bytes).cast(pa.int64())).as_py() or 0
    return FileCounts(actions.num_rows, int(small), int(pc.sum(sizes).as_py() or 0))


def compact(pool: Pool, *, target_size: int = TARGET_FILE_BYTES) -> CompactResult:
    """Rewrite the pool's small files into files of about ``target_size`` bytes."""
    started = time.monotonic()
    pool.refresh()
    pool.guard.require_safe_commits()
    before = pool.version
    metrics = pool.table.optimize.compact(
        target_size=target_size,
        commit_properties=CommitProperties(custom_metadata={"zync.op": "compact"}),
    )
    pool.refresh()
    removed = int(metrics.get("numFilesRemoved", 0))
    added = int(metrics.get("numFilesAdded", 0))
    version = pool.version if (removed or added) and pool.version != before else None
    return CompactResult(version, removed, added, time.monotonic() - started)


def vacuum(
    pool: Pool,
    *,
    retention_hours: int = DEFAULT_RETENTION_HOURS,
    dry_run: bool = False,
    enforce_retention: bool = True,
) -> VacuumResult:
    """Delete files no snapshot younger than ``retention_hours`` needs, and files older
    than that which no snapshot names (written by a writer that died or lost a commit
    race before committing them).

    A retention under Delta's minimum (168 hours) is refused unless
    ``enforce_retention`` is False: a reader or writer still planning on an older
    snapshot could lose its files.
    """
    if not dry_run:
        pool.guard.require_safe_commits()
    pool.refresh()
    files = pool.table.vacuum(
        retention_hours=retention_hours,
        dry_run=dry_run,
        enforce_retention_duration=enforce_retention,
        full=True,
    )
    pool.refresh()
    return VacuumResult(tuple(files), dry_run, retention_hours)


def checkpoint(pool: Pool) -> int:
    """Write a checkpoint of the pool's current version; returns that version."""
    pool.refresh()
    pool.table.create_checkpoint()
    return pool.version


def last_checkpoint(pool: Pool) -> int | None:
    """The version of the pool's newest checkpoint (from ``_delta_log/_last_checkpoint``)."""
    fs, base = pool.location.join("_delta_log", "_last_checkpoint").filesystem()
    try:
        with fs.open_input_stream(base) as marker:
            data = json.loads(marker.read().decode("utf-8"))
        return int(data["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Upkeep:
    """Housekeeping a writing loop runs after its commits (one object per pool).

    * a checkpoint when the pool is ``checkpoint_every`` commits past the last one;
    * a compaction when, checked every ``check_every`` commits, the pool holds at least
      ``compact_small_files`` small files (0 disables it).

    :meth:`after_commit` returns what it did, in words, for the loop's log or stats.
    """

    def __init__(
        self,
        *,
        checkpoint_every: int = CHECKPOINT_EVERY,
        compact_small_files: int = COMPACT_SMALL_FILES,
        check_every: int = 20,
    ) -> None:
        self.checkpoint_every = checkpoint_every
        self.compact_small_files = compact_small_files
        self.check_every = max(1, check_every)
        self._commits = 0
        self._checkpointed: int | None = None

    def after_commit(self, pool: Pool) -> list[str]:
        done: list[str] = []
        self._commits += 1
        version = pool.version
        if self.checkpoint_every > 0:
            if self._checkpointed is None:
                self._checkpointed = last_checkpoint(pool) or 0
            if version - self._checkpointed >= self.checkpoint_every:
                # delta-rs may have written one after this very commit: look again
                self._checkpointed = last_checkpoint(pool) or 0
                if version - self._checkpointed >= self.checkpoint_every:
                    self._checkpointed = checkpoint(pool)
                    done.append(f"checkpoint at version {self._checkpointed}")
        if self.compact_small_files > 0 and self._commits % self.check_every == 0:
            counts = file_counts(pool)
            if counts.small_files >= self.compact_small_files:
                result = compact(pool)
                if result.version is not None:
                    done.append(
                        f"compacted {result.files_removed} files into {result.files_added} "
                        f"(version {result.version}, {result.seconds:.1f}s)"
                    )
        return done
