"""Kafka clients built from zync's connection profile.

Every part of zync that talks to Kafka (produce, consume, from-kafka, to-kafka, the
console) builds its clients here, so security settings, quiet logging and the embedded
broker's work-arounds (docs/design.md#the-embedded-stack) live in one place. The Schema
Registry's client is :mod:`engine.kafka.registry_client`.

librdkafka's own log lines go to the ``engine.kafka.librdkafka`` logger instead of the
terminal; a broker that cannot be reached becomes :class:`KafkaUnavailable`, a one-line
error raised within the timeout instead of a hang.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from engine.errors import ZyncError
from engine.kafka.refusals import refusal, rejected_file, without_repeat_count
from engine.settings.errors import ConfigError
from engine.settings.kafka import KafkaProfile

log = logging.getLogger("engine.kafka.librdkafka")

C = TypeVar("C", AdminClient, Consumer, Producer)

#: Group members that leave or die are noticed within seconds (a workers group moves
#: their partitions to the survivors sooner than with librdkafka's defaults).
GROUP_DEFAULTS: Mapping[str, str] = {
    "max.poll.interval.ms": "10000",
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
}

#: Larger fetches than librdkafka's defaults: ingest reads large batches.
FETCH_DEFAULTS: Mapping[str, str] = {
    "fetch.max.bytes": str(64 * 1024 * 1024),
    "max.partition.fetch.bytes": str(16 * 1024 * 1024),
    "fetch.wait.max.ms": "100",
    "queued.max.messages.kbytes": str(256 * 1024),
}


#: Where ``assign()`` starts a partition read from its beginning: offset 0, which a
#: consumer with ``auto.offset.reset=earliest`` moves to the log's start when retention
#: has removed it. librdkafka's logical ``OFFSET_BEGINNING`` asks the broker for that
#: start first, and at a consumer's start (no leader known yet) answered ~0.5 s later
#: than an offset (54 ms against 555 ms to a first message here, 1 or 200 partitions).
FIRST_OFFSET = 0

#: Errors that pass by themselves, though librdkafka does not mark them retriable on
#: every call: a leader being elected, a topic the answering broker does not know yet, a
#: coordinator loading.
_PASSING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)


class KafkaUnavailable(ZyncError):
    """Kafka could not be reached (or refused us) within the timeout.

    ``passing``: the broker answered with an error that passes by itself (a partition
    whose leader is being elected, as just after the topic is created; a group
    coordinator loading): asking again a moment later is the cure."""

    def __init__(self, message: str, *, passing: bool = False) -> None:
        super().__init__(message)
        self.passing = passing


def passing(error: KafkaError) -> bool:
    """Whether ``error`` passes by itself (see :class:`KafkaUnavailable`)."""
    return bool(error.retriable()) or error.code() in _PASSING


class KafkaRefused(KafkaUnavailable):
    """The brokers refused our SASL login or TLS handshake: no retry helps, a setting
    must change (the message names it)."""


class TopicNotFound(ZyncError):
    pass


class TopicRefused(KafkaUnavailable):
    """Kafka refused to create ``topic`` (the message says why)."""

    def __init__(self, topic: str, message: str) -> None:
        super().__init__(message)
        self.topic = topic


@dataclass
class ErrorLog:
    """The latest client-level error librdkafka reported (e.g. all brokers down)."""

    last: KafkaError | None = None
    #: the latest error that says why (refused, TLS, SASL), not just "N/M brokers are down"
    specific: KafkaError | None = None

    def __call__(self, error: KafkaError) -> None:
        self.last = error
        if error.code() != KafkaError._ALL_BROKERS_DOWN:
            self.specific = error
        log.debug("librdkafka error: %s", error)

    def reason(self, fallback: KafkaError) -> str:
        """The error's words, without librdkafka's repeat count."""
        error = self.specific or self.last or fallback
        return without_repeat_count(str(error.str()))


def client_config(
    profile: KafkaProfile, extra: Mapping[str, Any] | None = None, *, errors: ErrorLog | None = None
) -> dict[str, Any]:
    """The librdkafka configuration for a client of ``profile``, plus ``extra``."""
    config: dict[str, Any] = dict(profile.librdkafka_config())
    config.update(
        {
            "logger": log,
            "error_cb": errors or ErrorLog(),
            "socket.connection.setup.timeout.ms": "5000",
            # librdkafka drops its bootstrap connection once metadata names the brokers,
            # and its first connection to a named broker waits out this backoff (100 ms
            # by default): a client's first request took ~60 ms instead of ~20
            # (bench/RESULTS.md, "to-kafka start-up"; see also look_at_cluster). It
            # still doubles up to the maximum.
            "reconnect.backoff.ms": "10",
            "reconnect.backoff.max.ms": "2000",
        }
    )
    config.update(extra or {})
    return config


def where(profile: KafkaProfile) -> str:
    """Where Kafka is, for messages (no secrets)."""
    return f"Kafka at {profile.bootstrap_servers} ({profile.security_protocol})"


def _built(make: Callable[[dict[str, Any]], C], profile: KafkaProfile, config: dict[str, Any]) -> C:
    """``make(config)``; a certificate or key file librdkafka refuses is a ConfigError
    naming the setting (:func:`engine.kafka.refusals.rejected_file`)."""
    try:
        return make(config)
    except KafkaException as exc:
        why = rejected_file(exc.args[0], profile)
        if why is None:
            raise
        raise ConfigError(f"Kafka settings: {why}") from None


def admin_client(profile: KafkaProfile, extra: Mapping[str, Any] | None = None) -> AdminClient:
    return _built(AdminClient, profile, client_config(profile, extra))


def consumer(
    profile: KafkaProfile,
    *,
    group: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Consumer:
    """A consumer that never commits by itself. Without ``group`` it is meant for
    ``assign()`` (a private group id is set because librdkafka requires one)."""
    config: dict[str, Any] = {
        "group.id": group or "zync-assign",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "isolation.level": "read_committed",
        **FETCH_DEFAULTS,
    }
    if group:
        config.update(GROUP_DEFAULTS)
    config.update(extra or {})
    return _built(Consumer, profile, client_config(profile, config))


def producer(
    profile: KafkaProfile,
    *,
    transactional_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Producer:
    """An idempotent producer (transactional when ``transactional_id`` is given)."""
    config: dict[str, Any] = {
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 500000,
        "queue.buffering.max.kbytes": 1024 * 1024,
        "message.timeout.ms": 60000,
    }
    if transactional_id:
        config["transactional.id"] = transactional_id
        config["transaction.timeout.ms"] = 60000
    config.update(extra or {})
    return _built(Producer, profile, client_config(profile, config))


def look_at_cluster(client: Consumer | Producer, timeout: float = 5.0) -> None:
    """The client's own request for the whole cluster's metadata, made now, before it
    is put to work (best effort: an unreachable cluster is for the next call to report).

    From it librdkafka learns the brokers by name and drops its bootstrap connection.
    Otherwise that happens in the middle of the client's first work: a consumer asks for
    an assigned topic's metadata only at its once-a-second scan and fetches nothing
    before it (0.9 s in half the starts over 200 topics); a transactional producer's
    coordinator lookup went out on the bootstrap connection, died with it, and was asked
    again 500 ms later (``init_transactions`` 0.51 s in 15 starts of 19). The whole
    cluster, not one topic: librdkafka may answer a topic's metadata at once, before
    the bootstrap connection is gone (then 11 slow starts of 60; 0 of 60 this way)."""
    try:
        client.list_topics(timeout=timeout)
    except KafkaException as exc:
        log.debug("a first look at the cluster failed: %s", exc)


def check_reachable(profile: KafkaProfile, timeout: float = 10.0) -> dict[str, Any]:
    """Ask for cluster metadata; raise :class:`KafkaUnavailable` in words if it fails.

    Returns ``{topic: partition count}`` for every topic, since the answer has them. A
    refused SASL login or TLS handshake fails at once with :class:`KafkaRefused`, naming
    the setting to fix (:mod:`engine.kafka.refusals`); anything else (nothing listening,
    say) is retried until ``timeout``.
    """
    return _look(profile, *_watched_admin(profile), timeout)


def _watched_admin(profile: KafkaProfile) -> tuple[AdminClient, ErrorLog]:
    """An admin client, and the log of its errors (where a refusal's reason is)."""
    errors = ErrorLog()
    return _built(AdminClient, profile, client_config(profile, errors=errors)), errors


def _look(profile: KafkaProfile, admin: AdminClient, errors: ErrorLog, timeout: float) -> dict[str, Any]:
    """:func:`check_reachable` with ``admin``, whose errors ``errors`` logs."""
    deadline = time.monotonic() + timeout
    wait = 0.25  # grows, so a slow but healthy cluster still gets the time it needs
    while True:
        try:
            metadata = admin.list_topics(timeout=max(0.1, min(wait, deadline - time.monotonic())))
            break
        except KafkaException as exc:
            wait *= 2
            admin.poll(0)  # serve the error callback: the reason (refused, TLS, SASL) is there
            refused = refusal(errors.specific, profile) if errors.specific else None
            if refused:
                raise KafkaRefused(f"cannot reach {where(profile)}: {refused}") from None
            if time.monotonic() < deadline:
                continue
            raise KafkaUnavailable(
                f"cannot reach {where(profile)} within {timeout:g}s: "
                f"{errors.reason(exc.args[0])}. Is the broker running? (`zync dev status`)"
            ) from None
    return {name: len(t.partitions) for name, t in metadata.topics.items()}


def topic_partitions(profile: KafkaProfile, topic: str, timeout: float = 10.0) -> list[int]:
    """The partitions of ``topic`` (raises :class:`TopicNotFound` when it does not exist)."""
    topics = check_reachable(profile, timeout)
    if topic not in topics or topics[topic] == 0:
        known = ", ".join(sorted(t for t in topics if not t.startswith("__"))) or "none"
        raise TopicNotFound(f"topic {topic!r} does not exist on {where(profile)} (topics: {known})")
    return list(range(topics[topic]))


_create_lock = threading.Lock()


@dataclass(frozen=True)
class TopicSpec:
    """A topic to have: its partitions, replication (-1: the brokers' default) and
    settings, used when it must be created."""

    partitions: int = 1
    replication: int = 1
    config: Mapping[str, str] | None = None


def ensure_topic(
    profile: KafkaProfile,
    topic: str,
    *,
    partitions: int = 1,
    replication: int = 1,
    config: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[list[int], bool]:
    """Create ``topic`` when missing (``replication`` -1: the brokers' default; ``config``:
    topic settings); returns its partitions and whether it was created."""
    spec = TopicSpec(partitions, replication, config)
    return ensure_topics(profile, {topic: spec}, timeout=timeout)[topic]


def ensure_topics(
    profile: KafkaProfile, topics: Mapping[str, TopicSpec], *, timeout: float = 10.0
) -> dict[str, tuple[list[int], bool]]:
    """Create those of ``topics`` that are missing, in one request; returns each topic's
    partitions and whether it was created. One look at the cluster for them all: a
    process delivering 400 outputs used to look 800 times, one after the other."""
    with _create_lock:
        admin, errors = _watched_admin(profile)  # one client for the looks and the creation
        known = _look(profile, admin, errors, timeout)
        missing = [
            NewTopic(
                name,
                num_partitions=spec.partitions,
                replication_factor=spec.replication,
                config=dict(spec.config or {}),
            )
            for name, spec in topics.items()
            if not known.get(name)
        ]
        created: set[str] = set()
        if missing:
            futures = admin.create_topics(missing, request_timeout=timeout)
            for name, future in futures.items():
                try:
                    future.result(timeout)
                    created.add(name)
                except KafkaException as exc:
                    error = exc.args[0]
                    if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise TopicRefused(
                            name, f"cannot create topic {name!r}: {error.str()}"
                        ) from None
            known, absent = _listed_when(
                profile, admin, errors, timeout, lambda k: [t for t in topics if not k.get(t)]
            )
            if absent:
                raise TopicNotFound(
                    f"topic {absent[0]!r} does not exist on {where(profile)} "
                    f"{timeout:g}s after it was created"
                )
        return {t: (list(range(known[t])), t in created) for t in topics}


def delete_topics(profile: KafkaProfile, topics: Iterable[str], *, timeout: float = 30.0) -> list[str]:
    """Delete those of ``topics`` that exist and wait until the cluster no longer lists
    them; returns the ones deleted. Raises :class:`KafkaUnavailable` when Kafka refuses."""
    with _create_lock:
        admin, errors = _watched_admin(profile)
        known = _look(profile, admin, errors, timeout)
        present = [t for t in dict.fromkeys(topics) if known.get(t)]
        if not present:
            return []
        for name, future in admin.delete_topics(present, request_timeout=timeout).items():
            try:
                future.result(timeout)
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise KafkaUnavailable(f"cannot delete topic {name!r}: {error.str()}") from None
        _, left = _listed_when(profile, admin, errors, timeout, lambda k: [t for t in present if k.get(t)])
        if left:
            raise KafkaUnavailable(f"topics {', '.join(left)} still listed {timeout:g}s after deletion")
        return present


def _listed_when(
    profile: KafkaProfile,
    admin: AdminClient,
    errors: ErrorLog,
    timeout: float,
    unsettled: Callable[[Mapping[str, Any]], list[str]],
) -> tuple[dict[str, Any], list[str]]:
    """Look at the cluster until ``unsettled`` finds nothing in its listing (the broker
    answering metadata learns of a topic created or deleted a moment after the controller
    (KRaft)), or ``timeout`` passes; the last listing, and what was still unsettled."""
    deadline = time.monotonic() + timeout
    while True:
        known = _look(profile, admin, errors, timeout)
        left = unsettled(known)
        if not left or time.monotonic() > deadline:
            return known, left
        time.sleep(0.1)


#: The topic id Kafka gives a topic when it has none (a broker older than topic ids).
_NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def topic_id(admin: AdminClient, topic: str, timeout: float = 10.0) -> str | None:
    """The id Kafka gave ``topic`` when it was created (a recreated topic gets another);
    None from a broker without topic ids. Raises :class:`TopicNotFound`, or
    :class:`KafkaUnavailable`."""
    try:
        found = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic]
        description = found.result(timeout)
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise TopicNotFound(f"topic {topic!r} does not exist") from None
        raise KafkaUnavailable(f"cannot describe topic {topic!r}: {error.str()}") from None
    text = str(description.topic_id) if description.topic_id is not None else ""
    return None if text in ("", _NO_TOPIC_ID) else text


def topic_config(admin: AdminClient, topic: str, name: str, timeout: float = 10.0) -> str | None:
    """The value of the topic setting ``name`` (its own or the brokers' default)."""
    resource = ConfigResource("TOPIC", topic)
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    except KafkaException as exc:
        raise KafkaUnavailable(
            f"cannot read the settings of topic {topic!r}: {exc.args[0].str()}"
        ) from None
    entry = entries.get(name)
    return None if entry is None else entry.value
