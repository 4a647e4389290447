"""Avro's building blocks shared by the per-record and batch codecs.

The primitive type names of an Avro schema, and Avro's binary encoding of a ``long``
(zig-zag, then a base-128 varint), which the batch decoder's container header and
to-kafka's direct encoder both write.
"""

from __future__ import annotations

#: The names of Avro's primitive types.
PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def zigzag_long(n: int) -> bytes:
    """``n`` as an Avro long: zig-zag, then a base-128 varint."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)

