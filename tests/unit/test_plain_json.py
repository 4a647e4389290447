"""Plain JSON records decoded a batch at a time (engine.kafka.codecs.plain_json.decode_batch,
orjson) give the very bytes record-by-record decoding with Python's json gives — the JSON
text a pool stores — and the same errors; inputs json could not write back (1e400, a lone
surrogate, deep nesting), which stopped from-kafka before, are decode errors."""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import pytest

from engine.kafka.codecs import plain_json
from engine.kafka.codecs.errors import DecodeError


def _reference(data: bytes, text_keys: bool = False) -> bytes | str:
    """What decoding one record with json gives: its text, or the error's text."""
    try:
        value = plain_json.decode(data)
    except DecodeError as exc:
        if not text_keys:
            return str(exc)
        try:
            value = data.decode("utf-8")
        except UnicodeDecodeError:
            return str(exc)
    return plain_json.dumps(value).encode("utf-8")


def _batch(datas: list[bytes | None], text_keys: bool = False) -> list[bytes | str | None]:
    batch = plain_json.decode_batch(datas, 1, text_keys=text_keys)
    out: list[bytes | str | None] = []
    for i, text in enumerate(batch.texts.to_pylist()):
        if i in batch.errors:
            assert text is None
            out.append(str(batch.errors[i]))
        else:
            out.append(text.encode("utf-8") if text is not None else None)
    return out


def _floats(rnd: random.Random, n: int) -> list[float]:
    edges = [0.0, -0.0, 1e-4, 1e-5, 9.99e-5, 1e15, 1e16, 9.999e15, 1e-7, 5e-324, 1e22,
             1.7976931348623157e308, 0.1, 1 / 3, 123456789012345680.0, 2.5e-5]
    out = list(edges)
    while len(out) < n:
        kind = rnd.randrange(4)
        if kind == 0:  # any double
            x = struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0]
            if math.isfinite(x):
                out.append(x)
        elif kind == 1:
            out.append(rnd.uniform(-1e6, 1e6))
        elif kind == 2:
            out.append(round(rnd.uniform(-1e4, 1e4), rnd.randint(0, 6)))
        else:
            out.append(10.0 ** rnd.randint(-30, 30) * rnd.random())
    return out


def _document(rnd: random.Random, depth: int = 0) -> Any:
    kind = rnd.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rnd.choice([None, True, False])
    if kind == 1:
        return rnd.choice([0, -1, 2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1, 10**30])
    if kind == 2:
        return _floats(rnd, 1)[0] if rnd.random() < 0.5 else rnd.randint(-10**6, 10**6)
    if kind in (3, 4, 5):
        alphabet = ["a", "é", "\n", '"', "\\", "/", "\x00", "\x1f", "\x7f", "\u2028", "😀", " ", "1e+5", "0.00001"]
        return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 6)))
    if kind == 6:
        return [_document(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    return {f"k{rnd.randint(0, 5)}": _document(rnd, depth + 1) for _ in range(rnd.randint(0, 5))}


def test_every_float_is_written_as_json_writes_it() -> None:
    rnd = random.Random(7)
    floats = _floats(rnd, 8000)
    datas: list[bytes | None] = [json.dumps({"x": x}).encode() for x in floats]
    datas += [json.dumps(x).encode() for x in floats[:2000]]  # bare, at the start of the text
    datas += [json.dumps([1, x]).encode() for x in floats[:2000]]
    assert _batch(datas) == [_reference(d) for d in datas if d is not None]


def test_documents_of_every_kind_spacing_and_escape() -> None:
    rnd = random.Random(11)
    datas: list[bytes | None] = []
    for _ in range(3000):
        doc = _document(rnd)
        ascii_only = rnd.random() < 0.5
        spaced = rnd.random() < 0.3
        text = json.dumps(doc, ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":"))
        datas.append(text.encode("utf-8"))
    datas.append(None)
    assert _batch(datas) == [_reference(d) if d is not None else None for d in datas]


@pytest.mark.parametrize("text_keys", [False, True])
def test_bad_and_odd_records(text_keys: bool) -> None:
    datas: list[bytes | None] = [
        b'{"a":1,"b":2,"a":3}', b' {"a" : [1, 2] } \n', b'"\\u00e9\\/"', b'"\\ud83d\\ude00"',
        b"01", b"1.", b".5", b"+1", b"1e", b"-", b"nul", b"1 2", b'"x"  x', b'"\x01"',
        b'"\xed\xa0\x80"', b'"\xc0\x80"', b'"\xf4\x90\x80\x80"', b"\xef\xbb\xbf1", b"\xff",
        b"NaN", b'{"a":Infinity}', b"-0", b"-0.0", b"1E+2", b"0e0", b"[1.5e300]", b"{}",
        b"[" * 600 + b"]" * 600, b"plain text key", None, b"",
    ]
    assert _batch(datas, text_keys) == [
        _reference(d, text_keys) if d is not None else None for d in datas
    ]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"[1e400]", "cannot be written back as JSON text"),  # json reads inf
        (b'"\\ud800"', "cannot be written back as JSON text"),  # a lone surrogate
        (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
    ],
)
def test_what_json_reads_but_cannot_write_back_is_a_decode_error(data: bytes, why: str) -> None:
    batch = plain_json.decode_batch([b"1", data, b"2"], 1)
    assert batch.texts.to_pylist() == ["1", None, "2"]
    assert list(batch.errors) == [1]
    assert batch.errors[1].kind == "bad-json"
    assert why in str(batch.errors[1])


