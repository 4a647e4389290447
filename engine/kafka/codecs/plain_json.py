"""Plain JSON record values: UTF-8 JSON text, no schema.

Only standard JSON is accepted: ``NaN``/``Infinity`` (which Python's :mod:`json` would
take) are refused, so every decoded value can be written back as valid JSON text.
"""

from __future__ import annotations

import json
from typing import Any

from engine.kafka.codecs.errors import DecodeError

_COMPACT = (",", ":")


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
