"""zync's engine: Kafka ⇄ Delta Lake sync and Spark ETL, with no user interface.

Importing this package does nothing: no directories, no logging set-up, no Spark.
"""

__version__ = "0.1.0"
