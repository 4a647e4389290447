"""The envelopes to-kafka delivers in, one module each, found by name.

A module of this package defines a subclass of
:class:`~engine.deliver.envelopes.base.Envelope` and names it ``ENVELOPE``; the
envelope's ``name`` is its ``--envelope`` value, one of
:data:`engine.kafka.envelope_names.ENVELOPES`. Adding an envelope is adding a module
and its name there.
A module without ``ENVELOPE`` is a part envelopes share (``images``: the latest value
per key).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from engine.deliver.envelopes.base import Envelope
from engine.kafka.envelope_names import DEFAULT, envelope_name


@cache
def envelope_classes() -> dict[str, type[Envelope]]:
    """Every envelope of this package by name: the default first, then by name."""
    found: dict[str, type[Envelope]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base" or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        kind = getattr(module, "ENVELOPE", None)
        if isinstance(kind, type) and issubclass(kind, Envelope):
            found[kind.name] = kind
    return dict(sorted(found.items(), key=lambda item: (item[0] != DEFAULT, item[0])))


def envelope_named(text: str) -> type[Envelope]:
    """The envelope called ``text`` (case and spaces ignored); ValueError if none is."""
    return envelope_classes()[envelope_name(text)]
