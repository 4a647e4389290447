"""Exactly once across kill -9 in the CDC envelopes debezium and materialize (and jdbc
to one partition), in Avro: the run and checks of test_to_kafka_crash.py (see there), in
a file of its own so that two test workers share the envelopes' crash runs."""

from __future__ import annotations

import pytest

from tests.integration.test_to_kafka_crash import kill_9_at_random_moments

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=100)]


def test_kill_9_at_random_moments_loses_and_repeats_nothing(
    lake, broker, registry, tmp_path
) -> None:
    kill_9_at_random_moments(lake, broker, registry, tmp_path, "debezium+materialize")
