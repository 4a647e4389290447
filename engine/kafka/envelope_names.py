"""The names of the envelopes an output is delivered in (the wire format of its records:
``jdbc``, ``debezium``, ``differential``, ``materialize``), known to the configuration
that names one and to to-kafka, which delivers in it (``engine/deliver/envelopes/``, one
module per envelope: adding one is adding its module and its name here)."""

from __future__ import annotations

#: Every envelope, the default (used when an output names none) first.
ENVELOPES: tuple[str, ...] = ("jdbc", "debezium", "differential", "materialize")
DEFAULT = ENVELOPES[0]


def envelope_name(text: str) -> str:
    """The envelope called ``text`` (case and spaces ignored); ValueError if none is."""
    wanted = text.strip().lower()
    if wanted in ENVELOPES:
        return wanted
    choices = ", ".join(ENVELOPES[:-1]) + " or " + ENVELOPES[-1]
    raise ValueError(f"unknown envelope {text!r}: use {choices}")
