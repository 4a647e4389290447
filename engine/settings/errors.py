"""The errors a wrong or missing setting raises."""

from __future__ import annotations

from engine.errors import ZyncError


class ConfigError(ZyncError, ValueError):
    """A setting is missing or wrong; the message is one line that says where."""


class NotConfiguredError(ConfigError):
    """A command needs a service (Kafka, Schema Registry) that nothing configures."""
