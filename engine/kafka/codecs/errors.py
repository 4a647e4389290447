"""Why a Kafka key or value cannot be decoded: :class:`DecodeError` and its kinds."""

from __future__ import annotations

from engine.errors import ZyncError

#: Every ``DecodeError.kind``, with what it means.
DECODE_ERROR_KINDS: dict[str, str] = {
    "bad-magic": "an Avro message does not start with the Confluent magic byte 0",
    "truncated": "the bytes end before the value does",
    "bad-avro": "the Avro body does not match its writer schema",
    "unknown-schema-id": "the schema id is not known to the schema registry",
    "bad-schema": "the writer schema itself is not valid",
    "bad-json": "the bytes are not UTF-8 JSON",
    "bad-connect-envelope": "not a Kafka Connect {schema, payload} envelope, or the "
    "payload does not match its schema",
}


class DecodeError(ZyncError):
    """A key or value that cannot be decoded.

    ``kind`` is one of :data:`DECODE_ERROR_KINDS`; ``message`` says what was found, in
    one line.
    """

    def __init__(self, kind: str, message: str) -> None:
        if kind not in DECODE_ERROR_KINDS:
            raise ValueError(f"unknown decode error kind {kind!r}")
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message

    def __reduce__(self) -> tuple[type[DecodeError], tuple[str, str]]:
        return (type(self), (self.kind, self.message))
