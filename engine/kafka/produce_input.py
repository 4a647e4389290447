"""The input of ``zync produce``: JSON records read from files or standard input.

Steps 1 and 2 of :mod:`engine.kafka.produce`:

1. **Read** JSON input (:func:`parse_json_records`): JSON lines, several JSON values one
   after another (pretty-printed ones too), or one JSON array whose elements are the
   records. Every record remembers its source and the line it starts on, so errors say
   ``orders.json line 12: ...``.
2. **Shape** (:func:`to_input_records`): a record is either a bare value, or an envelope
   ``{"key": K, "value": V}`` (``{"kafka": ..., "key": ..., "value": ...}``, what ``zync
   consume`` prints, is an envelope too, its ``kafka`` part ignored). Envelopes are
   recognized when *every* record looks like one (an object with a ``value`` field and
   no fields but ``key``, ``value``, ``kafka``), so a batch is never half one way; the
   caller can force either reading. ``key_field`` takes the key from a field of the
   value (``after.ID``: dotted paths reach nested fields). A null value is a tombstone;
   a null key is no key.

Schema files (``--key-schema``/``--value-schema``) are read here too
(:func:`load_schema_file`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from engine.errors import ZyncError
from engine.kafka.codecs import plain_json

ENVELOPE_FIELDS = frozenset({"key", "value", "kafka"})


class InputError(ZyncError):
    """The input is not JSON, or a record is not what the options need; names the line."""


@dataclass(frozen=True)
class InputRecord:
    """One record to produce, with where it came from."""

    source: str
    line: int
    key: Any
    value: Any

    @property
    def where(self) -> str:
        return f"{self.source} line {self.line}"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_WS = re.compile(r"[ \t\n\r]*")


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


class _Lines:
    """Line numbers of increasing positions in one text, counted once (not from 0 each time)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1

    def at(self, pos: int) -> int:
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _decode_at(text: str, pos: int, source: str) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{source} line {exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})"
        ) from None
    except ValueError as exc:  # NaN / Infinity
        raise InputError(f"{source} line {_line_of(text, pos)}: {exc}") from None


def _skip_ws(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


def parse_json_records(text: str, source: str = "<stdin>") -> list[tuple[int, Any]]:
    """``(line, value)`` for each JSON record in ``text``.

    ``text`` is JSON lines or several JSON values in a row (records may span lines), or
    exactly one JSON array, whose elements are then the records. Raises
    :class:`InputError` naming ``source`` and the line of the first mistake.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    pos = _skip_ws(text, 0)
    if text.startswith("[", pos):
        _, end = _decode_at(text, pos, source)
        if _skip_ws(text, end) == len(text):  # the whole input is one array
            return _array_elements(text, pos, source)
    records: list[tuple[int, Any]] = []
    lines = _Lines(text)
    while pos < len(text):
        value, end = _decode_at(text, pos, source)
        records.append((lines.at(pos), value))
        pos = _skip_ws(text, end)
    return records


def _array_elements(text: str, pos: int, source: str) -> list[tuple[int, Any]]:
    # the array is known to be valid JSON: walk it to get each element's line
    records: list[tuple[int, Any]] = []
    lines = _Lines(text)
    pos = _skip_ws(text, pos + 1)
    if text.startswith("]", pos):
        return records
    while True:
        value, end = _decode_at(text, pos, source)
        records.append((lines.at(pos), value))
        pos = _skip_ws(text, end)
        if text.startswith("]", pos):
            return records
        pos = _skip_ws(text, pos + 1)  # the comma


def read_sources(paths: Sequence[str | Path], stdin: IO[str] | None = None) -> list[tuple[str, str]]:
    """``(name, text)`` of each input; ``-`` (or no paths at all) is standard input.

    Raises :class:`InputError` for a file that cannot be read or is not UTF-8.
    """
    out: list[tuple[str, str]] = []
    for path in paths or ["-"]:
        if str(path) == "-":
            stream = stdin if stdin is not None else sys.stdin
            try:
                out.append(("<stdin>", stream.read()))
            except UnicodeDecodeError as exc:
                raise InputError(f"<stdin>: not UTF-8 text ({exc.reason})") from None
            continue
        try:
            out.append((str(path), Path(path).read_text(encoding="utf-8")))
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return out


def _is_envelope(value: Any) -> bool:
    return isinstance(value, dict) and "value" in value and set(value) <= ENVELOPE_FIELDS


def _field(value: Any, path: str) -> tuple[bool, Any]:
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def to_input_records(
    parsed: Iterable[tuple[str, int, Any]],
    *,
    key_field: str | None = None,
    envelope: bool | None = None,
) -> list[InputRecord]:
    """Records from ``(source, line, json value)``: bare values or envelopes, keys set.

    ``envelope`` None decides from the records (all envelopes, or none); True requires
    envelopes; False takes every record as a bare value. ``key_field`` is a dotted path
    into the value. Raises :class:`InputError` naming the line.
    """
    items = list(parsed)
    if envelope is None:
        envelope = bool(items) and all(_is_envelope(value) for _, _, value in items)
    records: list[InputRecord] = []
    for source, line, item in items:
        key: Any = None
        value = item
        if envelope:
            if not _is_envelope(item):
                raise InputError(
                    f"{source} line {line}: expected an envelope "
                    '{"key": ..., "value": ...}, got '
                    + (f"an object with fields {', '.join(item)}" if isinstance(item, dict)
                       else plain_json.dumps(item)[:40])
                )
            key, value = item.get("key"), item["value"]
        if key_field:
            if key is not None:
                raise InputError(
                    f"{source} line {line}: the envelope has a key and --key {key_field} "
                    "asks for another: use one or the other"
                )
            found, key = _field(value, key_field)
            if not found:
                raise InputError(
                    f"{source} line {line}: --key {key_field}: the value has no field "
                    f"{key_field}"
                )
        records.append(InputRecord(source, line, key, value))
    return records


def load_records(
    sources: Sequence[tuple[str, str]],
    *,
    key_field: str | None = None,
    envelope: bool | None = None,
) -> list[InputRecord]:
    """Every record of every ``(name, text)`` source (see :func:`parse_json_records`)."""
    parsed = [
        (name, line, value)
        for name, text in sources
        for line, value in parse_json_records(text, name)
    ]
    return to_input_records(parsed, key_field=key_field, envelope=envelope)


def load_schema_file(path: str | Path) -> Any:
    """A schema from a file (``.avsc`` or Connect schema JSON); :class:`InputError` if bad."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} line {exc.lineno}: invalid JSON: {exc.msg}") from None
