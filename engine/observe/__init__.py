"""Read-only snapshots of a running pipeline: offsets, lag, cursors, pending, expired.

What an operator looks at (the console polls these; a script can print them). Nothing
here writes: snapshots read Kafka watermarks, the Delta logs of the pools and, for pending
and expired records, the ETL module's own public functions. Every snapshot says what it
could not see in words (``error`` fields) instead of raising.

* :mod:`engine.observe.observer` — :class:`~engine.observe.observer.Observer`, which
  composes the parts below and is what callers hold;
* :mod:`engine.observe.reports` — the snapshot types it returns;
* :mod:`engine.observe.topics_view` — every topic partition the pipeline reads or writes;
  :mod:`engine.observe.output_topics` — its rows of the ETLs' output topics;
* :mod:`engine.observe.kafka_probe` — asking Kafka and the registry, reading records' times;
* :mod:`engine.observe.lag` — lag in records and in time, and ingest rates;
* :mod:`engine.observe.dead_letters` — the records from-kafka could not decode;
* :mod:`engine.observe.etl_view` — the ETLs' cursors, counts and pending/expired listings;
* :mod:`engine.observe.snapshot_pools` — the pools a snapshot reads; :mod:`engine.observe.errors` —
  errors in one line.

Nothing here loads pyarrow, confluent-kafka, httpx or the ETL at import time: those
imports wait for the snapshot that needs them (the console imports the snapshot types as
it starts).
"""
