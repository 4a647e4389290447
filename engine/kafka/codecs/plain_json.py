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
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa

from engine.kafka.codecs.errors import DecodeError

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
    texts = _Texts(len(datas), sum(len(d) for d in datas if d is not None))
    others: list[int] = []  # left to decode() and dumps()
    sampled: list[tuple[int, Any]] = []
    loads, write, error = orjson.loads, orjson.dumps, orjson.JSONDecodeError
    add, skip = texts.add, texts.skip
    for i, data in enumerate(datas):
        if data is None:
            skip(i)
            continue
        try:
            value = loads(data)
            add(i, write(value))
        except (error, orjson.JSONEncodeError):  # not JSON, or nested too deep for orjson
            skip(i)
            others.append(i)
            continue
        if i % sample_every == 0:
            sampled.append((i, value))
    array = texts.array()
    written_otherwise = [i for i in _suspects(array) if _OTHER_NUMBERS.search(texts.text(i))]
    if written_otherwise:
        again = set(written_otherwise)
        sampled = [(i, value) for i, value in sampled if i not in again]
        others.extend(written_otherwise)
    batch = JsonBatch(array)
    if not others:
        batch.samples = [value for _, value in sampled]
        return batch
    out: list[bytes | str | None] = array.to_pylist()
    for i in written_otherwise:
        out[i] = None
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
    batch.texts = pa.array(out, pa.string())
    sampled.sort(key=lambda sample: sample[0])
    batch.samples = [value for _, value in sampled]
    return batch


class _Texts:
    """A batch's JSON texts written one after the other into one Arrow buffer: every
    text orjson returns is copied there and freed at once, so its memory serves the next
    record (a batch's texts each kept in a bytes object of its own touched a fresh page
    per record — orjson over-allocates — and the kernel's page faults cost more than the
    JSON)."""

    def __init__(self, n: int, size: int) -> None:
        self._n = n
        self._buffer = pa.allocate_buffer(max(size, 64), resizable=True)
        self._view = memoryview(self._buffer).cast("B")
        self._ends = array("q", bytes(8 * (n + 1)))
        self._end = 0
        self._missing: list[int] = []

    def add(self, i: int, text: bytes) -> None:
        start, end = self._end, self._end + len(text)
        if end > len(self._view):
            self._grow(end)
        self._view[start:end] = text
        self._end = self._ends[i + 1] = end

    def skip(self, i: int) -> None:
        """No text for record ``i`` (NULL)."""
        self._ends[i + 1] = self._end
        self._missing.append(i)

    def text(self, i: int) -> bytes:
        return bytes(self._view[self._ends[i] : self._ends[i + 1]])

    def array(self) -> pa.Array:
        validity = None
        if self._missing:
            valid = [True] * self._n
            for i in self._missing:
                valid[i] = False
            validity = pa.array(valid, pa.bool_()).buffers()[1]
        texts = pa.LargeStringArray.from_buffers(
            self._n, pa.py_buffer(self._ends), self._buffer, validity, len(self._missing)
        )
        return texts.cast(pa.string())

    def _grow(self, end: int) -> None:
        self._view.release()
        self._buffer.resize(max(end, 2 * len(self._buffer)))
        self._view = memoryview(self._buffer).cast("B")


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
