"""Generated inputs for the row evaluator's differential tests (no tests here): Spark
types as zync's type mapping makes them, and JSON texts of values of those types as
zync's from-kafka writes them — NULLs, nested NULL structs, unicode and escapes, big and
small numbers, doubles around the notation bounds, negative zero, decimals of several
scales, wide Debezium rows with a full Postgres ``source``.

Everything is seeded: a failure names its seed and reproduces.
"""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

#: Strings that exercise Jackson's escaping and UTF-8.
NASTY_STRINGS = [
    "", " ", "plain", "with \"quotes\" and \\backslash\\", "slash / and <tags> & 'single'",
    "tab\tnew\nline\rcarriage\x08back\x0cfeed", "\x00\x01\x1f\x7f\x80\x9f", "é ü ß Ω 中文 日本語",
    "emoji 😀 🎉 and 𝄞", "\u2028\u2029 separators", "ＦＵＬＬ　ｗｉｄｔｈ", "null", "true", "0",
    "  padded  ", "ÅNGSTRÖM", "straße", "i̇stanbul", "a" * 300,
]  # fmt: skip

#: Doubles where Java's notation or digits are delicate.
EDGE_DOUBLES = [
    0.0, -0.0, 1.0, -1.0, 0.1, 0.2, 0.30000000000000004, 1e-3, 9.999999999999998e-4,
    0.0009999, 1e-4, 1e7, 9999999.0, 9999999.999999998, 1.0000000000000002e7, 123456.789,
    1e-7, 1.5e-7, 1e21, 1e22, 1e23, 2e23, 1.7976931348623157e308, 2.2250738585072014e-308,
    5e-324, 4.9e-324, 2.0**53, 2.0**53 + 2, 2.0**60, 2.0**63, 1e16, 1.2345678901234567e-5,
    3.141592653589793, 2.718281828459045, 100.0, 1e100, -1e-100, 0.5, 0.25, 0.125,
    4.35, 2.675, 1.005, 1234.5, 1e15, 123456789012.5,
]  # fmt: skip

DECIMAL_TYPES = [(10, 2), (20, 6), (38, 18), (5, 0), (3, 3), (38, 0), (12, 4)]


def struct_type(fields: list[tuple[str, Any]], nullable: bool = True) -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": [
            {"name": name, "type": t, "nullable": nullable, "metadata": {}} for name, t in fields
        ],
    }


def postgres_source_type() -> dict[str, Any]:
    """The ``source`` block of Debezium's Postgres connector."""
    return struct_type(
        [
            ("version", "string"), ("connector", "string"), ("name", "string"),
            ("ts_ms", "long"), ("snapshot", "string"), ("db", "string"),
            ("sequence", "string"), ("ts_us", "long"), ("ts_ns", "long"),
            ("schema", "string"), ("table", "string"), ("txId", "long"), ("lsn", "long"),
            ("xmin", "long"),
        ]
    )  # fmt: skip


_COLUMN_KINDS = [
    "integer", "long", "string", "double", "float", "boolean", "short", "byte",
    "decimal(10,2)", "decimal(20,6)", "decimal(38,18)", "string", "long", "string",
    {"type": "array", "elementType": "string", "containsNull": True},
    {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True},
]  # fmt: skip


def wide_row_type(columns: int = 60) -> dict[str, Any]:
    """A table row of ``columns`` columns of the kinds a CDC connector writes."""
    fields: list[tuple[str, Any]] = [("id", "long")]
    for i in range(1, columns):
        fields.append((f"c{i:02d}_{_short(_COLUMN_KINDS[i % len(_COLUMN_KINDS)])}", _COLUMN_KINDS[i % len(_COLUMN_KINDS)]))
    return struct_type(fields)


def _short(kind: Any) -> str:
    if isinstance(kind, dict):
        return kind["type"]
    return kind.split("(")[0]


def debezium_value_type(row: dict[str, Any]) -> dict[str, Any]:
    """A Debezium change event's value: before, after, source, op, ts_ms, transaction."""
    return struct_type(
        [
            ("before", row), ("after", row), ("source", postgres_source_type()),
            ("op", "string"), ("ts_ms", "long"), ("ts_us", "long"),
            ("transaction", struct_type([("id", "string"), ("total_order", "long"),
                                         ("data_collection_order", "long")])),
        ]
    )  # fmt: skip


def debezium_key_type() -> dict[str, Any]:
    return struct_type([("id", "long")])


