"""Time travel in ``zync query``: ``P VERSION AS OF 3`` and ``P TIMESTAMP AS OF '...'``.

Every pool is a temporary view (typed pool records over its Delta table), and Spark cannot
time-travel a view. So before a query runs, :func:`find_travels` finds each reference
``<pool view> [FOR] VERSION|SYSTEM_VERSION AS OF <n>`` and ``<pool view> [FOR]
TIMESTAMP|SYSTEM_TIME AS OF <literal>`` (outside string literals and comments:
:mod:`engine.lake.sqltext`); :func:`resolve_version` turns it into a version of that pool,
checked against the pool's history; the caller registers a typed view of that version
under :func:`internal_name` and :func:`rewrite` puts that name in the reference's place,
aliased to the name as written, so ``Staging.seqno`` still names a column. Several
versions of the same pool can appear in one query (a diff between versions).

A timestamp picks the newest version committed at or before it, as Delta does (a moment
after the last commit is the current version); one before the pool's first commit is an
error. A naive timestamp is in the session's time zone (UTC unless spark.json says
otherwise), as Spark reads it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from engine.errors import ZyncError
from engine.lake import delta
from engine.lake.sqltext import Kind, Token, quote_name, tokens

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.lake.pools import Pool

#: Words after a table reference that start the next clause: never a table alias.
CLAUSE_WORDS = frozenset(
    {
        "WHERE", "GROUP", "HAVING", "ORDER", "SORT", "CLUSTER", "DISTRIBUTE", "LIMIT",
        "OFFSET", "WINDOW", "UNION", "INTERSECT", "EXCEPT", "MINUS", "JOIN", "INNER", "LEFT",
        "RIGHT", "FULL", "CROSS", "NATURAL", "SEMI", "ANTI", "OUTER", "ON", "USING",
        "LATERAL", "PIVOT", "UNPIVOT", "TABLESAMPLE", "QUALIFY", "SELECT", "FROM", "WITH",
        "INSERT",
    }
)
_VERSION_WORDS = ("VERSION", "SYSTEM_VERSION")
_TIME_WORDS = ("TIMESTAMP", "SYSTEM_TIME")
_TYPED_LITERALS = ("TIMESTAMP", "TIMESTAMP_LTZ", "TIMESTAMP_NTZ", "DATE")
_PREFIX = "__zync_v"
_INTERNAL = re.compile(rf"`?{_PREFIX}(\d+)_(\w+?)`?(?=\W|$)")


class TimeTravelError(ZyncError):
    """A time-travel reference that cannot be read: unknown pool, no such version, a
    moment before the first commit, files removed by VACUUM."""


@dataclass(frozen=True)
class Travel:
    """One ``<name> VERSION|TIMESTAMP AS OF <literal>`` reference in a query."""

    start: int  # the span of the reference in the SQL text
    end: int
    written: str  # the name as written (backticks removed)
    pool: str
    suffix: str  # "" (records), "_deadletters" or "_markers": which view of the pool
    version: int | None  # VERSION AS OF
    timestamp: str | None  # TIMESTAMP AS OF: the literal as written, in SQL
    aliased: bool  # an alias follows the reference

    @property
    def clause(self) -> str:
        if self.version is not None:
            return f"VERSION AS OF {self.version}"
        return f"TIMESTAMP AS OF {self.timestamp}"


def find_travels(
    sql: str, names: Mapping[str, tuple[str, str]], leave: Collection[str] = ()
) -> list[Travel]:
    """The time-travel references of ``sql``.

    ``names`` maps each SQL name a pool's views answer to (lower case: the view names,
    ``P_deadletters``, ``P_markers``, and the pool name itself, which a backticked
    reference such as ```raw-2024``` uses) to ``(pool, suffix)``. Raises
    :class:`TimeTravelError` for a time-travelled name that is no pool (but those of
    ``leave``, lower case: Delta tables Spark time-travels itself), and
    :class:`engine.lake.sqltext.SqlTextError` for an unclosed literal or comment.
    """
    found: list[Travel] = []
    words = tokens(sql)
    after_last = 0
    for i, token in enumerate(words):
        if i < after_last or token.kind not in (Kind.WORD, Kind.QUOTED):
            continue
        if (i and words[i - 1].text == ".") or _at(words, i + 1, ".") is not None:
            continue  # a qualified name (delta.`/path`, db.table): Spark's own business
        target = names.get(token.name.lower())
        if target is None and token.name.lower() in leave:
            continue
        # a malformed literal is an error after a pool's name; elsewhere it is not ours
        # (``SELECT version AS of``: a column aliased ``of``)
        clause = _temporal_clause(words, i + 1, strict=target is not None)
        if clause is None:
            continue
        end, version, timestamp = clause
        after_last = end
        if target is None:
            known = sorted({pool for pool, _ in names.values()})
            kind = "VERSION" if version is not None else "TIMESTAMP"
            raise TimeTravelError(
                f"no pool {token.name!r} to read {kind} AS OF "
                f"(pools: {', '.join(known) or 'none'})"
            )
        after = words[end] if end < len(words) else None
        aliased = after is not None and (
            after.is_word("AS")
            or (after.kind in (Kind.WORD, Kind.QUOTED) and not after.is_word(*CLAUSE_WORDS))
        )
        found.append(
            Travel(
                start=token.start,
                end=words[end - 1].end,
                written=token.name,
                pool=target[0],
                suffix=target[1],
                version=version,
                timestamp=timestamp,
                aliased=aliased,
            )
        )
    return found


def _at(words: Sequence[Token], i: int, text: str) -> Token | None:
    return words[i] if i < len(words) and words[i].text == text else None


def _temporal_clause(
    words: Sequence[Token], i: int, *, strict: bool
) -> tuple[int, int | None, str | None] | None:
    """``[FOR] VERSION|TIMESTAMP AS OF <literal>`` starting at ``words[i]``: the index
    after it, the version or the timestamp literal (as written); None when absent, or
    malformed and not ``strict`` (which raises :class:`TimeTravelError` instead)."""
    if i < len(words) and words[i].is_word("FOR"):
        i += 1
    if i + 3 > len(words) or not (words[i + 1].is_word("AS") and words[i + 2].is_word("OF")):
        return None
    kind, i = words[i], i + 3
    literal = words[i] if i < len(words) else None
    if kind.is_word(*_VERSION_WORDS):
        text = literal.value if literal is not None and literal.kind is Kind.STRING else None
        if literal is not None and literal.kind is Kind.NUMBER:
            text = literal.text
        if text is None or not text.strip().isdigit():
            if not strict:
                return None
            raise TimeTravelError(
                f"{kind.text.upper()} AS OF takes a version number (e.g. VERSION AS OF 3)"
            )
        return i + 1, int(text), None
    if kind.is_word(*_TIME_WORDS):
        if literal is not None and literal.is_word(*_TYPED_LITERALS) and i + 1 < len(words):
            typed = words[i + 1]
            if typed.kind is Kind.STRING:
                return i + 2, None, f"{literal.text} {typed.text}"
        if literal is not None and literal.kind is Kind.STRING:
            return i + 1, None, literal.text
        if not strict:
            return None
        raise TimeTravelError(
            f"{kind.text.upper()} AS OF takes a timestamp literal "
            "(e.g. TIMESTAMP AS OF '2026-11-23 10:00:00')"
        )
    return None


def internal_name(view: str, version: int) -> str:
    """The name of the view of ``view`` (a pool's view name) at ``version``."""
    return f"{_PREFIX}{version}_{view}"


def rewrite(sql: str, travels: Sequence[Travel], names: Sequence[str]) -> str:
    """``sql`` with each reference replaced by its view's name in ``names`` (one per
    reference, in order), aliased to the name as written unless the query gives one."""
    out = sql
    for travel, name in sorted(zip(travels, names, strict=True), key=lambda p: -p[0].start):
        text = quote_name(name) if travel.aliased else (
            f"{quote_name(name)} AS {quote_name(travel.written)}"
        )
        out = out[: travel.start] + text + out[travel.end :]
    return out


def readable(message: str) -> str:
    """A Spark message with internal view names put back as the user wrote them:
    ``Staging VERSION AS OF 3``."""
    return _INTERNAL.sub(lambda m: f"{m.group(2)} VERSION AS OF {m.group(1)}", message)


# ----------------------------------------------------------------------------------------
# versions


@dataclass(frozen=True)
class Commit:
    version: int
    at: datetime


def resolve_version(spark: SparkSession, pool: Pool, travel: Travel) -> int:
    """The version of ``pool`` that ``travel`` names, checked: it is in the pool's log,
    and (on a local lake) its files are still there."""
    pool.refresh()
    if travel.version is not None:
        version = travel.version
        if version > pool.version:
            raise TimeTravelError(
                f"pool {pool.name!r} has no version {version} ({_versions(pool)})"
            )
    else:
        assert travel.timestamp is not None
        moment = timestamp_value(spark, travel.timestamp)
        commits = history(pool)
        if not commits or moment < commits[0].at:
            raise TimeTravelError(
                f"pool {pool.name!r} has no version at {_show(moment)}: that is before "
                f"its first commit ({_versions(pool, commits)})"
            )
        table = delta.open_table(pool.location)
        table.load_as_version(moment)
        version = table.version()
    _check_files(pool, version)
    return version


def timestamp_value(spark: SparkSession, literal: str) -> datetime:
    """The moment a timestamp literal (SQL, as written) means to Spark, in UTC."""
    # deferred: pyspark
    from pyspark.errors import PySparkException

    try:
        row = spark.sql(f"SELECT unix_micros(CAST({literal} AS TIMESTAMP)) AS t").first()
    except PySparkException:
        row = None
    if row is None or row["t"] is None:
        raise TimeTravelError(
            f"TIMESTAMP AS OF {literal}: not a timestamp (e.g. '2026-11-23 10:00:00')"
        )
    micros = int(row["t"])
    return datetime.fromtimestamp(micros // 1_000_000, UTC).replace(
        microsecond=micros % 1_000_000
    )


def history(pool: Pool) -> list[Commit]:
    """The pool's commits still in its log, oldest first, with their timestamps."""
    commits = [
        Commit(int(entry["version"]), datetime.fromtimestamp(entry["timestamp"] / 1000, UTC))
        for entry in pool.table.history()
        if "version" in entry and "timestamp" in entry
    ]
    return sorted(commits, key=lambda c: c.version)


def _versions(pool: Pool, commits: Sequence[Commit] | None = None) -> str:
    """``its versions are 0 to 9``, with their times when ``commits`` are given."""
    if commits is None:
        commits = history(pool)
        if not commits:
            return f"its versions are 0 to {pool.version}"
        first, last = commits[0].version, commits[-1].version
        return f"its versions are {first} to {last}"
    if not commits:
        return "it has no commits"
    first_c, last_c = commits[0], commits[-1]
    return (
        f"its versions are {first_c.version} ({_show(first_c.at)}) to "
        f"{last_c.version} ({_show(last_c.at)})"
    )


def _check_files(pool: Pool, version: int) -> None:
    """The version is in the log and, on a local lake, every file of it is still on disk
    (VACUUM removes the files no recent version needs)."""
    try:
        snapshot = delta.open_table(pool.location, version=version)
    except delta.DeltaError:
        raise TimeTravelError(
            f"pool {pool.name!r} has no version {version} ({_versions(pool)})"
        ) from None
    uris = snapshot.file_uris()
    gone = sum(1 for uri in uris if (path := _local(uri)) is not None and not path.exists())
    if gone:
        raise TimeTravelError(
            f"pool {pool.name!r} version {version} cannot be read: {gone} of its "
            f"{len(uris)} files were removed (VACUUM); {_versions(pool)}, the newer ones "
            "may still be readable"
        )


def _local(uri: str) -> Path | None:
    if "://" not in uri:
        return Path(uri)
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def _show(moment: datetime) -> str:
    text = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")
    return f"{text} UTC"
