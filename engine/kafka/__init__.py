"""Kafka wire formats, schema inference and type mapping (pure code, no network)."""
