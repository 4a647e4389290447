"""`zync from-kafka`'s commit line names each topic's lag, and sums a connector's hundreds."""

from __future__ import annotations

from engine.ingest.stats import lag_text


def test_a_few_topics_are_named_one_by_one() -> None:
    assert lag_text({"b": 0, "a": 1_200, "c": None}) == "a=1,200 b=0 c=?"


def test_hundreds_of_topics_are_summed_with_the_ones_behind_most() -> None:
    lags: dict[str, int | None] = {f"db.t{i:03d}": 0 for i in range(200)}
    assert lag_text(lags) == "0 over 200 topics"
    lags.update({"db.t007": 40, "db.t100": 3, "db.t150": 900, "db.t151": 2, "db.t199": None})
    assert lag_text(lags) == (
        "945 over 200 topics (1 unknown): db.t150=900 db.t007=40 db.t100=3 +1 more"
    )


def test_zync_run_s_commit_line_sums_them_too() -> None:
    """The from-kafka loop's commit event (what `zync run` and the console's log print)
    says the same: it used to name all of a connector's 200 topics on one line."""
    from engine.ingest.stats import CommitInfo, IngestStats, PartitionStats, PoolStats

    partitions = tuple(
        PartitionStats(f"db.t{i:03d}", 0, lake_offset=4, low=0, high=10) for i in range(200)
    )
    pool = PoolStats("Raw", tuple(p.topic for p in partitions), partitions=partitions)
    info = CommitInfo(
        "Raw", 2, 5, 0, 0, {}, 0.1, {}, (), IngestStats("running", pools=(pool,))
    )
    assert info.lag_text() == "1,000 over 200 topics: db.t199=5 db.t198=5 db.t197=5 +197 more"
