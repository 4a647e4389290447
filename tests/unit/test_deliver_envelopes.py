"""to-kafka's envelopes are found by name, one module each (engine/deliver/envelopes)."""

from __future__ import annotations

import pytest

from engine.deliver.envelopes import envelope_classes, envelope_named
from engine.deliver.envelopes.base import Envelope


def test_every_envelope_module_is_found_by_its_name() -> None:
    classes = envelope_classes()
    assert list(classes)[:1] == ["jdbc"]  # the default comes first
    assert {"jdbc", "differential"} <= set(classes)
    for name, kind in classes.items():
        assert issubclass(kind, Envelope)
        assert kind.name == name
    assert envelope_named(" Differential ") is classes["differential"]


def test_an_unknown_envelope_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown envelope 'cdc': use jdbc\b.* or ") as raised:
        envelope_named("cdc")
    assert "differential" in str(raised.value)


def test_the_cli_offers_every_envelope() -> None:
    """`--envelope` lists its choices without importing the envelopes (heavy): the list
    is written out, and must name every envelope module."""
    from zync_tui.long_running import EnvelopeChoice

    assert [e.value for e in EnvelopeChoice] == list(envelope_classes())


def test_every_envelope_module_is_named_where_the_configuration_reads_the_names() -> None:
    """The configuration checks an output's envelope against ENVELOPES (engine.kafka, so
    the ETL never imports to-kafka); to-kafka's modules are exactly those."""
    from engine.deliver.envelopes import envelope_classes
    from engine.kafka.envelope_names import ENVELOPES

    assert tuple(envelope_classes()) == ENVELOPES
