"""Finding pool references with VERSION|TIMESTAMP AS OF in SQL text, and rewriting them
(engine/lake/sqltext.py, engine/lake/timetravel.py): no Spark."""

from __future__ import annotations

import pytest

from engine.lake.query import sql_names
from engine.lake.sqltext import Kind, SqlTextError, tokens
from engine.lake.timetravel import TimeTravelError, find_travels, readable, rewrite

NAMES = sql_names(["Raw", "Staging", "raw-2024"])


def test_tokens_skip_comments_and_keep_literals_whole() -> None:
    sql = "SELECT 'a -- b', \"c /* d\", r'\\n' /* x /* nested */ y */ FROM `a``b` -- tail\nWHERE x"
    got = [(t.kind, t.text) for t in tokens(sql)]
    assert got == [
        (Kind.WORD, "SELECT"), (Kind.STRING, "'a -- b'"), (Kind.SYMBOL, ","),
        (Kind.STRING, '"c /* d"'), (Kind.SYMBOL, ","), (Kind.STRING, "r'\\n'"),
        (Kind.WORD, "FROM"), (Kind.QUOTED, "`a``b`"), (Kind.WORD, "WHERE"), (Kind.WORD, "x"),
    ]
    assert tokens(sql)[7].name == "a`b"
    assert tokens("'it\\'s'")[0].value == "it's"
    with pytest.raises(SqlTextError):
        tokens("SELECT 'open")


def test_references_and_their_rewrite() -> None:
    sql = (
        "SELECT n.seqno, Staging.key FROM Staging FOR VERSION AS OF 5 n "
        "JOIN staging_markers SYSTEM_VERSION AS OF '3' AS m ON true, "
        "`raw-2024` TIMESTAMP AS OF TIMESTAMP '2026-11-23 10:00:00' "
        "WHERE x IN (SELECT 1 FROM Raw VERSION AS OF 2) AND s = 'Raw VERSION AS OF 9' "
        "-- Raw VERSION AS OF 8\n"
    )
    travels = find_travels(sql, NAMES)
    assert [(t.pool, t.suffix, t.version, t.timestamp, t.aliased) for t in travels] == [
        ("Staging", "", 5, None, True),
        ("Staging", "_markers", 3, None, True),
        ("raw-2024", "", None, "TIMESTAMP '2026-11-23 10:00:00'", False),
        ("Raw", "", 2, None, False),
    ]
    names = ["v5", "v3_markers", "t", "v2"]
    assert rewrite(sql, travels, names) == (
        "SELECT n.seqno, Staging.key FROM `v5` n "
        "JOIN `v3_markers` AS m ON true, "
        "`t` AS `raw-2024` "
        "WHERE x IN (SELECT 1 FROM `v2` AS `Raw`) AND s = 'Raw VERSION AS OF 9' "
        "-- Raw VERSION AS OF 8\n"
    )


def test_a_reference_followed_by_a_clause_gets_its_own_name_as_alias() -> None:
    for tail in ("WHERE x", "JOIN y", "LEFT ANTI JOIN y", "ORDER BY 1", ")", ",", ""):
        travels = find_travels(f"SELECT * FROM Raw VERSION AS OF 1 {tail}", NAMES)
        assert not travels[0].aliased, tail


def test_qualified_names_are_left_to_spark() -> None:
    assert find_travels("SELECT * FROM delta.`/tmp/t` VERSION AS OF 1", NAMES) == []
    assert find_travels("SELECT * FROM db.Raw VERSION AS OF 1", NAMES) == []
    assert find_travels("SELECT version AS of FROM Raw", NAMES) == []


def test_bad_references() -> None:
    with pytest.raises(TimeTravelError, match=r"no pool 'Nope' to read VERSION AS OF \(pools: "
                                              r"Raw, Staging, raw-2024\)"):
        find_travels("SELECT * FROM Nope VERSION AS OF 1", NAMES)
    with pytest.raises(TimeTravelError, match="takes a version number"):
        find_travels("SELECT * FROM Raw VERSION AS OF x", NAMES)
    with pytest.raises(TimeTravelError, match="takes a timestamp literal"):
        find_travels("SELECT * FROM Raw TIMESTAMP AS OF now()", NAMES)


def test_internal_names_read_as_written() -> None:
    assert readable("cannot resolve `__zync_v3_raw_2024`.`x`") == (
        "cannot resolve raw_2024 VERSION AS OF 3.`x`"
    )
