"""zync's embedded Schema Registry: a Confluent-compatible REST service durable in SQLite.

- ``app.create_app(db_path)`` builds the FastAPI app (the one factory).
- ``store.RegistryStore`` holds subjects, versions, global schema ids and config, one
  transaction of ``database.Database`` (SQLite) per operation: it registers and deletes,
  ``lookups.SchemaLookups`` reads, ``levels.CompatibilityLevels`` keeps the compatibility
  levels; ``candidate`` prepares a
  schema to store or compare, ``queries`` reads inside a transaction, ``schemas`` and
  ``errors`` are the values and errors of the REST API.
- ``compat`` parses Avro schemas and checks compatibility with Avro's resolution rules.
- ``process`` starts ``python -m engine.registry`` as a child and waits until it answers.

Only AVRO schemas are checked for compatibility; JSON and PROTOBUF schemas are accepted and
stored as opaque text. Importing this package imports nothing else.
"""