class ValueMaker:
    """Random JSON-able values of a Spark type (as JSON), as zync's from-kafka writes them."""

    def __init__(self, seed: int, null_rate: float = 0.12) -> None:
        self.rnd = random.Random(seed)
        self.null_rate = null_rate

    def value(self, t: Any, depth: int = 0) -> Any:
        rnd = self.rnd
        if rnd.random() < self.null_rate:
            return None
        if isinstance(t, dict):
            kind = t["type"]
            if kind == "struct":
                return {f["name"]: self.value(f["type"], depth + 1) for f in t["fields"]}
            if kind == "array":
                return [self.value(t["elementType"], depth + 1) for _ in range(rnd.randint(0, 4))]
            if kind == "map":
                return {
                    rnd.choice(NASTY_STRINGS[:12]) + str(i): self.value(t["valueType"], depth + 1)
                    for i in range(rnd.randint(0, 3))
                }
        return self.atomic(t)

    def atomic(self, t: str) -> Any:
        rnd = self.rnd
        if t in ("byte", "short", "integer", "long"):
            bits = {"byte": 8, "short": 16, "integer": 32, "long": 64}[t]
            low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
            return rnd.choice([0, 1, -1, low, high, rnd.randint(low, high), rnd.randint(max(low, -1000), min(high, 1000))])
        if t == "boolean":
            return rnd.random() < 0.5
        if t == "string":
            return rnd.choice(NASTY_STRINGS) if rnd.random() < 0.6 else self.word()
        if t == "double":
            return self.double()
        if t == "float":
            return self.float32()
        if t.startswith("decimal"):
            precision, scale = (int(x) for x in t[8:-1].split(","))
            return self.decimal_text(precision, scale)
        raise ValueError(t)

    def word(self) -> str:
        alphabet = "abcdefghijklmnopqrstuvwxyzABC 0123456789éü中😀-_"
        return "".join(self.rnd.choice(alphabet) for _ in range(self.rnd.randint(0, 20)))

    def double(self) -> float:
        rnd = self.rnd
        pick = rnd.random()
        if pick < 0.3:
            return rnd.choice(EDGE_DOUBLES)
        if pick < 0.55:
            digits = rnd.randint(1, 17)
            mantissa = rnd.randint(10 ** (digits - 1), 10**digits - 1)
            value = float(f"{mantissa}e{rnd.randint(-25, 25)}")
        elif pick < 0.75:
            value = rnd.uniform(-1e7, 1e7) * rnd.choice([1, 1e-9, 1e-4, 1e3])
        elif pick < 0.85:
            value = rnd.choice([rnd.uniform(9e-4, 1.1e-3), rnd.uniform(9.9e6, 1.01e7)])
        else:
            value = struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0]
            if not math.isfinite(value):
                value = 1.5
        return value if rnd.random() < 0.8 else -value

    def float32(self) -> float:
        """A float as zync writes a 32-bit float: its shortest decimal."""
        rnd = self.rnd
        raw = rnd.choice([self.double(), rnd.uniform(-1000, 1000), 0.1, 1.1, 2.5, 16777217.0, rnd.uniform(-1, 1)])
        try:
            f32 = struct.unpack("<f", struct.pack("<f", raw))[0]
        except OverflowError:
            return 1.5
        for digits in range(1, 10):
            short = float(f"{f32:.{digits}g}")
            if struct.unpack("<f", struct.pack("<f", short))[0] == f32:
                return short
        return f32

    def decimal_text(self, precision: int, scale: int) -> str:
        rnd = self.rnd
        digits = rnd.randint(1, precision)
        unscaled = rnd.randint(0, 10**digits - 1) * rnd.choice([1, -1])
        if rnd.random() < 0.1:
            unscaled = 0
        text = str(abs(unscaled)).rjust(scale + 1, "0")
        body = text if scale == 0 else f"{text[:-scale]}.{text[-scale:]}"
        if rnd.random() < 0.15:  # more places than the type's: Spark rounds half up
            body += ("" if scale else ".") + rnd.choice(["5", "49", "51", "0"])
        return ("-" if unscaled < 0 else "") + body


def dumps(value: Any, rnd: random.Random | None = None) -> str | None:
    """JSON text as from-kafka writes it (compact, UTF-8; sometimes ASCII-escaped, as
    another writer would); a NULL value stays NULL (a tombstone)."""
    if value is None:
        return None
    ascii_only = rnd is not None and rnd.random() < 0.15
    return json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only)


def random_type(rnd: random.Random, depth: int = 0) -> Any:
    """A random Spark type (as JSON) of the kinds pools hold."""
    atomic = ["integer", "long", "string", "double", "float", "boolean", "short", "byte"]
    atomic += [f"decimal({p},{s})" for p, s in DECIMAL_TYPES]
    pick = rnd.random()
    if depth >= 3 or pick < 0.55:
        return rnd.choice(atomic)
    if pick < 0.8:
        return struct_type(
            [(f"f{i}_{rnd.choice(['x', 'Y', 'é', 'a b'])}", random_type(rnd, depth + 1)) for i in range(rnd.randint(1, 5))]
        )
    if pick < 0.92:
        return {"type": "array", "elementType": random_type(rnd, depth + 1), "containsNull": True}
    return {"type": "map", "keyType": "string", "valueType": random_type(rnd, depth + 1), "valueContainsNull": True}
