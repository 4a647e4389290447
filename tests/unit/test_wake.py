"""In one process (`zync run`, the console), each loop wakes the next one when it
commits instead of leaving it to its next poll: from-kafka wakes the ETL, the ETL wakes
to-kafka (engine.services.pipeline). No broker or Spark: the pass is a stand-in, the
delivery is never run; what is checked is who is woken, and that a wake-up (or stop)
ends a delivery's wait between two polls of its pool."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from engine.deliver.delivery_options import DeliveryOptions
from engine.deliver.loop import Delivery
from engine.etl.config_file import load_config
from engine.lake.pools import Lake
from engine.services.deliver import ToKafkaService
from engine.services.etl import EtlService
from engine.settings.kafka import KafkaProfile

KAFKA = KafkaProfile(bootstrap_servers="127.0.0.1:1")
CONFIG = Path(__file__).resolve().parents[2] / "demo" / "invoices" / "etl.yaml"


class _Result:
    """What EtlService reads of a pass's result."""

    def __init__(self, committed: bool) -> None:
        self.committed = committed
        self.outputs = {"NewInvoices": 2} if committed else {}
        self.staging_version = 7 if committed else None
        self.consumed = {"Invoices": 2} if committed else {}
        self.pending: dict[str, int] = {}
        self.expired: dict[str, int] = {}
        self.expired_rules: dict[str, int] = {}
        self.seconds = 0.1

    def summary(self, style: str = "line") -> str:
        return f"stand-in pass ({style})"


class _Runner:
    def __init__(self, results: list[_Result]) -> None:
        self.results = results

    def run_pass(self) -> _Result:
        return self.results.pop(0)


def test_an_etl_commit_is_handed_on_and_a_pass_without_one_is_not(tmp_path: Path) -> None:
    handed: list[Any] = []
    service = EtlService(load_config(CONFIG), Lake(tmp_path), on_commit=handed.append)
    committed, idle = _Result(True), _Result(False)
    service._runner = _Runner([committed, idle])  # type: ignore[assignment]
    service.run_pass()
    service.run_pass()
    assert handed == [committed]
    assert service.status().commits == 1


def test_a_wake_up_ends_a_deliverys_wait_before_its_next_poll(tmp_path: Path) -> None:
    delivery = Delivery(
        Lake(tmp_path), "Staging", "NewInvoices", DeliveryOptions(kafka=KAFKA, format="json", poll_interval=600)
    )
    pausing = threading.Thread(target=delivery._pause, daemon=True)
    pausing.start()
    delivery.wake()
    pausing.join(30)  # woken: long before the 600 s poll interval
    assert not pausing.is_alive()


def test_to_kafka_wakes_every_delivery_on_a_commit_and_on_stop(tmp_path: Path) -> None:
    woken: list[str] = []

    class _Delivery:
        def __init__(self, topic: str) -> None:
            self.topic = topic

        def wake(self) -> None:
            woken.append(self.topic)

    service = ToKafkaService([], Lake(tmp_path), DeliveryOptions(kafka=KAFKA, format="json"))
    service._deliveries = [_Delivery("A"), _Delivery("B")]  # type: ignore[list-item]
    service.wake()
    assert woken == ["A", "B"]
    service.stop(timeout=5)  # never started: stop only wakes
    assert woken == ["A", "B", "A", "B"]
