"""A pass in words over a connector's hundreds of tables: counted, not listed."""

from __future__ import annotations

from engine.etl.result import PassResult


def _wide(tables: int) -> PassResult:
    topics = [f"db.inventory.t{i:03d}" for i in range(tables)]
    return PassResult(
        "width",
        committed=True,
        read_version=3,
        staging_version=4,
        consumed={t: 3 for t in topics},
        processed={t: 3 for t in topics},
        outputs={f"clean.{t}": 3 for t in topics},
        offsets={f"clean.{t}": (5, 7) for t in topics},
        moved={(t, 0): 7 for t in topics},
        seconds=0.25,
    )


def test_one_line_counts_the_outputs_of_many_topics() -> None:
    assert _wide(200).summary("line") == (
        "pass: 600 consumed, out 600 record(s) to 200 topics; staging v4 (0.25s)"
    )
    few = _wide(2).summary("line")
    assert "out clean.db.inventory.t000 +3 (offsets 5..7), clean.db.inventory.t001 +3" in few


def test_the_lines_show_twenty_of_each_and_count_the_rest() -> None:
    lines = _wide(200).summary().splitlines()
    assert lines[0] == "width: one pass in 0.25s"
    assert sum(line.startswith("  in  ") for line in lines) == 20
    assert "  … and 180 more input topic(s) (--json lists them all)" in lines
    assert "  … and 180 more output topic(s) (--json lists them all)" in lines
    assert "  … and 180 more cursor(s) (--json lists them all)" in lines
    assert len(lines) < 70
    assert len(_wide(3).summary().splitlines()) == 1 + 3 + 3 + 3 + 1


def test_a_slow_pass_says_its_longest_phases() -> None:
    slow = _wide(200)
    slow.seconds = 12.11
    slow.timings.seconds.update({"check": 9.06, "evaluate": 1.52, "commit": 0.4})
    assert slow.summary("line").endswith("staging v4 (12.11s; check 9.1s, evaluate 1.5s)")
    assert _wide(200).summary("line").endswith("(0.25s)")  # a quick one: just its time
