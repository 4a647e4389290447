"""The embedded broker: Apache Kafka 4 in KRaft mode, one process on 127.0.0.1.

One JVM is both broker and controller (``process.roles=broker,controller``), run from
the ``kafka`` artifact set (:mod:`engine.jvm.artifacts`, fetched by ``zync setup``).
Everything lives in one directory: ``broker.properties``, ``broker.log`` and the log
dirs under ``kafka-data/`` (formatted once; a later start on the same directory keeps
every topic). Kafka's own defaults hold (an auto-created topic has one partition), with
the internal topics sized for one broker, and one exception: records are kept until
deleted (no time retention; see :func:`server_properties`).

Clients talk to the ``PLAINTEXT`` listener; :class:`BrokerOptions` adds listeners for
``SSL``, ``SASL_PLAINTEXT`` and ``SASL_SSL`` with their settings (the security tests use
them) and SCRAM users, which are written into the metadata when the storage is formatted.
"""

from __future__ import annotations

import base64
import subprocess
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Final

from engine.jvm import artifacts, class_archive
from engine.jvm.java import chooses_collector, extra_options, resolve_java
from engine.local.processes import (
    HOST,
    DevStackError,
    Process,
    free_port,
    start,
    stop_process,
    tcp_open,
)

BROKER: Final = "broker"
DEFAULT_BROKER_PORT: Final = 9092
SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_CONTROLLER: Final = "CONTROLLER"
_HEAP: Final = ("-Xms256m", "-Xmx1g")
#: The broker's collector, as Kafka's own scripts start it; one chosen in
#: ``$ZYNC_JVM_OPTS`` is left out (for Spark's JVMs): a JVM refuses two
_COLLECTOR: Final = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")
_FORMAT_TIMEOUT: Final = 120.0
_DATA: Final = "kafka-data"


@dataclass(frozen=True)
class Listener:
    """An extra client listener: its security protocol (also its name) and port."""

    protocol: str
    port: int

    def __post_init__(self) -> None:
        if self.protocol not in SECURITY_PROTOCOLS or self.protocol == "PLAINTEXT":
            raise ValueError(f"extra listener protocol must be one of {SECURITY_PROTOCOLS[1:]}")

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"


