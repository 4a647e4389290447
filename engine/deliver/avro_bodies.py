"""Avro bodies cut out of a container: the record encodings polars writes, one by one.

polars writes a batch as an Avro object container; every record is made to start with a
marker field (16 fixed bytes, then the wire header), so splitting the container's blocks
on the marker leaves wire header + body for each record (a record's encoding is the
concatenation of its fields').
"""

from __future__ import annotations

from engine.kafka.codecs.avro_binary import zigzag_long

MARKER = bytes.fromhex("a75a1903fe8871019c11ee5302d06b7f")
MARKER_FIELD = "__zync_split"


def read_long(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The Avro long (zigzag varint) at ``pos`` and the position after it."""
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def marker_field(header: bytes) -> tuple[bytes, bytes]:
    """The value of the marker field (16 marker bytes, then ``header``) and the bytes
    that start every record in the container: its encoding as a ``["null", "bytes"]``
    field (branch 1, length, bytes) without the trailing ``header``. Splitting a block
    on them leaves ``header`` + body for each record."""
    value = MARKER + header
    return value, b"\x02" + zigzag_long(len(value)) + MARKER


def container_bodies(data: bytes, count: int, pattern: bytes) -> list[bytes] | None:
    """What follows ``pattern`` in each record of an uncompressed Avro container whose
    records all start with it, or None when the split does not give ``count`` parts."""
    view = memoryview(data)
    if bytes(view[:4]) != b"Obj\x01":
        return None
    pos = 4
    while True:  # the metadata map
        n, pos = read_long(view, pos)
        if n == 0:
            break
        if n < 0:
            _, pos = read_long(view, pos)
            n = -n
        for _ in range(n):
            size, pos = read_long(view, pos)
            pos += size
            size, pos = read_long(view, pos)
            pos += size
    pos += 16  # sync marker
    bodies: list[bytes] = []
    while pos < len(data):
        records, pos = read_long(view, pos)
        size, pos = read_long(view, pos)
        block = data[pos : pos + size]
        pos += size + 16
        parts = block.split(pattern)
        if parts[0] != b"" or len(parts) != records + 1:
            return None
        del parts[0]
        bodies.extend(parts)
    return bodies if len(bodies) == count else None
