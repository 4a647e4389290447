"""Whose topic it is and where delivery stands, without a broker: the claim, the
committed position and the tail judged together (engine.deliver.ownership, the rules
of docs/design.md#exactly-once-to-kafka), the committed position's metadata, and the
ledger's standing after a transaction. The broker's side (retention, compaction, a
recreated topic, an expired position) is tests/integration/test_delivery_positions.py."""

from __future__ import annotations

import pytest

from engine.deliver.claims import Claim
from engine.deliver.committed import Committed
from engine.deliver.ledger import Ledger
from engine.deliver.ownership import (
    ForeignTopic,
    Ownership,
    PositionLost,
    RecreatedTopic,
    Seen,
    later,
)
from engine.deliver.positions import LAST_STEP, PoolIdentity, Position, Tail
from engine.deliver.rows import Batch

IDENTITY = PoolIdentity("table-1", "Staging")
TOPIC_ID = "topic-A"


def _owner(
    take_over: bool = False, staged_last: int | None = 100, compacted: bool = False
) -> Ownership:
    return Ownership(
        IDENTITY,
        "T",
        take_over=take_over,
        staged_last=lambda: staged_last,
        compacted=lambda: compacted,
    )


def _ours(offset: int, step: int = 0, **more: object) -> Position:
    return Position(offset, step, pool_id="table-1", pool_name="Staging", **more)  # type: ignore[arg-type]


def _committed(position: Position | None, pool: str = "table-1", topic: str = TOPIC_ID) -> Committed:
    return Committed(position, pool, "Staging" if pool == "table-1" else "Old", topic, 40)


def _seen(
    tail: dict[int, Position | None],
    *,
    claim: Claim | None = None,
    committed: dict[int, Committed | None] | None = None,
    marks: dict[int, tuple[int, int]] | None = None,
    topic_id: str | None = TOPIC_ID,
) -> Seen:
    marks = marks or dict.fromkeys(tail, (0, 50))
    return Seen(topic_id, claim, committed or dict.fromkeys(tail), Tail(dict(tail), marks))


OUR_CLAIM = Claim(TOPIC_ID, "table-1", "Staging")


# -- rule 4: no claim, no committed position (a new topic, an upgrade) -----------------


def test_our_positions_pass_and_a_foreign_tail_stops_delivery() -> None:
    ours = _ours(5, timestamp=1000)
    theirs = Position(900, pool_id="table-0", pool_name="Old", timestamp=2000)
    standing = _owner().judge(_seen({0: ours, 1: None}))
    assert standing.positions == {0: ours, 1: None}
    assert standing.commit  # an upgrade: committed at once, with the claim
    assert not standing.claimed
    with pytest.raises(ForeignTopic) as raised:
        _owner().judge(_seen({0: ours, 1: theirs}))
    text = str(raised.value)
    assert "'Old' (table id table-0)" in text
    assert "'Staging' (table id table-1)" in text
    assert "--take-over-topic" in text
    assert "\n" not in text
    standing = _owner(take_over=True).judge(_seen({0: ours, 1: theirs}))
    assert standing.positions == {0: ours, 1: None}
    assert "taking the topic over" in standing.notes[0]


def test_a_new_topic_commits_nothing_until_it_delivers() -> None:
    standing = _owner().judge(_seen({0: None, 1: None}, marks={0: (0, 0), 1: (0, 0)}))
    assert standing.positions == {0: None, 1: None}
    assert not standing.commit
    assert standing.ends == {0: 0, 1: 0}


def test_a_foreign_position_older_than_ours_was_taken_over_before() -> None:
    ours = _ours(5, timestamp=3000)
    theirs = Position(900, pool_id="table-0", pool_name="Old", timestamp=2000)
    assert _owner().judge(_seen({0: ours, 1: theirs})).positions == {0: ours, 1: None}


