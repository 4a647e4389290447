"""engine.kafka.codecs.detect: the one format sniffer."""

from __future__ import annotations

import pytest

from engine.kafka.codecs.detect import SAMPLE, sniff, sniff_batch
from engine.kafka.codecs.formats import Format


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, None),
        (b"", None),
        (b"\x00\x00\x00\x00\x01\x02", Format.AVRO),
        (b"\x00\x01", Format.AVRO),  # too short: a truncated Avro record
        (b'{"schema": null, "payload": 1}', Format.CONNECT_JSON),
        (b'  {"payload": 1, "schema": null}', Format.CONNECT_JSON),
        (b'{"payload": 1}', Format.JSON),
        (b'["schema", "payload"]', Format.JSON),
        (b"42", Format.JSON),
        (b"not json", Format.JSON),
    ],
)
def test_one_record(data: bytes | None, expected: Format | None) -> None:
    assert sniff(data) is expected


def test_a_batch_takes_the_majority_of_its_first_records() -> None:
    avro = b"\x00\x00\x00\x00\x01\x02"
    assert sniff_batch([None, b"", avro, b"{}", avro]) is Format.AVRO
    assert sniff_batch([None, b""]) is None
    assert sniff_batch([b"{}"] * SAMPLE + [avro] * (SAMPLE + 1)) is Format.JSON