@dataclass(frozen=True)
class BrokerOptions:
    """What a broker runs with beyond the defaults.

    ``listeners``: extra client listeners (SSL, SASL_PLAINTEXT, SASL_SSL); ``properties``:
    more ``server.properties`` lines (keystores, JAAS configs, ...), winning over ours;
    ``scram_users``: ``(mechanism, user, password)`` credentials added at format time;
    ``jvm_options``: options for the broker's JVM instead of its class archive's
    (:func:`make_class_archive` passes the ones that write it).
    """

    listeners: tuple[Listener, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    scram_users: tuple[tuple[str, str, str], ...] = ()
    jvm_options: tuple[str, ...] = ()


def cluster_id() -> str:
    """A new KRaft cluster id (a random UUID in Kafka's URL-safe base64 form)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def server_properties(
    data_dir: Path, port: int, controller_port: int, options: BrokerOptions
) -> dict[str, str]:
    """The ``server.properties`` of a one-node broker+controller on 127.0.0.1."""
    listeners = [f"PLAINTEXT://{HOST}:{port}"]
    listeners += [f"{x.protocol}://{HOST}:{x.port}" for x in options.listeners]
    protocol_map = [f"{p}:{p}" for p in SECURITY_PROTOCOLS] + [f"{_CONTROLLER}:PLAINTEXT"]
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": ",".join([*listeners, f"{_CONTROLLER}://{HOST}:{controller_port}"]),
        "advertised.listeners": ",".join(listeners),
        "controller.listener.names": _CONTROLLER,
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(protocol_map),
        "log.dirs": str(data_dir / _DATA),
        # one broker: the internal topics cannot be replicated, and need few partitions
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "8",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "8",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Kafka deletes a segment once its newest record's *own* timestamp is older than
        # the retention (a week by default), at a check every five minutes: change events
        # replayed with their source timestamps (the demo's are from 2024) would go
        # minutes after being published, read or not. A dev broker keeps them; a topic's
        # own retention.ms still applies.
        "log.retention.ms": "-1",
        # the controller appends a no-op record to the metadata log this often (Kafka's
        # default: every 500 ms), which only brokers of a larger cluster need: idle, the
        # broker took 1.5 CPU-s a minute with the default, 1.1 with this
        "metadata.max.idle.interval.ms": "5000",
    }
    props.update(options.properties)
    return props


def _write_properties(path: Path, props: Mapping[str, str]) -> None:
    lines = [f"{key}={_escape(value)}" for key, value in props.items()]
    path.write_text("# written by zync: the embedded Apache Kafka broker\n" + "\n".join(lines) + "\n")
    path.chmod(0o600)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _java_argv(
    main: str, *args: str, log_dir: Path, jvm_options: Sequence[str] = ()
) -> list[str]:
    """A Kafka JVM's command line: zync's options, ``$ZYNC_JVM_OPTS``, and either
    ``jvm_options`` or the class archive of Kafka's class path, when one was made."""
    jars = artifacts.classpath("kafka")
    classpath = ":".join(str(jar) for jar in jars)
    log4j = resources.files("engine.local").joinpath("broker-log4j2.properties")
    return [
        str(resolve_java().binary),
        *_HEAP,
        *_COLLECTOR,
        *(option for option in extra_options() if not chooses_collector(option)),
        *(jvm_options or class_archive.use_options("kafka", jars)),
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        f"-Dkafka.logs.dir={log_dir}",
        "-cp",
        classpath,
        main,
        *args,
    ]


def formatted(data_dir: Path) -> bool:
    """True when the broker's storage under ``data_dir`` was formatted already."""
    return (data_dir / _DATA / "meta.properties").is_file()


def format_storage(data_dir: Path, config: Path, options: BrokerOptions) -> None:
    """Format the KRaft storage once (a new cluster id; SCRAM users go in here)."""
    argv = _java_argv(
        "kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(config),
        "--ignore-formatted", log_dir=data_dir,
    )  # fmt: skip
    for mechanism, user, password in options.scram_users:
        argv += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_FORMAT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DevStackError(f"cannot format the broker's storage in {data_dir}: {exc}") from None
    if done.returncode != 0:
        lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
        raise DevStackError(
            f"cannot format the broker's storage in {data_dir}: "
            f"{lines[-1] if lines else 'exit code ' + str(done.returncode)}"
        )


def broker_ready(address: str, timeout: float = 2.0) -> bool:
    """True when the broker at ``host:port`` answers a metadata request."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or not tcp_open(host, int(port), min(timeout, 1.0)):
        return False
    from confluent_kafka.admin import AdminClient  # deferred: librdkafka loads slowly

    admin = AdminClient({"bootstrap.servers": address, "socket.timeout.ms": 2000})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception:  # noqa: BLE001 - KafkaException and friends: not ready yet
        return False
    return bool(metadata.brokers)


def start_broker(
    data_dir: Path,
    port: int | None = None,
    *,
    options: BrokerOptions | None = None,
    timeout: float = 60.0,
) -> Process:
    """Start Apache Kafka on 127.0.0.1 with its storage in ``data_dir`` and wait until it
    answers metadata requests; the storage is formatted on the first start only.

    ``port`` (the PLAINTEXT listener): None prefers 9092 (else a free port), 0 takes any
    free port, another number is used as given (:class:`DevStackError` when taken). The
    log goes to ``data_dir/broker.log``. The caller stops it with ``stop_process``.
    Raises :class:`engine.jvm.artifacts.MissingArtifacts` when Kafka is not fetched.
    """
    options = options or BrokerOptions()
    artifacts.classpath("kafka")  # a missing artifact is a one-line error, before anything
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise DevStackError(
            f"cannot write to {data_dir}: {exc.strerror}; set ZYNC_HOME to a writable directory"
        ) from None
    config = data_dir / "broker.properties"

    def launch(chosen: int, log_file: Path) -> subprocess.Popen[bytes]:
        props = server_properties(data_dir, chosen, free_port(), options)
        _write_properties(config, props)
        if not formatted(data_dir):
            format_storage(data_dir, config, options)
        with log_file.open("ab") as log:
            return subprocess.Popen(
                _java_argv(
                    "kafka.Kafka", str(config), log_dir=data_dir, jvm_options=options.jvm_options
                ),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=data_dir,
                start_new_session=True,
            )

    def ready(proc: Process, wait: float) -> bool:
        return broker_ready(proc.address, wait)

    return start(BROKER, data_dir, port, DEFAULT_BROKER_PORT, launch, ready, timeout)


def make_class_archive() -> class_archive.ClassArchive:
    """The broker's class archive (:mod:`engine.jvm.class_archive`), made unless it
    exists: a broker started in a temporary directory, a record written in a transaction
    and read back committed, then the broker stopped (it writes the archive as it exits).
    Raises :class:`engine.jvm.class_archive.ClassArchiveError` or
    :class:`DevStackError`."""
    jars = artifacts.classpath("kafka")

    def run(jvm_options: list[str]) -> None:
        with tempfile.TemporaryDirectory(prefix="zync-class-archive-") as tmp:
            proc = start_broker(
                Path(tmp), port=0, options=BrokerOptions(jvm_options=tuple(jvm_options))
            )
            try:
                _round_trip(proc.address)
            finally:
                stop_process(proc, timeout=60.0)  # it writes the archive as it exits

    return class_archive.make("kafka", jars, run)


def _round_trip(address: str, timeout: float = 60.0) -> None:
    """One record produced in a transaction and consumed read-committed: the broker
    loads the classes of topics, transactions and consumer groups."""
    from confluent_kafka import Consumer, Producer  # deferred: librdkafka loads slowly

    topic = "zync-class-archive"
    # log_level 3: errors only (a fresh coordinator answers "load in progress" at first)
    producer = Producer({"bootstrap.servers": address, "transactional.id": topic, "log_level": 3})
    producer.init_transactions(timeout)
    producer.begin_transaction()
    producer.produce(topic, b"zync")
    producer.commit_transaction(timeout)
    consumer = Consumer(
        {
            "bootstrap.servers": address,
            "group.id": topic,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        message = consumer.poll(timeout)
        if message is None or message.error() is not None:
            raise DevStackError(f"the class-archive broker at {address} returned no record")
        consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()
