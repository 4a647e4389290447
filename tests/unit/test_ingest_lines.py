"""`zync from-kafka`'s commit line names each topic's lag, and sums a connector's hundreds."""

from __future__ import annotations

from zync_tui.commands.ingest import _lag_text


def test_a_few_topics_are_named_one_by_one() -> None:
    assert _lag_text({"b": 0, "a": 1_200, "c": None}) == "a=1,200 b=0 c=?"


def test_hundreds_of_topics_are_summed_with_the_ones_behind_most() -> None:
    lags: dict[str, int | None] = {f"db.t{i:03d}": 0 for i in range(200)}
    assert _lag_text(lags) == "0 over 200 topics"
    lags.update({"db.t007": 40, "db.t100": 3, "db.t150": 900, "db.t151": 2, "db.t199": None})
    assert _lag_text(lags) == (
        "945 over 200 topics (1 unknown): db.t150=900 db.t007=40 db.t100=3 +1 more"
    )