def test_positions_without_identity_are_ours_unless_beyond_what_the_pool_staged() -> None:
    old = Position(50)
    standing = _owner().judge(_seen({0: old}))
    assert standing.positions == {0: old}
    assert "names no staging pool" in standing.notes[0]
    with pytest.raises(ForeignTopic, match="a zync that did not name its pool"):
        _owner(staged_last=10).judge(_seen({0: old}))
    assert _owner(take_over=True, staged_last=None).judge(_seen({0: old})).positions == {0: None}


# -- rule 1: the claim -----------------------------------------------------------------


def test_a_claim_on_another_topic_id_is_a_recreated_topic() -> None:
    seen = _seen({0: None}, claim=Claim("topic-OLD", "table-1", "Staging"), marks={0: (0, 0)})
    with pytest.raises(RecreatedTopic) as raised:
        _owner().judge(seen)
    text = str(raised.value)
    assert "topic 'T' was deleted and created again" in text
    assert "topic id topic-OLD, now topic-A" in text
    assert "--take-over-topic" in text
    assert "\n" not in text
    standing = _owner(take_over=True).judge(seen)
    assert standing.positions == {0: None}
    assert standing.commit  # the claim is rewritten at once: the take-over holds
    assert not standing.claimed


def test_a_claim_by_another_pool_stops_delivery_whatever_the_tail_says() -> None:
    claim = Claim(TOPIC_ID, "table-0", "Old")
    with pytest.raises(ForeignTopic, match="last written by staging pool 'Old'"):
        _owner().judge(_seen({0: _ours(7)}, claim=claim))
    standing = _owner(take_over=True).judge(_seen({0: _ours(7)}, claim=claim))
    assert standing.positions == {0: None}


def test_committed_positions_of_another_incarnation_or_pool_stop_delivery_without_a_claim() -> None:
    other_topic = {0: _committed(_ours(3), topic="topic-OLD")}
    with pytest.raises(RecreatedTopic):
        _owner().judge(_seen({0: None}, committed=other_topic))
    other_pool = {0: _committed(Position(3), pool="table-0")}
    with pytest.raises(ForeignTopic, match=r"'Old' \(table id table-0\) \(partition 0\)"):
        _owner().judge(_seen({0: None}, committed=other_pool))


# -- rule 2: the committed position is the stronger ------------------------------------


def test_the_committed_position_wins_over_a_tail_behind_it() -> None:
    committed = {0: _committed(_ours(90, LAST_STEP)), 1: _committed(_ours(90, LAST_STEP))}
    # retention emptied partition 1; compaction left partition 0's tail behind
    seen = _seen({0: _ours(60), 1: None}, claim=OUR_CLAIM, committed=committed)
    standing = _owner().judge(seen)
    assert standing.positions == {0: _ours(90, LAST_STEP), 1: _ours(90, LAST_STEP)}
    assert standing.claimed
    assert not standing.commit
    assert standing.ends == {0: 40, 1: 40}  # the committed Kafka offsets


def test_a_tail_ahead_of_the_committed_position_counts_and_is_committed() -> None:
    committed = {0: _committed(_ours(10, LAST_STEP))}
    newer = _ours(12, after=3)  # delivered by a zync older than committed positions
    standing = _owner().judge(_seen({0: newer}, claim=OUR_CLAIM, committed=committed))
    assert standing.positions == {0: newer}
    assert standing.positions[0] is not None
    assert standing.positions[0].after == 3
    assert standing.commit


def test_a_missing_claim_is_written_at_once() -> None:
    committed = {0: _committed(_ours(10, LAST_STEP))}
    standing = _owner().judge(_seen({0: None}, committed=committed))
    assert standing.positions == {0: _ours(10, LAST_STEP)}
    assert not standing.claimed
    assert standing.commit


def test_later_goes_by_offset_then_step() -> None:
    assert later(None, _ours(1)) == _ours(1)
    assert later(_ours(3, 1), _ours(3, 0)) == _ours(3, 1)
    assert later(_ours(3, 0), _ours(4, 0)) == _ours(4, 0)


