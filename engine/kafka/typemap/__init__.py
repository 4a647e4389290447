"""Type mapping between Kafka record schemas and Spark: Avro/Connect/JSON to Spark
(``to_spark``), Spark to Avro/Connect/Arrow (``from_spark``), and schemas inferred from
sample JSON records (``infer``)."""
