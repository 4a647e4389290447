"""Plain JSON record values: UTF-8 JSON text, no schema.

Only standard JSON is accepted: ``NaN``/``Infinity`` (which Python's :mod:`json` would
take) are refused, so every decoded value can be written back as valid JSON text.

A record's JSON text is :func:`dumps` of its value as :mod:`json` reads it: compact,
non-ASCII kept, the last of duplicate keys. :func:`decode_batch` makes the same text for
a batch, ~5x faster, with orjson: a record orjson cannot read, or whose text holds a
number orjson writes differently from :mod:`json` (an exponent — which is also how it
writes an integer beyond 64 bits, read as a float — or a fraction below 1e-4), is left
to :func:`decode` and :func:`dumps`. Everything else orjson writes byte for byte as
:mod:`json` does (tests/unit/test_plain_json.py compares them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from engine.kafka.codecs.errors import DecodeError

if TYPE_CHECKING:
    import pyarrow as pa

_COMPACT = (",", ":")

#: Numbers orjson writes otherwise than :mod:`json` (see the module's docstring); also
#: found inside strings, which only sends those records the slow way.
_OTHER_NUMBERS = re.compile(rb"\de[+-]|(?:^|[:,\[])-?0\.0000")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def decode(data: bytes) -> Any:
    """Parse a message's bytes as UTF-8 JSON.

    Raises :class:`DecodeError` with kind ``bad-json`` when the bytes are not UTF-8 or
    not one JSON value.
    """
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError("bad-json", f"not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise DecodeError("bad-json", f"not JSON: {exc}") from exc


def dumps(value: Any) -> str:
    """Compact JSON text of a JSON-able value (non-ASCII kept as is)."""
    return json.dumps(value, separators=_COMPACT, ensure_ascii=False, allow_nan=False)


def decode_json(data: bytes) -> str:
    """The message as compact JSON text (validated and re-serialized)."""
    return dumps(decode(data))


def encode(value: Any) -> bytes:
    """A JSON-able value as compact UTF-8 JSON bytes.

    Raises ``ValueError``/``TypeError`` for values JSON cannot hold (NaN, sets, ...).
    """
    return dumps(value).encode("utf-8")


@dataclass
class JsonBatch:
    """A batch decoded by :func:`decode_batch`: per record its JSON text (an Arrow string
    array, NULL for tombstones and for the records in ``errors``), why a record could not
    be decoded, by index, and the decoded values of the sampled records, in batch order."""

    texts: pa.Array
    errors: dict[int, DecodeError] = field(default_factory=dict)
    samples: list[Any] = field(default_factory=list)


def decode_batch(
    datas: Sequence[bytes | None], sample_every: int, *, text_keys: bool = False
) -> JsonBatch:
    """The JSON texts of a batch's records, those :func:`dumps` writes for their values
    (see the module's docstring), and the values of the records at indexes
    ``k * sample_every``. ``text_keys``: a record that is not JSON but UTF-8 text (a
    plain-text key) is kept as a JSON string."""
    import pyarrow as pa  # deferred: the batch decoder alone needs Arrow

    out: list[bytes | None] = [None] * len(datas)
    others: list[int] = []  # left to decode() and dumps()
    sampled: list[tuple[int, Any]] = []
    loads, write, error = orjson.loads, orjson.dumps, orjson.JSONDecodeError
    for i, data in enumerate(datas):
        if data is None:
            continue
        try:
            value = loads(data)
            out[i] = write(value)
        except (error, orjson.JSONEncodeError):  # not JSON, or nested too deep for orjson
            others.append(i)
            continue
        if i % sample_every == 0:
            sampled.append((i, value))
    texts = pa.array(out, pa.string())
    written_otherwise = [i for i in _suspects(texts) if _OTHER_NUMBERS.search(out[i] or b"")]
    if written_otherwise:
        for i in written_otherwise:
            out[i] = None
        again = set(written_otherwise)
        sampled = [(i, value) for i, value in sampled if i not in again]
        others.extend(written_otherwise)
    batch = JsonBatch(texts)
    for i in others:
        data = datas[i]
        assert data is not None
        try:
            value, out[i] = _decode_one(data, text_keys)
        except DecodeError as exc:
            batch.errors[i] = exc
            continue
        if i % sample_every == 0:
            sampled.append((i, value))
    if others:
        batch.texts = pa.array(out, pa.string())
        sampled.sort(key=lambda sample: sample[0])
    batch.samples = [value for _, value in sampled]
    return batch


def _suspects(texts: pa.Array) -> list[int]:
    """The texts that may hold a number orjson writes otherwise (a quick search for
    ``e+``, ``e-`` and ``0.0000``, by polars, without the interpreter lock)."""
    import polars as pl  # deferred: slow to import

    found = pl.Series(values=texts).str.contains_any(["e+", "e-", "0.0000"]).fill_null(False)
    suspects: list[int] = found.arg_true().to_list()
    return suspects


def _decode_one(data: bytes, text_keys: bool) -> tuple[Any, bytes]:
    """A record's value and JSON text, the slow way: :func:`decode` and :func:`dumps`."""
    try:
        value = decode(data)
    except RecursionError:
        raise DecodeError("bad-json", "nested too deeply") from None
    except DecodeError as exc:
        if not text_keys:
            raise
        try:  # a plain-text key: kept as a JSON string
            value = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise exc from None
    try:
        return value, dumps(value).encode("utf-8")
    except (ValueError, UnicodeEncodeError, RecursionError) as exc:
        # an out-of-range number (1e400) has no JSON text, a lone surrogate ("\ud800")
        # no UTF-8
        raise DecodeError("bad-json", f"cannot be written back as JSON text: {exc}") from None
