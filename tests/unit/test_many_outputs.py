"""What one process of many outputs shares and refuses: one pool's type files read once
for all its pool objects, and more outputs than a process has Kafka clients for."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.deliver.deliveries import deliveries_of
from engine.deliver.delivery_options import MOST_OUTPUTS, DeliveryOptions
from engine.deliver.errors import DeliveryError
from engine.deliver.loop import DeliveryOutput
from engine.lake import topic_types
from engine.lake.pools import Lake
from engine.lake.topic_types import TopicTypes
from engine.settings.kafka import KafkaProfile


def test_more_outputs_than_a_process_holds_are_refused_before_any_starts(tmp_path: Path) -> None:
    outputs = [DeliveryOutput("Staging", f"clean.t{n:04}") for n in range(MOST_OUTPUTS + 1)]
    options = DeliveryOptions(kafka=KafkaProfile(bootstrap_servers="127.0.0.1:9"))
    with pytest.raises(DeliveryError, match=r"901 outputs in one process.*--output TOPIC"):
        deliveries_of(Lake(tmp_path), outputs, options)


def test_the_pool_objects_of_one_pool_read_its_type_files_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = Lake(tmp_path)
    pool = lake.create_pool("Raw", "raw")
    types = {f"db.t{n}": TopicTypes(None, '{"type": "string"}') for n in range(3)}
    index = pool.type_files.save(types)
    reads: list[str] = []
    read = topic_types.TypeFiles._read

    def counted(self: topic_types.TypeFiles, name: str) -> str:
        reads.append(name)
        return read(self, name)

    monkeypatch.setattr(topic_types.TypeFiles, "_read", counted)
    monkeypatch.setattr(topic_types.TypeFiles, "_shared", {})  # another process, say
    opened = [lake.open_pool("Raw") for _ in range(3)]
    assert len({id(p.type_files) for p in opened}) == 1
    for p in opened:
        assert p.type_files.load(index) == types
    assert sorted(reads) == sorted(
        [f"{index}.json", f"{topic_types._digest(next(iter(types.values())).value or '')}.json"]
    )