# -- rule 3: the committed position expired --------------------------------------------


def test_an_expired_position_is_stood_in_for_by_a_tail_that_cannot_be_behind() -> None:
    tail = {0: _ours(30, at=48), 1: None, 2: None}
    marks = {0: (0, 50), 1: (0, 7), 2: (0, 0)}  # 1: only records of others, none removed
    standing = _owner().judge(_seen(tail, claim=OUR_CLAIM, marks=marks))
    assert standing.positions == {0: _ours(30), 1: None, 2: None}
    assert standing.commit
    assert "expired" in standing.notes[0]


def test_an_expired_position_stops_delivery_where_records_were_removed() -> None:
    marks = {0: (0, 50), 1: (20, 20)}  # retention emptied partition 1
    seen = _seen({0: _ours(30, at=48), 1: None}, claim=OUR_CLAIM, marks=marks)
    with pytest.raises(PositionLost) as raised:
        _owner().judge(seen)
    text = str(raised.value)
    assert "partition(s) 1 no longer show" in text
    assert "offsets.retention.minutes" in text
    assert "\n" not in text
    assert _owner(take_over=True).judge(seen).positions == {0: None, 1: None}


def test_on_a_compacted_topic_an_expired_position_needs_the_tail_to_end_the_partition() -> None:
    ends_there = _seen({0: _ours(30, at=48)}, claim=OUR_CLAIM, marks={0: (0, 50)})
    assert _owner(compacted=True).judge(ends_there).positions == {0: _ours(30)}
    # records after it (a tombstone, compacted away?), or a partition that held records
    for seen in (
        _seen({0: _ours(30, at=40)}, claim=OUR_CLAIM, marks={0: (0, 50)}),
        _seen({0: None}, claim=OUR_CLAIM, marks={0: (0, 9)}),
    ):
        with pytest.raises(PositionLost):
            _owner(compacted=True).judge(seen)


# -- what is committed -----------------------------------------------------------------


def test_committed_metadata_round_trips_and_stays_small() -> None:
    position = Position(123_456, 2, 77, after=5, lower=70)
    entry = Committed(position, "a" * 36, "Staging", "IaquOgJnTSyu9JvwlCrgOA", 9)
    back = Committed.parse(entry.metadata(), 9)
    assert back is not None
    assert back.position is not None
    parsed = back.position
    assert (parsed.offset, parsed.step, parsed.time, parsed.after, parsed.lower) == (
        123_456, 2, 77, 5, 70,
    )
    assert (back.pool_id, back.pool_name, back.topic_id) == ("a" * 36, "Staging", entry.topic_id)
    assert len(entry.metadata()) < 200  # the broker takes up to 4 KB
    nothing = Committed.parse(Committed(None, "p", "S", None, 0).metadata(), 0)
    assert nothing is not None
    assert nothing.position is None
    assert Committed.parse("someone else's", 3) is None
    assert Committed.parse(None, 3) is None


def test_claims_round_trip() -> None:
    claim = Claim.of(IDENTITY, TOPIC_ID)
    assert Claim.parse(claim.value()) == claim
    assert Claim.parse(b"not json") is None


def test_after_a_transaction_every_partition_stands_at_its_last_offset() -> None:
    ledger = Ledger([0, 1, 2], counts_after=True)
    ledger.take({0: Position(4), 1: Position(2, after=2), 2: None})
    batch = Batch([5, 6, 8], [None] * 3, [None] * 3, partitions=[0, 1, 0])
    standing = ledger.standing(batch, 9)
    assert standing == {0: (9, LAST_STEP), 1: (9, LAST_STEP), 2: (9, LAST_STEP)}
    assert ledger.last == {0: (4, 0), 1: (2, 0)}  # unchanged until it is committed
    ledger.note(batch, 9)
    assert ledger.last == standing
    assert ledger.after == {1: 2}  # the records counted after partition 1's anchor
    assert ledger.delivered(2, 9, 1)
    assert not ledger.delivered(2, 10, 0)
