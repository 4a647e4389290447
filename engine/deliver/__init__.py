"""to-kafka: deliver a staging pool's output records to a Kafka topic, exactly once.

A staging pool holds, per output topic, records at contiguous pool offsets 0, 1, 2, ...
(``kafka.offset``, written by the ETL). :class:`~engine.deliver.loop.Delivery` produces
them to the topic in offset order and keeps doing so (``continuous``) as new staging
commits arrive; :func:`~engine.deliver.loop.deliver_outputs` runs one per output.

Exactly once, across kill -9 at any moment (docs/design.md#exactly-once-to-kafka):

* each transaction commits, with its records, where delivery stands: an offset per
  partition with the position as metadata, in Kafka's offsets topic
  (:mod:`~engine.deliver.committed`), and, the first time, a claim on the topic that
  outlives it (:mod:`~engine.deliver.claims`); records also carry their position in
  headers (:mod:`~engine.deliver.positions`). On start all three are read back and
  judged (:mod:`~engine.deliver.keeper`, :mod:`~engine.deliver.ownership`): the committed
  position is the stronger, and a topic another pool delivers, or one deleted and
  created again, stops delivery unless the topic is taken over;
* each record's partition is a pure function of its key, so every record is skipped or
  produced by comparing its position with its partition's (:mod:`~engine.deliver.ledger`);
* records are produced in Kafka transactions by a producer whose transactional id is
  derived from the topic, which fences a killed process's zombie
  (:mod:`~engine.deliver.transactions`); a second to-kafka on the same topic is refused at
  once on this machine (:mod:`~engine.deliver.lock`).

Reading (:mod:`~engine.deliver.staging_reader`): the first pass reads the snapshot's files in
commit order, later passes only the versions committed since, through the Delta log's
change data feed. Envelopes (:mod:`~engine.deliver.envelopes`, one module each) make
the messages: ``jdbc`` (default), ``debezium``, ``differential`` and ``materialize``
(:class:`~engine.deliver.loop.DeliveryOutput` names one per output). Formats
(:mod:`~engine.deliver.encode`): ``avro`` (Confluent wire format, schemas in the
registry), ``connect-json`` (``{schema, payload}``, schemas from the same Spark types)
and ``json`` (the JSON text). A shaper (:mod:`~engine.deliver.output_shaper`) may reshape each
record with Spark SQL first.

The modules, each owning one concept: ``loop`` (the Delivery), ``status`` (events and
the status snapshot), ``errors``, ``lock``, ``positions``, ``committed``, ``claims``,
``ownership``, ``keeper``, ``ledger``, ``read``, ``rows``, ``shaper``, ``record_types``,
``encode`` (with ``avro_bodies`` and ``json_convert``), ``envelopes/`` (``base``,
``images``, ``jdbc``, ``debezium``, ``differential``, ``materialize``), ``stream``
(reading and encoding ahead of producing), ``produce`` and ``faults`` (what is waited
for — an unreachable broker, a transaction the broker gave up — and what stops a
delivery).
"""
