"""zync's settings: connection profiles (Kafka, Schema Registry), Spark, the lake, the home.

Where settings come from, weakest first (a later source wins key by key):

1. files in the zync home (``$ZYNC_HOME``, else ``~/.zync``) with zync's keys:
   ``kafka.json``, ``schema_registry.json``, ``spark.json`` and ``storage.json`` (the lake
   and the AWS keys, read as the AWS CLI names them, see :mod:`engine.settings.storage`);
2. environment variables;
3. explicit overrides (command-line flags), passed as a mapping to the loaders.

Environment variables read here (an empty value counts as unset):

==================================================  ==============================
``ZYNC_HOME``                                        the zync home (default ``~/.zync``)
``ZYNC_LAKE``                                        the lake: a directory or ``s3://B/P``
``AWS_*``                                            S3 settings (``storage``)
``ZYNC_KAFKA_BOOTSTRAP_SERVERS``                     ``bootstrap_servers``
``ZYNC_KAFKA_SECURITY_PROTOCOL``                     ``security_protocol``
``ZYNC_KAFKA_SASL_MECHANISMS``                       ``sasl_mechanisms``
``ZYNC_KAFKA_SASL_USERNAME``                         ``sasl_username``
``ZYNC_KAFKA_SASL_PASSWORD``                         ``sasl_password``
``ZYNC_KAFKA_TLS_CLIENT_CERT_FILE``                  ``tls_client_cert_file``
``ZYNC_KAFKA_TLS_CLIENT_KEY_FILE``                   ``tls_client_key_file``
``ZYNC_KAFKA_TLS_SERVER_CA_CERT_FILE``               ``tls_server_ca_cert_file``
``ZYNC_KAFKA_TLS_SERVER_INSECURE_SKIP_VERIFY``       ``tls_server_insecure_skip_verify``
``ZYNC_REGISTRY_URL``                                ``url`` (Schema Registry)
``ZYNC_REGISTRY_USER``                               ``user``
``ZYNC_REGISTRY_PASSWORD``                           ``password``
``ZYNC_SPARK_MASTER``                                Spark master (default ``local[*]``)
==================================================  ==============================

Boolean variables accept ``1/0``, ``true/false``, ``yes/no``, ``on/off``.

Profiles are strict: an unknown key in a file is an error naming the file and the key,
and so is a value of the wrong type. Passwords are held as
:class:`~engine.settings.secret.Secret`, whose ``repr``/``str`` is ``***``; they appear in
no message these modules produce. A file that holds a password and is readable by group
or others triggers an :class:`~engine.settings.files.InsecureFileWarning` through
:mod:`warnings` (the CLI shows it; a console can collect it with
:func:`warnings.catch_warnings`).

Nothing happens at import time; the zync home is created only when something is
written there (:func:`engine.settings.files.write_private_json`).

One module per concept: ``errors`` (ConfigError), ``home`` (the zync home and the
environment), ``files`` (JSON files and their permissions), ``secret``, ``sources``
(merging file < environment < overrides), ``kafka``, ``registry``, ``spark``, ``storage`` (where the lake is, how to reach S3).
"""
