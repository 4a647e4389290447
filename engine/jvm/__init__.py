"""The JVM side of zync: which Java runs Spark and the broker, and the Maven artifacts
(delta-spark, Apache Kafka, Spark's Kafka source) declared in ``artifacts.toml``."""
