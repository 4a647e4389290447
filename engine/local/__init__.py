"""The embedded stack on this machine: an Apache Kafka broker and zync's Schema Registry
as child processes (``zync dev up|down|status``, test fixtures, the demo)."""
