"""ETL on Spark: raw CDC records → denormalized change records, exactly once.

* :mod:`engine.etl.config` — the strict model of the YAML configuration;
* :mod:`engine.etl.rules` — rules planned into Spark SQL, checked before writing;
* :mod:`engine.etl.txn` — transaction bundles (incl. Debezium transaction metadata);
* :mod:`engine.etl.markers`, :mod:`engine.etl.cursors`, :mod:`engine.etl.expiry` —
  completion markers, positions in the Delta log, event-time expiry;
* :mod:`engine.etl.run` — one pass (:func:`run_pass`), :class:`EtlRunner`, ``pending``,
  ``expired`` and ``explain``.

Nothing here imports pyspark at import time.
"""

from engine.etl.config import EtlConfig, EtlConfigError, load_config, parse_config
from engine.etl.run import (
    EtlError,
    EtlRunner,
    ExpiredRecord,
    PassResult,
    PendingRecord,
    expired,
    explain,
    pending,
    run_pass,
)

__all__ = [
    "EtlConfig",
    "EtlConfigError",
    "EtlError",
    "EtlRunner",
    "ExpiredRecord",
    "PassResult",
    "PendingRecord",
    "expired",
    "explain",
    "load_config",
    "parse_config",
    "pending",
    "run_pass",
]
