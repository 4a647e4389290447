"""Kafka: clients built from zync's profiles, the Schema Registry client, producing and
consuming as a library, record formats (``codecs``) and type mapping (``typemap``)."""
