"""The engine's public surface: everything the CLI, the console and the demo use.

``zync_tui`` (the typer CLI and the Textual console) and ``demo`` import the engine only
through this module, so what they rely on is listed in one place (:data:`ORIGINS`,
grouped) with its real types: the operations they call, the read models and errors those
return and raise, and nothing else (a name none of them uses leaves it; scripts, tests
and benchmarks import the engine's own modules for the rest).

Importing it starts nothing (no directories, no logging set-up, no Spark, no processes)
and loads no engine module: a name is imported from the module that defines it when it is
first used (PEP 562, :mod:`engine.lazy_names`), so ``from engine.api import
FromKafkaService`` loads the from-kafka service and not the ETL or to-kafka — the
engine's modules together take most of a second to import, which every CLI command would
pay. The imports under ``TYPE_CHECKING`` say where each name comes from for type checkers
(tests/unit/test_api.py checks they and :data:`ORIGINS` agree).
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
    from engine.ingest.allocators import keep_freed_pages
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
        delete_topics,
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
    from engine.lake.maintenance import CompactResult, VacuumResult, checkpoint, compact, vacuum
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
    from engine.lake.query import QueryError
    from engine.lake.query_result import QueryResult, QueryTable, query_result
    from engine.lake.topic_types import TopicTypes
    from engine.local.broker import make_class_archive as make_broker_class_archive
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
    from engine.serve.auth import Guard, TokenError, load_token
    from engine.serve.client import ApiClient, ApiError, is_socket_target
    from engine.serve.documents import (
        dead_letter_from,
        etl_from,
        pass_from,
        tables_from,
        topics_from,
    )
    from engine.serve.journal import Entry as JournalEntry
    from engine.serve.journal import event_entry, json_line, record_entry
    from engine.serve.served_process import DemoControls, ServedProcess
    from engine.serve.server import ApiServer, ServeError, serve
    from engine.serve.sockets import ListenError, listening_sockets, parse_address
    from engine.serve.sockets import run_dir as api_run_dir
    from engine.serve.sockets import socket_path as api_socket_path
    from engine.services.apply import ApplyService
    from engine.services.deliver import ToKafkaService
    from engine.services.ingest import FromKafkaService
    from engine.services.outputs import config_outputs
    from engine.services.pipeline import AnyService, Pipeline
    from engine.services.service import (
        FAILED,
        Commit,
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
    from engine.spark import Spark, get_spark
    from engine.spark import make_class_archive as make_spark_class_archive

#: Each public name, grouped by what it is for, and where it comes from: ``module`` or
#: ``module:name`` (the name there). The imports under TYPE_CHECKING say the same for
#: type checkers (tests/unit/test_api.py checks they agree).
ORIGINS: dict[str, str] = {
    # errors: every one the CLI and the console catch; messages are one line of words
    "ConfigError": "engine.settings.errors",
    "JavaNotFoundError": "engine.jvm.java",
    "KafkaUnavailable": "engine.kafka.clients",
    "KafkaRefused": "engine.kafka.clients",
    "check_reachable": "engine.kafka.clients",
    "NotConfiguredError": "engine.settings.errors",
    "PoolError": "engine.lake.pool_errors",
    "DeltaError": "engine.lake.delta",
    "QueryError": "engine.lake.query",
    "LakeAccessError": "engine.lake.commit_guard",
    "UnsafeLakeError": "engine.lake.commit_guard",
    "ServiceError": "engine.services.service",
    "ZyncError": "engine.errors",
    "__version__": "engine",
    "one_line": "engine.errors",
    # durations: one grammar for YAML and flags (250ms, 30s, 5m, 1h30m, ...)
    "format_seconds": "engine.durations",
    "parse_seconds": "engine.durations",
    # settings: connection profiles (~/.zync/*.json < ZYNC_* < flags), Spark, the lake
    "KafkaProfile": "engine.settings.kafka",
    "RegistryProfile": "engine.settings.registry",
    "SparkSettings": "engine.settings.spark",
    "resolve_lake": "engine.lake.location",
    "Location": "engine.lake.location",
    "load_kafka_profile": "engine.settings.kafka",
    "load_registry_profile": "engine.settings.registry",
    "load_spark_settings": "engine.settings.spark",
    "zync_home": "engine.settings.home",
    # Spark: the process's one SparkSession (a handle handed back to the engine, never used)
    "Spark": "engine.spark",
    "get_spark": "engine.spark",
    # JVM set-up: the artifacts `zync setup` fetches (engine/jvm/artifacts.toml)
    "SETUP_COMMAND": "engine.jvm.artifacts",
    "ArtifactSet": "engine.jvm.artifacts",
    "Resolved": "engine.jvm.artifacts",
    "fetch_jvm_artifacts": "engine.jvm.artifacts:fetch",
    "jvm_artifact_sets": "engine.jvm.artifacts:declared_sets",
    "jvm_cache_dir": "engine.jvm.artifacts:cache_dir",
    "jvm_resolved": "engine.jvm.artifacts:resolved",
    # Go tools `zync setup` builds (engine/gotools/tools.toml: promtool, helm)
    "GoToolError": "engine.gotools.tools",
    "go_tool": "engine.gotools.tools:installed",
    "go_tools": "engine.gotools.tools:declared",
    "install_go_tool": "engine.gotools.tools:install",
    # class archives `zync setup` makes, so JVMs start faster (engine/jvm/class_archive.py)
    "ClassArchive": "engine.jvm.class_archive",
    "ClassArchiveError": "engine.jvm.class_archive",
    "class_archives_enabled": "engine.jvm.class_archive:enabled",
    "make_broker_class_archive": "engine.local.broker:make_class_archive",
    "make_spark_class_archive": "engine.spark:make_class_archive",
    # dev stack: the embedded broker and registry (`zync dev up|down|status`)
    "ComponentStatus": "engine.local.stack",
    "StackReport": "engine.local.stack",
    "dev_down": "engine.local.stack:down",
    "dev_status": "engine.local.stack:status",
    "dev_up": "engine.local.stack:up",
    # lake and pools: pools, their maintenance, Spark SQL over them
    "RAW": "engine.lake.pools",
    "STAGING": "engine.lake.pools",
    "CompactResult": "engine.lake.maintenance",
    "Lake": "engine.lake.pools",
    "Pool": "engine.lake.pools",
    "Shaper": "engine.lake.batch_shaper",
    "TopicTypes": "engine.lake.topic_types",
    "VacuumResult": "engine.lake.maintenance",
    "checkpoint": "engine.lake.maintenance",
    "compact": "engine.lake.maintenance",
    "record_rows": "engine.lake.pool_record",
    # read models: what a pool holds and what a query returned, as plain Python
    "HistoryRow": "engine.lake.pool_report",
    "PartitionRow": "engine.lake.pool_report",
    "PoolReport": "engine.lake.pool_report",
    "PoolSummary": "engine.lake.pool_report",
    "QueryResult": "engine.lake.query_result",
    "QueryTable": "engine.lake.query_result",
    "StagedOutput": "engine.lake.pool_report",
    "TopicTypeText": "engine.lake.pool_report",
    "pool_report": "engine.lake.pool_report",
    "pool_summary": "engine.lake.pool_report",
    "query_result": "engine.lake.query_result",
    "record_count": "engine.lake.pool_report",
    "staged_outputs": "engine.lake.pool_report",
    "vacuum": "engine.lake.maintenance",
    # Kafka tools: watermarks, produce, consume, send, read, the registry, schemas
    "CONSUME_BEGINNING": "engine.kafka.consume:BEGINNING",
    "CONSUME_END": "engine.kafka.consume:END",
    "BadRecord": "engine.kafka.consume",
    "ConsumeOptions": "engine.kafka.consume",
    "Format": "engine.kafka.codecs.formats",
    "InputRecord": "engine.kafka.produce_input",
    "ProduceOptions": "engine.kafka.produce",
    "ProduceReport": "engine.kafka.produce",
    "RecordDecoder": "engine.kafka.codecs.decoder",
    "RegistrySchemas": "engine.kafka.registry_client",
    "avro_record_name": "engine.kafka.produce:record_name",
    "consume": "engine.kafka.consume",
    "consumed_json": "engine.kafka.consume:dumps",
    "describe_produce": "engine.kafka.produce:describe",
    "encode_records": "engine.kafka.produce:encode",
    "delete_topics": "engine.kafka.clients",
    "ensure_topic": "engine.kafka.clients",
    "infer_avro_schema": "engine.kafka.typemap.infer",
    "json_value_to_spark": "engine.kafka.typemap.to_spark",
    "load_input_records": "engine.kafka.produce_input:load_records",
    "load_schema_file": "engine.kafka.produce_input",
    "prepare_records": "engine.kafka.produce:prepare",
    "produce": "engine.kafka.produce",
    "read_input_sources": "engine.kafka.produce_input:read_sources",
    "register_schemas": "engine.kafka.produce:register",
    "sniff_format": "engine.kafka.codecs.detect:sniff",
    "topic_partitions": "engine.kafka.clients",
    "topic_watermarks": "engine.kafka.topic_io",
    "OutgoingRecord": "engine.kafka.topic_io",
    "SendReport": "engine.kafka.topic_io",
    "TopicMessage": "engine.kafka.topic_io",
    "librdkafka_version": "engine.kafka.topic_io",
    "read_topic": "engine.kafka.topic_io",
    "send": "engine.kafka.topic_io",
    # from-kafka: Kafka topics → raw pools
    "CommitInfo": "engine.ingest.stats",
    "IngestInput": "engine.ingest.options",
    "IngestOptions": "engine.ingest.options",
    "IngestStats": "engine.ingest.stats",
    "keep_freed_pages": "engine.ingest.allocators",
    "load_inputs": "engine.ingest.options",
    # ETL: one pass, what it did, what waits and what expired
    "EtlConfig": "engine.etl.config",
    "EtlRunner": "engine.etl.run",
    "ExpiredRecord": "engine.etl.result",
    "PassResult": "engine.etl.result",
    "PendingRecord": "engine.etl.result",
    "counts_line": "engine.etl.result",
    "format_age": "engine.etl.expiry",
    "load_config": "engine.etl.config_file",
    "run_pass": "engine.etl.run",
    # `zync init`: a starter configuration for every table a connector captures
    "StarterError": "engine.etl.starter",
    "dump_starter_config": "engine.etl.starter:dump",
    "matching_topics": "engine.etl.starter",
    "sample_topics": "engine.etl.starter",
    "starter_config": "engine.etl.starter",
    "starter_header": "engine.etl.starter:header",
    # to-kafka: staging pools → Kafka topics
    "DeliveryEvent": "engine.deliver.status_board",
    "DeliveryStatus": "engine.deliver.status_board",
    "deliver_outputs": "engine.deliver.deliveries",
    "DeliveryOptions": "engine.deliver.delivery_options",
    "DeliveryOutput": "engine.deliver.loop",
    "config_outputs": "engine.services.outputs",
    # apply: outputs kept as Delta tables (current state or history), exactly once
    "VERSIONS_PER_COMMIT": "engine.apply.loop",
    "Applier": "engine.apply.loop",
    "ApplyError": "engine.apply.loop",
    "ApplyResult": "engine.apply.loop",
    "ApplyService": "engine.services.apply",
    "AsOfError": "engine.apply.asof",
    "BadOutput": "engine.apply.loop",
    "TableError": "engine.lake.lake_tables",
    "TableStatus": "engine.apply.loop",
    "lake_tables": "engine.lake.lake_tables",
    "tables_as_of_staging": "engine.apply.asof",
    # services: the loops with start/stop/status, and a pipeline of them all
    "FAILED": "engine.services.service",
    "AnyService": "engine.services.pipeline",
    "Commit": "engine.services.service",
    "FromKafkaService": "engine.services.ingest",
    "Pipeline": "engine.services.pipeline",
    "ServiceDetail": "engine.services.service",
    "ServiceEvent": "engine.services.service",
    "ServiceState": "engine.services.service",
    "ServiceStatus": "engine.services.service",
    "ToKafkaService": "engine.services.deliver",
    # the API every long-running process serves (engine/serve): probes, metrics, status, control
    "ApiClient": "engine.serve.client",
    "ApiError": "engine.serve.client",
    "ApiServer": "engine.serve.server",
    "DemoControls": "engine.serve.served_process",
    "Guard": "engine.serve.auth",
    "JournalEntry": "engine.serve.journal:Entry",
    "ListenError": "engine.serve.sockets",
    "ServeError": "engine.serve.server",
    "ServedProcess": "engine.serve.served_process",
    "TokenError": "engine.serve.auth",
    "api_run_dir": "engine.serve.sockets:run_dir",
    "api_socket_path": "engine.serve.sockets:socket_path",
    "dead_letter_from": "engine.serve.documents",
    "etl_from": "engine.serve.documents",
    "event_entry": "engine.serve.journal",
    "is_socket_target": "engine.serve.client",
    "json_line": "engine.serve.journal",
    "listening_sockets": "engine.serve.sockets",
    "load_token": "engine.serve.auth",
    "parse_address": "engine.serve.sockets",
    "pass_from": "engine.serve.documents",
    "record_entry": "engine.serve.journal",
    "serve": "engine.serve.server",
    "tables_from": "engine.serve.documents",
    "topics_from": "engine.serve.documents",
    # `zync build`: the pipeline as a Helm chart (engine/chart)
    "ChartError": "engine.chart.values",
    "ChartPlan": "engine.chart.build",
    "plan_chart": "engine.chart.build",
    "write_chart": "engine.chart.build",
    # observe: read-only snapshots for the console (topics and lag, ETL, dead letters)
    "DeadLetter": "engine.observe.reports",
    "EtlReport": "engine.observe.reports",
    "EtlSnapshot": "engine.observe.reports",
    "Observer": "engine.observe.observer",
    "RecordRow": "engine.observe.reports",
    "TableSnapshot": "engine.observe.tables_view",
    "TablesReport": "engine.observe.tables_view",
    "with_apply_status": "engine.observe.tables_view",
    "TopicSnapshot": "engine.observe.reports",
    "TopicsReport": "engine.observe.reports",
}
__all__ = list(ORIGINS)

#: The PEP 562 hooks that import a public name on first use.
__getattr__, __dir__ = lazy_names(__name__, ORIGINS, globals())
