"""Which format a Kafka key or value is in, guessed from its bytes: the one sniffer.

* the Confluent magic byte ``0`` first → Avro (a message too short for the 5-byte header
  is a truncated Avro record, which the Avro decoder reports as such);
* a JSON object naming both ``"schema"`` and ``"payload"`` → Kafka Connect JSON (a guess
  from the bytes: the Connect decoder checks the envelope is exactly those two fields);
* anything else → plain JSON.

:func:`sniff` looks at one record; :func:`sniff_batch` takes the format most of a
batch's first records look like, for a topic whose format is decided once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from engine.kafka.codecs.formats import Format

#: How many records :func:`sniff_batch` looks at, at most.
SAMPLE = 200


def sniff(data: bytes | None) -> Format | None:
    """The format ``data`` looks like; None for a tombstone or empty bytes."""
    if not data:
        return None
    if data[0] == 0:
        return Format.AVRO
    if data.lstrip()[:1] == b"{" and b'"payload"' in data and b'"schema"' in data:
        return Format.CONNECT_JSON
    return Format.JSON


def sniff_batch(datas: Iterable[bytes | None]) -> Format | None:
    """The format most of the first :data:`SAMPLE` records look like (None: only
    tombstones or empty records seen)."""
    votes: Counter[Format] = Counter()
    for data in datas:
        fmt = sniff(data)
        if fmt is None:
            continue
        votes[fmt] += 1
        if sum(votes.values()) >= SAMPLE:
            break
    return votes.most_common(1)[0][0] if votes else None
