"""to-kafka's ledger and the jdbc envelope's anchors across several partitions."""

from __future__ import annotations

import random
from typing import Any

from engine.deliver.envelopes.jdbc import _anchors
from engine.deliver.ledger import Ledger
from engine.deliver.positions import ANCHOR_EVERY, Position


def test_partitions_of_is_partition_of_for_every_record() -> None:
    ledger = Ledger([0, 1, 2], counts_after=True)
    keys = [None if i % 7 == 0 else f'{{"ID":{i}}}' for i in range(500)]
    offsets = list(range(1000, 1500))
    assert ledger.partitions_of(keys, offsets) == [
        ledger.partition_of(k, o) for k, o in zip(keys, offsets, strict=True)
    ]
    assert Ledger([4], counts_after=True).partitions_of(keys[:3], offsets[:3]) == [4, 4, 4]


def test_claims_none_only_past_every_position_and_count() -> None:
    ledger = Ledger([0, 1, 2], counts_after=True)
    assert ledger.claims_none_from(0)
    ledger.take({0: Position(offset=10), 1: Position(offset=14), 2: None})
    assert not ledger.claims_none_from(14)
    assert ledger.claims_none_from(15)
    ledger.take({0: Position(offset=10, after=2), 1: None, 2: None})
    assert not ledger.claims_none_from(100)  # two records after the anchor still to claim
    assert ledger.claim(0, 11)
    assert ledger.claim(0, 12)
    assert ledger.claims_none_from(13)


def test_partitions_of_texts_is_partitions_of() -> None:
    import pyarrow as pa

    ledger = Ledger([0, 1, 2], counts_after=True)
    texts = [f'{{"ID":{i * 7919}, "n":"é{i}"}}' for i in range(500)]
    offsets = list(range(500))
    expected = ledger.partitions_of(texts, offsets)
    assert ledger.partitions_of_texts(pa.chunked_array([texts]), offsets) == expected
    with_null = [*texts[:10], None, *texts[11:]]
    assert ledger.partitions_of_texts(pa.chunked_array([with_null]), offsets) == (
        ledger.partitions_of(with_null, offsets)
    )


def test_anchors_are_every_thousandth_and_the_last_of_each_partition() -> None:
    rng = random.Random(3)
    partitions = [rng.choice([0, 1, 1, 2, 2, 2]) for _ in range(5_000)]
    partitions += [3] * 10  # a dense partition: every message is an anchor
    anchors, lasts = _anchors(partitions)
    seen: dict[int, int] = {}
    sizes = {p: partitions.count(p) for p in set(partitions)}
    last_of = {p: i for i, p in enumerate(partitions)}
    for i, p in enumerate(partitions):  # the rule as written before, message by message
        n = seen.get(p, 0)
        seen[p] = n + 1
        last = last_of[p] == i
        expected = n % ANCHOR_EVERY == 0 or last or sizes[p] <= ANCHOR_EVERY
        assert (i in anchors) == expected, i
        assert (i in lasts) == last, i


def test_partitioned_writes_go_in_batch_order_with_headers_on_the_anchors() -> None:
    from engine.deliver.envelopes.jdbc import _write_partitioned
    from engine.deliver.rows import Batch

    written: list[tuple[bytes | None, int, dict[str, Any] | None]] = []

    class Out:
        topic = "T"

        class producer:  # stands for a confluent_kafka Producer
            @staticmethod
            def produce(topic: str, value: bytes | None, key: bytes | None, *, partition: int) -> None:
                written.append((value, partition, None))

        @staticmethod
        def send(value: bytes | None, key: bytes | None, partition: int, headers: Any) -> None:
            written.append((value, partition, headers))

    rng = random.Random(5)
    partitions = [rng.choice([0, 1, 2, 2]) for _ in range(4_000)]
    values = [b"%d" % i for i in range(4_000)]
    batch = Batch(list(range(100, 4_100)), [None] * 4_000, list(values), partitions=partitions)
    _write_partitioned(batch, Out(), {"zync.pool.id": b"x"})  # type: ignore[arg-type]
    assert [(v, p) for v, p, _ in written] == list(zip(values, partitions, strict=True))
    anchors, lasts = _anchors(partitions)
    assert [i for i, (_, _, h) in enumerate(written) if h is not None] == anchors
    for i in anchors:
        headers = written[i][2]
        assert headers is not None
        assert headers["zync.offset"] == b"%d" % (100 + i)
        assert ("zync.last" in headers) == (i in lasts)
