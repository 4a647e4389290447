"""Kafka record formats: Confluent Avro, Kafka Connect JSON and plain JSON, decoded to the
same JSON-able values (see :mod:`engine.kafka.codecs.formats`), and the one sniffer that
guesses a record's format (:mod:`engine.kafka.codecs.detect`)."""