def test_samples_are_the_values_at_every_kth_record_in_order() -> None:
    datas: list[bytes | None] = [json.dumps({"i": i}).encode() for i in range(10)]
    datas[4] = b"[1e-7]"  # decoded the slow way: still sampled in its place
    datas[6] = None
    datas[2] = b"{bad"
    batch = plain_json.decode_batch(datas, 2)
    assert batch.samples == [{"i": 0}, [1e-7], {"i": 8}]
    assert batch.texts.to_pylist()[4] == "[1e-07]"


def test_paths_null_in_every_sample_are_typed_by_the_rest_of_a_large_batch() -> None:
    """A large batch is sampled for its type; a path null in every sample (a Debezium
    ``before`` in creates) is typed by the batch's other texts, read again as json reads
    them (a 64-bit-overflowing integer stays an integer, not orjson's float)."""
    from pyspark.sql import types as T

    from engine.ingest.decode import JSON_TYPE_SAMPLES, PartDecoder

    n = JSON_TYPE_SAMPLES * 40
    values = [{"id": i, "before": None, "big": None} for i in range(n)]
    values[n - 3]["before"] = {"x": "late"}  # not a sampled index
    values[n - 5]["big"] = 2**70
    datas = [json.dumps(v).encode() for v in values]
    decoder = PartDecoder("t", "value", "json", lambda: None)  # type: ignore[arg-type,return-value]
    decoded, spark_type = decoder._json(datas)
    assert len(decoded.texts) == n
    assert isinstance(spark_type, T.StructType)
    assert spark_type["before"].dataType == T.StructType([T.StructField("x", T.StringType())])
    assert not isinstance(spark_type["big"].dataType, T.DoubleType | T.NullType)


def test_a_value_under_a_name_that_is_null_elsewhere_in_the_record_is_found() -> None:
    """The texts passed over unparsed are only those where every key naming a null
    path is null wherever it occurs: a record whose ``after.y`` holds a value while its
    ``before.y`` is null is read."""
    from pyspark.sql import types as T

    from engine.ingest.decode import JSON_TYPE_SAMPLES, PartDecoder

    n = JSON_TYPE_SAMPLES * 40
    values: list[dict[str, Any]] = [
        {"before": {"y": None}, "after": {"y": None, "tags": []}} for _ in range(n)
    ]
    values[n - 3]["after"]["y"] = 7
    values[n - 9]["after"]["tags"] = ["a"]
    datas = [json.dumps(v).encode() for v in values]
    decoder = PartDecoder("t", "value", "json", lambda: None)  # type: ignore[arg-type,return-value]
    _, spark_type = decoder._json(datas)
    assert isinstance(spark_type, T.StructType)
    after = spark_type["after"].dataType
    assert isinstance(after, T.StructType)
    assert after["y"].dataType == T.LongType()
    assert after["tags"].dataType == T.ArrayType(T.StringType())
