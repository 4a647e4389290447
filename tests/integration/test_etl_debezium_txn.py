"""Source transactions whole or not at all, from Debezium's transaction metadata:
three interleaved transactions over two tables; no output of a transaction appears
before its END event and all of its events (across topics and partitions) are in."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.etl.config_file import parse_config
from engine.etl.run import EtlRunner
from tests.integration.test_etl_support import append_events, make_pools, markers, outputs

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ORDERS = "shop.public.orders"
LINES = "shop.public.order_lines"
TX = "shop.transaction"

CONFIG = f"""\
name: shop-transactions
inputs:
  - {{topic: {ORDERS}, pool: Raw}}
  - {{topic: {LINES}, pool: Raw}}
  - {{topic: {TX}, pool: Raw}}
outputs:
  - {{topic: OrderChanges, pool: Staging}}
transforms:
  - type: txn
    name: source-transaction
    in: [{ORDERS}, {LINES}]
    complete-when: debezium
    transaction-topic: {TX}
    expire-after: 1h
    out: OrderChanges
    sql: |
      SELECT inline(transform(bundle.records, r -> named_struct(
               'key', named_struct('txn', bundle.txn_id,
                                   'order', r.value.transaction.total_order),
               'value', named_struct('table', r.kafka.topic, 'row', r.value.after))))
"""

T0 = 1_714_557_600_000
_clock = iter(range(10_000))


def _ts() -> int:
    return T0 + next(_clock) * 1000


def begin(txn: str) -> dict:
    return {
        "topic": TX,
        "key": {"id": txn},
        "value": {"status": "BEGIN", "id": txn, "ts_ms": _ts(), "event_count": None, "data_collections": None},
    }


def end(txn: str, **counts: int) -> dict:
    collections = [{"data_collection": f"public.{table}", "event_count": n} for table, n in counts.items()]
    return {
        "topic": TX,
        "key": {"id": txn},
        "value": {
            "status": "END",
            "id": txn,
            "ts_ms": _ts(),
            "event_count": sum(counts.values()),
            "data_collections": collections,
        },
    }


def change(topic: str, txn: str, total_order: int, row: dict, partition: int = 0) -> dict:
    return {
        "topic": topic,
        "partition": partition,
        "key": {"id": row["id"]},
        "value": {
            "before": None,
            "after": row,
            "op": "c",
            "ts_ms": _ts(),
            "source": {"schema": "public", "table": topic.rsplit(".", 1)[1]},
            "transaction": {"id": txn, "total_order": total_order, "data_collection_order": total_order},
        },
    }


def _txns_out(spark, lake) -> Counter:
    return Counter(key["txn"] for _, _, key, _ in outputs(spark, lake))


@pytest.mark.parametrize("writer", ["driver", "executors"])
def test_interleaved_transactions_complete_whole(
    spark, lake, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twice: outputs brought to the driver (a small pass), and written by the
    executors with the bundles cached once (what a large pass does)."""
    import engine.etl.evaluate

    if writer == "executors":
        monkeypatch.setattr(engine.etl.evaluate, "DRIVER_OUTPUT_ROWS", -1)
    raw, _ = make_pools(lake)
    runner = EtlRunner(parse_config(CONFIG, source="shop.yaml"), lake, spark)

    # tx1: 1 order + 2 lines; tx2: 1 order + 1 line; tx3: 2 lines (no order)
    append_events(
        raw,
        [
            begin("tx1"),
            change(ORDERS, "tx1", 1, {"id": 1, "customer": "Ann"}),
            begin("tx2"),
            change(ORDERS, "tx2", 1, {"id": 2, "customer": "Bob"}),
            change(LINES, "tx1", 2, {"id": 10, "order_id": 1, "product": "tea"}),
            begin("tx3"),
            change(LINES, "tx2", 2, {"id": 20, "order_id": 2, "product": "cake"}),
        ],
    )
    first = runner.run_pass()
    assert first.outputs == {}  # no END yet: nothing is complete
    assert sum(first.pending.values()) == 7

    # tx2 ends with all its events in; tx1 ends but one of its lines is still missing
    append_events(
        raw,
        [
            end("tx2", orders=1, order_lines=1),
            change(LINES, "tx3", 1, {"id": 30, "order_id": 1, "product": "jam"}),
            end("tx1", orders=1, order_lines=2),
        ],
    )
    second = runner.run_pass()
    assert _txns_out(spark, lake) == Counter({"tx2": 2})

    # tx1's last line arrives; tx3 ends but its second line is still missing
    append_events(
        raw,
        [
            change(LINES, "tx1", 3, {"id": 11, "order_id": 1, "product": "milk"}),
            end("tx3", order_lines=2),
        ],
    )
    runner.run_pass()
    assert _txns_out(spark, lake) == Counter({"tx2": 2, "tx1": 3})

    # tx3's second line arrives on another partition of the lines topic
    append_events(raw, [change(LINES, "tx3", 2, {"id": 31, "order_id": 1, "product": "bread"}, partition=1)])
    last = runner.run_pass()
    assert last.outputs == {"OrderChanges": 2}
    assert last.pending == {}

    rows = outputs(spark, lake)
    assert [offset for _, offset, _, _ in rows] == list(range(7))
    # each transaction's outputs are contiguous, in seqno order within the transaction
    assert [(key["txn"], key["order"]) for _, _, key, _ in rows] == [
        ("tx2", 1), ("tx2", 2), ("tx1", 1), ("tx1", 2), ("tx1", 3), ("tx3", 1), ("tx3", 2),
    ]
    assert rows[0][3] == {"table": ORDERS, "row": {"id": 2, "customer": "Bob", "order_id": None, "product": None}}
    # every input (BEGIN/END and changes, both partitions) is marked processed
    done = markers(spark, lake)
    assert len(done) == 13
    assert {status for *_, status in done} == {"processed"}
    assert ("shop.public.order_lines", 1, 0, "source-transaction", "processed") in done
    assert second.cursors.get((TX, 0)) is None  # BEGIN tx1 (offset 0) waited until pass 3
    assert last.cursors[(TX, 0)] == 5
    assert last.cursors[(LINES, 1)] == 0
    assert runner.run_pass().nothing_new
