"""ETL on Spark: raw CDC records → denormalized change records, exactly once.

* :mod:`engine.etl.config` — the strict model of the YAML configuration;
  :mod:`engine.etl.config_file` reads it and says where a mistake is;
* :mod:`engine.etl.sql`, :mod:`engine.etl.typed_records`, :mod:`engine.etl.plan_context` —
  a rule's SQL text, typed input envelopes, the fate and output rows a rule yields;
* :mod:`engine.etl.check` — rules checked in Spark before anything is written;
* :mod:`engine.etl.rules` — records matched to rules, rules planned into Spark;
* :mod:`engine.etl.txn` — transaction bundles (incl. Debezium transaction metadata);
* :mod:`engine.etl.markers`, :mod:`engine.etl.cursors`, :mod:`engine.etl.expiry` —
  completion markers, positions in the Delta log, event-time expiry;
* :mod:`engine.etl.etl_pools`, :mod:`engine.etl.read`, :mod:`engine.etl.evaluate`,
  :mod:`engine.etl.plan`, :mod:`engine.etl.numbering` — a pass's pools, reads, Spark
  job, decisions and output numbering;
* :mod:`engine.etl.run` — one pass (:func:`run_pass`) and its one commit,
  :class:`EtlRunner`; :mod:`engine.etl.inspect` — ``pending``, ``expired`` and
  ``explain``; :mod:`engine.etl.result` — what they return.

Nothing here imports pyspark at import time, and importing the package imports none of
its modules: a command that needs one (``zync to-kafka`` reads a configuration's
outputs) does not pay for the rest. The CLI and the console reach them through
:mod:`engine.api`.
"""
