"""Long-running loops with start / stop / status, for `zync run` and the console.

Three services make a pipeline out of one ETL configuration
(:class:`engine.services.pipeline.Pipeline`):

* :mod:`engine.services.ingest` — ``FromKafkaService``: :class:`engine.ingest.loop.Ingest`
  over the configuration's ``inputs`` (Kafka topics → raw pools);
* :mod:`engine.services.etl` — ``EtlService``: an :class:`engine.etl.run.EtlRunner` pass
  whenever a raw pool gets a new commit, at most every ``etl_interval`` seconds
  (raw → staging);
* :mod:`engine.services.deliver` — ``ToKafkaService``: one continuous
  :class:`engine.deliver.loop.Delivery` per output topic (staging → Kafka).

:mod:`engine.services.service` holds what they share: the thread, the states, the
status snapshot and the events. Nothing here prints, and nothing happens at import time.
"""
