"""from-kafka: Kafka topics into raw pools, exactly once.

One :class:`engine.ingest.loop.Ingest` reads any number of topics (every partition,
assigned directly — no consumer-group rebalancing) into any number of pools, one pool per
topic::

    ingest = Ingest([IngestInput("Invoices", "Raw")], lake=lake, kafka=profile)
    ingest.run(stop_event, on_commit=print)      # blocks; or start() / stop() / status()

Exactly once (docs/design.md#exactly-once-from-kafka): every commit to a pool carries, in
the same Delta commit, the last offset it holds per (topic, partition) (Delta ``txn``
actions, see :meth:`engine.lake.pools.Pool.append_records`). On start each partition is
sought to the pool's position + 1. A second process on the same input cannot duplicate
anything: a commit is made only on the snapshot it was planned on, and rows another
writer already committed are dropped when re-planning. Kafka's own group offsets are only
a mirror (:mod:`engine.ingest.group_mirror`), for lag tools; the Delta log is the source
of truth.

Workers (``IngestOptions.workers_group``, ``zync from-kafka --workers-group G``): several
processes share the topics' partitions through the consumer group G (group subscription
only to spread work). Positions still come from the Delta log only: when the group
assigns a partition, it is started at the pool's position + 1 (explicit offsets, never
the group's committed offsets). When a partition is revoked or lost, the rows of it
still buffered are dropped and its next offset forgotten; a batch already on its way to
the commit stays safe (rows the pool already holds are dropped when re-planning). The
positions are mirrored to G itself through the subscribing consumer (an assign-mode
consumer committing to a group with active members is rejected).

The loop, in three threads, so consuming, decoding and the Delta write overlap
(docs/design.md#readers-and-writers):

* the **consumer** (the thread calling ``Ingest.run``) polls librdkafka and cuts a
  batch per pool when it holds ``max_records`` records or ``max_bytes`` bytes, or when
  its oldest record has waited ``interval`` seconds (:mod:`engine.ingest.buffer`);
* the **decoder** turns a batch into pool rows: Avro through the polars batch decoder
  (one vectorised call when the batch has one schema id), JSON and Kafka Connect JSON in
  Python, the optional shaper, dead letters in place;
* the **writer** records the topic's Spark types in the pool *before* the data commit,
  commits records and dead letters in one commit, mirrors positions to the consumer
  group, runs the pool's upkeep (checkpoints, compaction) and reports to ``on_commit``.
  Commits are made one at a time, in consumption order.

Dead letters (``--on-error deadletter``, the default): a record whose key or value cannot
be decoded (bad magic byte, unknown schema id, truncated Avro, invalid JSON, a bad
Connect envelope) or that the shaper fails on becomes a pool row with ``deadletter``
set (stage, error, raw key and value bytes), committed with the records around it, and
counts as consumed. With ``on_error="fail"`` the batch holding it is not committed and
``BadRecord`` names its topic, partition and offset.

Formats: ``auto`` (the default) decides a topic's value format from its first records
(Confluent Avro when they start with the magic byte 0, Kafka Connect JSON for
``{"schema", "payload"}`` objects, else JSON) and keeps it for the run, so a stray record
of another format becomes a dead letter. Keys are decided the same way; a key that is
not JSON but UTF-8 text (a common plain-string key) is kept as a JSON string.

Outages (:mod:`engine.ingest.faults`): Kafka or the Schema Registry out of reach is
waited for, not a failure — the loop says when it began and when it ended (notes of kind
``unreachable`` and ``back``), holds records back meanwhile (none becomes a dead letter
for an outage) and goes on by itself.

Nothing here prints: ``Ingest.status`` returns an ``IngestStats`` snapshot (the console
polls it), ``on_commit`` receives a ``CommitInfo`` per commit and ``on_note`` the notes.
Every module logs to ``engine.from_kafka`` (the console's log panel names the source
after it).

The modules, one concept each: ``options`` (inputs, options), ``errors``, ``stats`` (the
snapshots), ``state`` (what the threads share), ``decode`` (a batch's keys or values per
topic), ``buffer`` (buffers and the batching decision), ``consume`` (the consumer
thread), ``stages`` (the decoder and writer threads), ``prepare`` (a batch into rows),
``dead_letters``, ``write`` (the commit), ``positions`` (where partitions start),
``assignment`` (which partitions, workers group), ``group_mirror``, ``gc_pause``,
``faults`` (waiting out Kafka and Schema Registry outages), ``loop``
(:class:`~engine.ingest.loop.Ingest`, composing them).
"""
