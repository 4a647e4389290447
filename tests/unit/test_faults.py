"""Outages and failed transactions, without services: the words the loops say, which
faults are waited for and which stop a loop (engine.kafka.outage, engine.ingest.faults,
engine.deliver.faults). The real processes are faulted in
tests/integration/test_broker_faults.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from engine.deliver.errors import DeliveryError, DeliveryFenced
from engine.deliver.faults import ABORT, RENEW, Faults, StoppedWaiting, Wedged
from engine.deliver.status_board import DeliveryEvent, DeliveryStatus, StatusBoard
from engine.ingest.buffer import Batch
from engine.ingest.faults import KafkaWatch, RegistryWait
from engine.ingest.stages import Stages
from engine.ingest.state import LoopState
from engine.kafka.clients import KafkaUnavailable
from engine.kafka.outage import BACK, UNREACHABLE, Outage
from engine.kafka.registry_client import RegistryUnreachable
from engine.settings.kafka import KafkaProfile

KAFKA = KafkaProfile(bootstrap_servers="127.0.0.1:1")


def test_an_outage_is_said_once_when_it_begins_and_once_when_it_ends() -> None:
    lines: list[tuple[str, str]] = []
    outage = Outage("Kafka at h:1", lambda kind, text: lines.append((kind, text)), prefix="t: ")
    assert outage.end() is None
    assert outage.begin("no answer within 5s", since=time.monotonic() - 3)
    assert not outage.begin("again")
    assert outage.down
    assert outage.since is not None
    lasted = outage.end()
    assert lasted is not None
    assert lasted >= 3
    assert not outage.down
    assert outage.count == 1
    assert [kind for kind, _ in lines] == [UNREACHABLE, BACK]
    assert lines[0][1].startswith("t: Kafka at h:1 unreachable since ")
    assert lines[0][1].endswith(" (no answer within 5s), waiting")
    assert lines[1][1] == "t: Kafka at h:1 back after 3s, resuming"


# ----------------------------------------------------------------------------- from-kafka


class FakeConsumer:
    def __init__(self) -> None:
        self.answers = True
        self.asked = 0

    def list_topics(self, topic: str, timeout: float) -> None:
        self.asked += 1
        if not self.answers:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get metadata"))


def notes(shared: LoopState) -> list[tuple[str, str]]:
    heard: list[tuple[str, str]] = []
    shared.listener = lambda kind, text: heard.append((kind, text))
    return heard


def test_kafka_watch_asks_when_in_doubt_and_says_what_it_found() -> None:
    shared = LoopState()
    heard = notes(shared)
    watch = KafkaWatch(KAFKA, shared, "t")
    client = FakeConsumer()
    watch.check(client, idle=0.0)  # records flow: nothing to ask
    assert client.asked == 0
    watch.error_cb(
        KafkaError(KafkaError._TRANSPORT, "h:1/bootstrap: Connect failed: Connection refused")
    )
    watch.error_cb(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    client.answers = False
    watch.check(client, idle=0.0)  # the error callback made it wonder
    assert watch.down
    assert heard == [(UNREACHABLE, heard[0][1])]
    assert "Kafka at 127.0.0.1:1 unreachable since" in heard[0][1]
    assert "(Connection refused), waiting" in heard[0][1]
    client.answers = True
    assert watch.probe(client)
    assert not watch.down
    assert heard[1][0] == BACK
    assert "Kafka at 127.0.0.1:1 back after" in heard[1][1]
    assert shared.snapshot().notes == tuple(text for _, text in heard)


def test_kafka_watch_stops_the_loop_on_a_fatal_error() -> None:
    watch = KafkaWatch(KAFKA, LoopState(), "t")
    watch.error_cb(KafkaError(KafkaError._FATAL, "fenced", fatal=True))
    with pytest.raises(KafkaUnavailable, match="fatal error"):
        watch.check(FakeConsumer(), idle=0.0)


class FakeMessage:
    def __init__(self, error: KafkaError) -> None:
        self._error = error

    def error(self) -> KafkaError:
        return self._error

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 0


def test_record_errors_are_noted_once_and_fatal_ones_stop_the_loop() -> None:
    shared = LoopState()
    watch = KafkaWatch(KAFKA, shared, "t")
    lost = FakeMessage(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, "not leader"))
    watch.message_errors([lost, lost])  # type: ignore[list-item]
    watch.message_errors([lost])  # type: ignore[list-item]
    assert shared.snapshot().notes == ("t[0]: not leader",)
    with pytest.raises(KafkaUnavailable):
        watch.message_errors([FakeMessage(KafkaError(KafkaError._FATAL, "x", fatal=True))])  # type: ignore[list-item]


def unreachable() -> RegistryUnreachable:
    return RegistryUnreachable(
        "cannot reach Schema Registry at http://r", "Schema Registry at http://r", "refused"
    )


def test_a_registry_outage_holds_the_batch_back_until_it_answers() -> None:
    shared = LoopState()
    heard = notes(shared)
    attempts: list[int] = []

    def prepare(batch: Any) -> Any:
        attempts.append(1)
        if len(attempts) < 3:
            raise unreachable()
        return "prepared"

    wait = RegistryWait(shared, threading.Event(), prepare)
    wait_started = time.monotonic()
    assert wait.prepare(Batch("raw", [], 0)) == "prepared"
    assert time.monotonic() - wait_started < 10
    kinds = [kind for kind, _ in heard]
    assert kinds == [UNREACHABLE, "note", BACK]
    assert heard[0][1].startswith("Schema Registry at http://r unreachable since ")
    assert heard[0][1].endswith("(refused), waiting")
    assert heard[2][1].startswith("Schema Registry at http://r back after ")


def test_a_stop_during_a_registry_outage_drops_that_batch_and_the_later_ones() -> None:
    shared = LoopState()
    stop = threading.Event()

    def prepare(batch: Any) -> Any:
        stop.set()
        raise unreachable()

    written: list[Any] = []
    stages = Stages(shared, RegistryWait(shared, stop, prepare).prepare, written.append)
    stages.start()
    for _ in range(3):
        stages.hand_over(Batch("raw", [], 0))
    stages.finish(graceful=True)
    assert written == []
    assert stages.inflight == 0
    assert shared.error is None
    assert any("read again on the next start" in note for note in shared.snapshot().notes)


# ----------------------------------------------------------------------------- to-kafka


def board() -> tuple[StatusBoard, list[DeliveryEvent]]:
    events: list[DeliveryEvent] = []
    status = StatusBoard(DeliveryStatus(topic="out", pool="S", envelope="jdbc", format="json"))
    status.on_event = events.append
    return status, events


def faults(stop: threading.Event | None = None) -> tuple[Faults, list[DeliveryEvent]]:
    status, events = board()
    return Faults(KAFKA, "out", "zync-to-kafka-out", status, stop or threading.Event()), events


def test_a_fenced_producer_is_another_to_kafka_unless_the_broker_was_out() -> None:
    fenced = KafkaError(KafkaError._FENCED, "producer fenced", fatal=True)
    handler, events = faults()
    with pytest.raises(DeliveryFenced, match="another to-kafka took over"):
        handler.recovery(fenced, handler.troubles)
    before = handler.troubles
    handler.error_cb(KafkaError(KafkaError._TRANSPORT, "h:1/1: Connect to h:1 failed: refused"))
    assert handler.recovery(fenced, before) == RENEW
    assert events[-1].kind == "retrying"
    assert "starting the producer again" in events[-1].message


def test_abortable_errors_are_retried_and_others_are_fatal() -> None:
    handler, _ = faults()
    abortable = KafkaError(KafkaError._TIMED_OUT, "1 message(s) timed out", txn_requires_abort=True)
    assert handler.recovery(abortable, handler.troubles) == ABORT
    with pytest.raises(DeliveryError, match="topic 'out': bad"):
        handler.recovery(KafkaError(KafkaError.INVALID_CONFIG, "bad"), handler.troubles)


class FakeProducer:
    def __init__(self, timeouts: int, answers: bool) -> None:
        self.timeouts = timeouts
        self.answers = answers
        self.calls = 0

    def commit(self, timeout: float) -> None:
        self.calls += 1
        if self.calls <= self.timeouts:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush", retriable=True))

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        if not self.answers:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "metadata"))


def test_a_commit_is_waited_for_through_an_outage() -> None:
    handler, events = faults()
    producer = FakeProducer(timeouts=2, answers=False)
    handler.wait(producer, producer.commit, "committing a transaction")  # type: ignore[arg-type]
    assert producer.calls == 3
    assert [e.kind for e in events] == [UNREACHABLE, BACK]
    assert "out: Kafka at 127.0.0.1:1 unreachable since" in events[0].message
    assert "(committing a transaction: no answer within 5s), waiting" in events[0].message
    assert handler.board.get().last_error is None


def test_a_slow_commit_is_no_outage() -> None:
    handler, events = faults()
    producer = FakeProducer(timeouts=2, answers=True)
    handler.wait(producer, producer.commit, "committing a transaction")  # type: ignore[arg-type]
    assert events == []


def test_a_stop_ends_the_wait_for_an_unreachable_broker() -> None:
    stop = threading.Event()
    stop.set()
    handler, _ = faults(stop)
    producer = FakeProducer(timeouts=100, answers=False)
    call: Callable[[float], None] = producer.commit
    with pytest.raises(StoppedWaiting):
        handler.wait(producer, call, "committing a transaction")  # type: ignore[arg-type]
    assert producer.calls == 1


def test_positions_are_read_back_once_the_broker_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.deliver.faults as module

    handler, events = faults()
    answers = iter([False, False, True])  # after the failed read: out, out, back
    reads: list[int] = []

    def read() -> dict[int, None]:
        reads.append(1)
        if len(reads) == 1:
            raise KafkaUnavailable("cannot read offsets of out[0]: timed out")
        return {0: None}

    monkeypatch.setattr(module, "READ_AGAIN", 0.01)
    monkeypatch.setattr(handler, "_reachable", lambda: next(answers))
    assert handler.read_back(read) == {0: None}
    assert len(reads) == 2  # not while the broker was out
    assert [e.kind for e in events] == [UNREACHABLE, BACK]
    assert "(reading the positions back: no answer within 5s), waiting" in events[0].message


def test_a_new_topics_leader_being_elected_is_waited_for_not_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Just after a topic is created its broker may answer "not leader" for a while (CI
    saw it longer than three reads in a row): the read is made again after a pause, and
    such answers never count towards the attempts that end in a failure."""
    import engine.deliver.faults as module
    from engine.kafka.clients import passing

    monkeypatch.setattr(module, "NOT_YET_PAUSE", 0.001)
    monkeypatch.setattr(module, "READ_AGAIN", 0.004)
    handler, events = faults()
    monkeypatch.setattr(handler, "_reachable", lambda: True)
    not_leader = KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)
    assert passing(not_leader)
    assert not passing(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    reads: list[int] = []

    def read() -> dict[int, None]:
        reads.append(1)
        if len(reads) <= 3 * module.READ_ATTEMPTS:
            raise KafkaUnavailable(
                f"cannot read offsets of out[0]: {not_leader.str()}", passing=True
            )
        return {0: None}

    assert handler.read_back(read) == {0: None}
    assert len(reads) == 3 * module.READ_ATTEMPTS + 1
    assert {e.kind for e in events} == {"retrying"}  # said, and no outage: the broker answers
    assert "Not leader for partition" in events[0].message

    other = 0

    def refused() -> dict[int, None]:
        nonlocal other
        other += 1
        raise KafkaUnavailable("cannot read offsets of out[0]: Broker: Topic authorization failed")

    with pytest.raises(KafkaUnavailable, match="authorization"):
        handler.read_back(refused)
    assert other == module.READ_ATTEMPTS


def test_errors_that_pass_are_waited_for_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.deliver.faults as module

    monkeypatch.setattr(module, "NOT_YET_PAUSE", 0.001)
    monkeypatch.setattr(module, "PASSING_FOR", 0.05)
    handler, _ = faults()
    monkeypatch.setattr(handler, "_reachable", lambda: True)

    def read() -> dict[int, None]:
        raise KafkaUnavailable("cannot read offsets of out[0]: Broker: Not leader", passing=True)

    with pytest.raises(KafkaUnavailable, match="Not leader"):
        handler.read_back(read)


def test_a_call_that_does_not_return_gives_its_producer_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """send_offsets_to_transaction may never return (librdkafka#5456, #5511): watched,
    it is given up after WEDGED_AFTER, and what it raises or returns is passed on."""
    import engine.deliver.faults as module

    monkeypatch.setattr(module, "STEP", 0.02)
    monkeypatch.setattr(module, "WEDGED_AFTER", 0.1)
    handler, events = faults()
    producer = FakeProducer(timeouts=0, answers=True)
    forever = threading.Event()
    with pytest.raises(Wedged):
        handler.watch(producer, forever.wait, "committing the position")  # type: ignore[arg-type]
    forever.set()
    handler.watch(producer, lambda: None, "committing the position")  # type: ignore[arg-type]

    def fenced() -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    with pytest.raises(KafkaException, match="fenced"):
        handler.watch(producer, fenced, "committing the position")  # type: ignore[arg-type]
    assert events == []


def test_a_wedged_transaction_makes_the_producer_again() -> None:
    from engine.deliver.transactions import Transactions

    status, events = board()
    out = Transactions(KAFKA, "out", status)
    renewed: list[str] = []
    out.output.recover = renewed.append  # type: ignore[method-assign]
    assert out._failed(Wedged("committing the position"), out.faults.troubles, 0) == 1
    assert renewed == [RENEW]
    assert events[-1].kind == "retrying"
    assert "(committing the position); starting the producer again" in events[-1].message


def test_a_retriable_answer_is_asked_again_and_a_fatal_one_raised() -> None:
    """A broker just started answers init_transactions "coordinator load in progress"
    (retriable) for a moment: the call is made again, and no outage is reported."""
    handler, events = faults()
    calls: list[float] = []

    def init(timeout: float) -> None:
        calls.append(timeout)
        if len(calls) <= 2:
            raise KafkaException(
                KafkaError(
                    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                    "Failed to initialize Producer ID: Broker: Coordinator load in progress",
                    retriable=True,
                )
            )

    handler.wait(FakeProducer(0, answers=True), init, "starting the producer")  # type: ignore[arg-type]
    assert len(calls) == 3
    assert events == []
    refused = KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "denied", fatal=True)

    def denied(timeout: float) -> None:
        raise KafkaException(refused)

    with pytest.raises(KafkaException):
        handler.wait(FakeProducer(0, answers=True), denied, "starting the producer")  # type: ignore[arg-type]


