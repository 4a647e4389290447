"""The engine's public surface: everything the CLI, the console and the demo may use.

``zync_tui`` (the typer CLI and the Textual console) and ``demo`` import the engine only
through this module, so what they rely on is listed in one place (``__all__``, grouped
below) with its real types. Scripts, tests and benchmarks may use it too.

Importing it starts nothing (no directories, no logging set-up, no Spark, no processes)
and loads no engine module: a name is imported from the module that defines it when it is
first used (PEP 562), so ``from engine.api import Ingest`` loads the from-kafka loop and
not the ETL or to-kafka — the engine's modules together take most of a second to import,
which every CLI command would pay. Where each name comes from is written once, as the
imports under ``TYPE_CHECKING`` below: type checkers read them, and :func:`__getattr__`
reads them too (tests/unit/test_api.py checks they and ``__all__`` name the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.lazy_names import lazy_names

if TYPE_CHECKING:
    from engine import __version__
    from engine.apply.asof import AsOfError, tables_as_of_staging
    from engine.apply.loop import (
        VERSIONS_PER_COMMIT,
        Applier,
        ApplyError,
        ApplyResult,
        BadOutput,
        TableStatus,
    )
    from engine.chart.build import ChartPlan, plan_chart, write_chart
    from engine.chart.values import ChartError
    from engine.deliver.deliveries import deliver_outputs
    from engine.deliver.delivery_options import DeliveryOptions
    from engine.deliver.loop import DeliveryOutput
    from engine.deliver.status_board import DeliveryEvent, DeliveryStatus
    from engine.durations import format_seconds, parse_seconds
    from engine.errors import ZyncError, one_line
    from engine.etl.config import EtlConfig
    from engine.etl.config_file import load_config
    from engine.etl.expiry import format_age
    from engine.etl.result import ExpiredRecord, PassResult, PendingRecord, counts_line
    from engine.etl.run import EtlRunner, run_pass
    from engine.etl.starter import StarterError, matching_topics, sample_topics, starter_config
    from engine.etl.starter import dump as dump_starter_config
    from engine.etl.starter import header as starter_header
    from engine.gotools.tools import GoToolError
    from engine.gotools.tools import declared as go_tools
    from engine.gotools.tools import install as install_go_tool
    from engine.gotools.tools import installed as go_tool
    from engine.gotools.tools import require as require_go_tool
    from engine.ingest.allocators import keep_freed_pages
    from engine.ingest.loop import Ingest
    from engine.ingest.options import IngestInput, IngestOptions, load_inputs
    from engine.ingest.stats import CommitInfo, IngestStats
    from engine.jvm.artifacts import SETUP_COMMAND, ArtifactSet, Resolved
    from engine.jvm.artifacts import cache_dir as jvm_cache_dir
    from engine.jvm.artifacts import declared_sets as jvm_artifact_sets
    from engine.jvm.artifacts import fetch as fetch_jvm_artifacts
    from engine.jvm.artifacts import resolved as jvm_resolved
    from engine.jvm.class_archive import ClassArchive, ClassArchiveError
    from engine.jvm.class_archive import enabled as class_archives_enabled
    from engine.jvm.java import JavaNotFoundError
    from engine.kafka.clients import (
        KafkaRefused,
        KafkaUnavailable,
        check_reachable,
        ensure_topic,
        topic_partitions,
    )
    from engine.kafka.codecs.decoder import RecordDecoder
    from engine.kafka.codecs.detect import sniff as sniff_format
    from engine.kafka.codecs.formats import Format
    from engine.kafka.consume import BEGINNING as CONSUME_BEGINNING
    from engine.kafka.consume import END as CONSUME_END
    from engine.kafka.consume import BadRecord, ConsumeOptions, consume
    from engine.kafka.consume import dumps as consumed_json
    from engine.kafka.produce import ProduceOptions, ProduceReport, produce
    from engine.kafka.produce import describe as describe_produce
    from engine.kafka.produce import encode as encode_records
    from engine.kafka.produce import prepare as prepare_records
    from engine.kafka.produce import record_name as avro_record_name
    from engine.kafka.produce import register as register_schemas
    from engine.kafka.produce_input import InputRecord, load_schema_file
    from engine.kafka.produce_input import load_records as load_input_records
    from engine.kafka.produce_input import read_sources as read_input_sources
    from engine.kafka.registry_client import RegistrySchemas
    from engine.kafka.topic_io import (
        OutgoingRecord,
        SendReport,
        TopicMessage,
        librdkafka_version,
        read_topic,
        send,
        topic_watermarks,
    )
    from engine.kafka.typemap.infer import infer_avro_schema
    from engine.kafka.typemap.to_spark import json_value_to_spark
    from engine.lake.batch_shaper import Shaper
    from engine.lake.commit_guard import LakeAccessError, UnsafeLakeError
    from engine.lake.delta import DeltaError
    from engine.lake.lake_tables import TableError, lake_tables
    from engine.lake.location import Location, resolve_lake
    from engine.lake.maintenance import (
        CompactResult,
        VacuumResult,
        checkpoint,
        compact,
        last_checkpoint,
        vacuum,
    )
    from engine.lake.pool_errors import PoolError
    from engine.lake.pool_record import record_rows
    from engine.lake.pool_report import (
        HistoryRow,
        PartitionRow,
        PoolReport,
        PoolSummary,
        StagedOutput,
        TopicTypeText,
        pool_report,
        pool_summary,
        record_count,
        staged_outputs,
    )
    from engine.lake.pools import RAW, STAGING, Lake, Pool
    from engine.lake.query import Catalog, QueryError, query
    from engine.lake.query_result import QueryResult, QueryTable, query_result
    from engine.lake.topic_types import TopicTypes
    from engine.local.broker import make_class_archive as make_broker_class_archive
    from engine.local.processes import STOP_TIMEOUT as DEV_STOP_TIMEOUT
    from engine.local.stack import READY_TIMEOUT as DEV_READY_TIMEOUT
    from engine.local.stack import ComponentStatus, StackReport
    from engine.local.stack import down as dev_down
    from engine.local.stack import status as dev_status
    from engine.local.stack import up as dev_up
    from engine.observe.observer import Observer
    from engine.observe.reports import (
        DeadLetter,
        EtlReport,
        EtlSnapshot,
        RecordRow,
        TopicSnapshot,
        TopicsReport,
    )
    from engine.observe.tables_view import TableSnapshot, TablesReport, with_apply_status
    from engine.serve.auth import TOKEN_ENV as CONTROL_TOKEN_ENV
    from engine.serve.auth import Guard, TokenError, load_token
    from engine.serve.client import ApiClient, ApiError, is_socket_target
    from engine.serve.documents import (
        dead_letter_from,
        etl_from,
        pass_from,
        tables_from,
        topics_from,
    )
    from engine.serve.health import WEDGED_AFTER
    from engine.serve.journal import Entry as JournalEntry
    from engine.serve.journal import event_entry, json_line, record_entry
    from engine.serve.process import DemoControls, ServedProcess
    from engine.serve.server import ApiServer, ServeError, serve
    from engine.serve.sockets import ListenError, TcpAddress, listening_sockets, parse_address
    from engine.serve.sockets import run_dir as api_run_dir
    from engine.serve.sockets import socket_path as api_socket_path
    from engine.serve.status_document import SCHEMA as STATUS_SCHEMA
    from engine.services.apply import ApplyService
    from engine.services.deliver import ToKafkaService
    from engine.services.etl import ETL_INTERVAL, EtlService
    from engine.services.ingest import FromKafkaService
    from engine.services.outputs import config_outputs
    from engine.services.pipeline import AnyService, Pipeline
    from engine.services.service import (
        FAILED,
        RUNNING,
        STARTING,
        STOPPED,
        STOPPING,
        Commit,
        Service,
        ServiceDetail,
        ServiceError,
        ServiceEvent,
        ServiceState,
        ServiceStatus,
    )
    from engine.settings.errors import ConfigError, NotConfiguredError
    from engine.settings.home import zync_home
    from engine.settings.kafka import KafkaProfile, load_kafka_profile
    from engine.settings.registry import RegistryProfile, load_registry_profile
    from engine.settings.spark import SparkSettings, load_spark_settings
    from engine.settings.storage import StorageSettings, load_storage_settings
    from engine.spark import Spark, get_spark
    from engine.spark import make_class_archive as make_spark_class_archive

__all__ = [
    # errors: every one the CLI and the console catch; messages are one line of words
    "ConfigError",
    "JavaNotFoundError",
    "KafkaUnavailable",
    "KafkaRefused",
    "check_reachable",
    "NotConfiguredError",
    "PoolError",
    "DeltaError",
    "QueryError",
    "LakeAccessError",
    "UnsafeLakeError",
    "ServiceError",
    "ZyncError",
    "__version__",
    "one_line",
    # durations: one grammar for YAML and flags (250ms, 30s, 5m, 1h30m, ...)
    "format_seconds",
    "parse_seconds",
    # settings: connection profiles (~/.zync/*.json < ZYNC_* < flags), Spark, the lake
    "KafkaProfile",
    "RegistryProfile",
    "SparkSettings",
    "resolve_lake",
    "Location",
    "StorageSettings",
    "load_storage_settings",
    "load_kafka_profile",
    "load_registry_profile",
    "load_spark_settings",
    "zync_home",
    # Spark: the process's one SparkSession (a handle handed back to the engine, never used)
    "Spark",
    "get_spark",
    # JVM set-up: the artifacts `zync setup` fetches (engine/jvm/artifacts.toml)
    "SETUP_COMMAND",
    "ArtifactSet",
    "Resolved",
    "fetch_jvm_artifacts",
    "jvm_artifact_sets",
    "jvm_cache_dir",
    "jvm_resolved",
    # Go tools `zync setup` builds (engine/gotools/tools.toml: promtool, helm)
    "GoToolError",
    "go_tool",
    "go_tools",
    "install_go_tool",
    "require_go_tool",
    # class archives `zync setup` makes, so JVMs start faster (engine/jvm/class_archive.py)
    "ClassArchive",
    "ClassArchiveError",
    "class_archives_enabled",
    "make_broker_class_archive",
    "make_spark_class_archive",
    # dev stack: the embedded broker and registry (`zync dev up|down|status`)
    "DEV_READY_TIMEOUT",
    "DEV_STOP_TIMEOUT",
    "ComponentStatus",
    "StackReport",
    "dev_down",
    "dev_status",
    "dev_up",
    # lake and pools: pools, their maintenance, Spark SQL over them
    "RAW",
    "STAGING",
    "Catalog",
    "CompactResult",
    "Lake",
    "Pool",
    "Shaper",
    "TopicTypes",
    "VacuumResult",
    "checkpoint",
    "compact",
    "last_checkpoint",
    "query",
    "record_rows",
    # read models: what a pool holds and what a query returned, as plain Python
    "HistoryRow",
    "PartitionRow",
    "PoolReport",
    "PoolSummary",
    "QueryResult",
    "QueryTable",
    "StagedOutput",
    "TopicTypeText",
    "pool_report",
    "pool_summary",
    "query_result",
    "record_count",
    "staged_outputs",
    "vacuum",
    # Kafka tools: watermarks, produce, consume, send, read, the registry, schemas
    "CONSUME_BEGINNING",
    "CONSUME_END",
    "BadRecord",
    "ConsumeOptions",
    "Format",
    "InputRecord",
    "ProduceOptions",
    "ProduceReport",
    "RecordDecoder",
    "RegistrySchemas",
    "avro_record_name",
    "consume",
    "consumed_json",
    "describe_produce",
    "encode_records",
    "ensure_topic",
    "infer_avro_schema",
    "json_value_to_spark",
    "load_input_records",
    "load_schema_file",
    "prepare_records",
    "produce",
    "read_input_sources",
    "register_schemas",
    "sniff_format",
    "topic_partitions",
    "topic_watermarks",
    "OutgoingRecord",
    "SendReport",
    "TopicMessage",
    "librdkafka_version",
    "read_topic",
    "send",
    # from-kafka: Kafka topics → raw pools
    "CommitInfo",
    "Ingest",
    "IngestInput",
    "IngestOptions",
    "IngestStats",
    "keep_freed_pages",
    "load_inputs",
    # ETL: one pass, what it did, what waits and what expired
    "EtlConfig",
    "EtlRunner",
    "ExpiredRecord",
    "PassResult",
    "PendingRecord",
    "counts_line",
    "format_age",
    "load_config",
    "run_pass",
    # `zync init`: a starter configuration for every table a connector captures
    "StarterError",
    "dump_starter_config",
    "matching_topics",
    "sample_topics",
    "starter_config",
    "starter_header",
    # to-kafka: staging pools → Kafka topics
    "DeliveryEvent",
    "DeliveryStatus",
    "deliver_outputs",
    "DeliveryOptions",
    "DeliveryOutput",
    "config_outputs",
    # apply: outputs kept as Delta tables (current state or history), exactly once
    "VERSIONS_PER_COMMIT",
    "Applier",
    "ApplyError",
    "ApplyResult",
    "ApplyService",
    "AsOfError",
    "BadOutput",
    "TableError",
    "TableStatus",
    "lake_tables",
    "tables_as_of_staging",
    # services: the loops with start/stop/status, and a pipeline of them all
    "ETL_INTERVAL",
    "FAILED",
    "RUNNING",
    "STARTING",
    "STOPPED",
    "STOPPING",
    "AnyService",
    "Commit",
    "EtlService",
    "FromKafkaService",
    "Pipeline",
    "Service",
    "ServiceDetail",
    "ServiceEvent",
    "ServiceState",
    "ServiceStatus",
    "ToKafkaService",
    # the API every long-running process serves (engine/serve): probes, metrics, status, control
    "ApiClient",
    "ApiError",
    "ApiServer",
    "CONTROL_TOKEN_ENV",
    "DemoControls",
    "Guard",
    "JournalEntry",
    "ListenError",
    "STATUS_SCHEMA",
    "ServeError",
    "ServedProcess",
    "TcpAddress",
    "TokenError",
    "WEDGED_AFTER",
    "api_run_dir",
    "api_socket_path",
    "dead_letter_from",
    "etl_from",
    "event_entry",
    "is_socket_target",
    "json_line",
    "listening_sockets",
    "load_token",
    "parse_address",
    "pass_from",
    "record_entry",
    "serve",
    "tables_from",
    "topics_from",
    # `zync build`: the pipeline as a Helm chart (engine/chart)
    "ChartError",
    "ChartPlan",
    "plan_chart",
    "write_chart",
    # observe: read-only snapshots for the console (topics and lag, ETL, dead letters)
    "DeadLetter",
    "EtlReport",
    "EtlSnapshot",
    "Observer",
    "RecordRow",
    "TableSnapshot",
    "TablesReport",
    "with_apply_status",
    "TopicSnapshot",
    "TopicsReport",
]


#: Each public name's module and name there; the PEP 562 hooks that import it on first use.
origins, __getattr__, __dir__ = lazy_names(__name__, __file__, __all__, globals())
