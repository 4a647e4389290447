"""The staging feed (engine/deliver/feed.py): one look at the pool's version for the
deliveries that ask at once, a look that began after each asked, and a commit's records
split by topic in their order."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa

from engine.deliver.feed import StagingFeed, _split


class _SlowPool:
    """A pool whose every look at the log takes a while and finds a newer version."""

    name = "S"

    def __init__(self) -> None:
        self.looks = 0
        self.version = 0

    def refresh(self) -> int:
        self.looks += 1
        time.sleep(0.2)
        self.version += 1
        return self.version


def test_deliveries_asking_at_once_share_one_look() -> None:
    pool = _SlowPool()
    feed = StagingFeed(["a"], pool=pool)  # type: ignore[arg-type]
    seen: list[int] = []
    threads = [threading.Thread(target=lambda: seen.append(feed.version())) for _ in range(20)]
    first = threading.Thread(target=lambda: seen.append(feed.version()))
    first.start()
    time.sleep(0.05)  # the first look runs: the others ask meanwhile, and wait
    for t in threads:
        t.start()
    for t in [first, *threads]:
        t.join(10)
    # the ones that asked during the first look get a second one, which they share
    assert pool.looks == 2
    assert seen == [1] + [2] * 20


def test_a_caller_gets_a_look_that_began_after_it_asked_unless_a_recent_one_will_do() -> None:
    pool = _SlowPool()
    feed = StagingFeed(["a"], pool=pool)  # type: ignore[arg-type]
    assert feed.version() == 1
    assert feed.version() == 2  # asked after the first look ended: a new look
    assert pool.looks == 2
    assert feed.version(max_age=60) == 2  # polling: a recent look will do
    assert pool.looks == 2


def test_split_keeps_each_topics_rows_in_order_and_drops_rows_without_topic() -> None:
    table = pa.table(
        {
            "topic": ["b", "a", "b", None, "c", "a", "b"],
            "offset": [0, 0, 1, 9, 0, 1, 2],
        }
    )
    got: dict[str, Any] = {
        t: r.column("offset").to_pylist() for t, r in _split(table, ["a", "b", "c"]).items()
    }
    assert got == {"a": [0, 1], "b": [0, 1, 2], "c": [0]}
    assert _split(table.slice(0, 0), ["a", "b"]) == {}
    one = _split(table.slice(0, 1), ["b"])
    assert one["b"].column_names == ["offset"]


def test_split_of_a_table_read_in_several_batches() -> None:
    table = pa.concat_tables(
        [
            pa.table({"topic": ["b", "a"], "offset": [0, 0]}),
            pa.table({"topic": ["c", "a", "b"], "offset": [0, 1, 1]}),
            pa.table({"topic": ["d"], "offset": [0]}),
        ]
    )
    got = {t: r.column("offset").to_pylist() for t, r in _split(table, list("abcd")).items()}
    assert got == {"a": [0, 1], "b": [0, 1], "c": [0], "d": [0]}