def test_a_transactional_producer_looks_at_the_cluster_before_init_transactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """librdkafka drops its bootstrap connection once metadata names the brokers; a
    coordinator lookup sent on it before then dies with it and is asked again 500 ms
    later. The producer's own metadata request comes first, so the lookup never does."""
    import engine.kafka.clients as clients
    from engine.deliver.transactions import Transactions

    calls: list[str] = []

    class Recording:
        def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
            calls.append(f"list_topics {topic or 'of the cluster'}")

        def init_transactions(self, timeout: float) -> None:
            calls.append("init_transactions")

    monkeypatch.setattr(clients, "producer", lambda *args, **kwargs: Recording())
    status, _ = board()
    Transactions(KAFKA, "out", status).start()
    assert calls == ["list_topics of the cluster", "init_transactions"]


def test_a_cluster_that_does_not_answer_the_look_is_left_to_the_next_call() -> None:
    from engine.kafka.clients import look_at_cluster

    look_at_cluster(FakeProducer(0, answers=False), timeout=0.01)  # type: ignore[arg-type]


def test_a_refused_claims_topic_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both topics are made ready in one look; a refusal of the claims topic says what
    to do about it, one of the output topic is Kafka's own words."""
    import engine.kafka.clients as clients
    from engine.deliver.claims import CLAIMS_TOPIC
    from engine.deliver.delivery_options import DeliveryOptions
    from engine.deliver.delivery_run import _topic_ready
    from engine.deliver.loop import Delivery
    from engine.kafka.clients import TopicRefused

    looks: list[list[str]] = []
    refused = CLAIMS_TOPIC

    def ensure_topics(profile: KafkaProfile, topics: dict[str, Any], **_: Any) -> Any:
        looks.append(sorted(topics))
        raise TopicRefused(refused, f"cannot create topic {refused!r}: Broker: Topic authorization failed")

    monkeypatch.setattr(clients, "ensure_topics", ensure_topics)
    options = DeliveryOptions(kafka=KAFKA, format="json")
    delivery = Delivery(object(), "Staging", "out", options)  # type: ignore[arg-type]
    with pytest.raises(DeliveryError, match=r"create it \(compacted, one partition\)"):
        _topic_ready(delivery)
    assert looks == [sorted(["out", CLAIMS_TOPIC])]
    refused = "out"
    with pytest.raises(TopicRefused, match="cannot create topic 'out'"):
        _topic_ready(delivery)
