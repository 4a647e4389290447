"""Several outputs delivered at once: one :class:`~engine.deliver.loop.Delivery` per
output, each in its own thread, the outputs of one staging pool sharing one
:class:`~engine.deliver.feed.StagingFeed`; started one at a time so that two processes
delivering the same outputs never split them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from engine.deliver.delivery_options import MOST_OUTPUTS, DeliveryOptions
from engine.deliver.errors import DeliveryError
from engine.deliver.feed import StagingFeed
from engine.deliver.loop import Delivery, DeliveryOutput
from engine.deliver.status_board import DeliveryEvent, DeliveryStatus
from engine.kafka.envelope_names import DEFAULT

if TYPE_CHECKING:
    from engine.lake.pools import Lake


#: Deliveries of one process that start at once (reach Kafka, read their position back).
#: Each holds a producer for good and, while it starts, a few more Kafka clients; every
#: client takes one of the process's 1,024 thread-local keys (librdkafka's Python
#: binding), so 400 outputs starting together ran out of them.
STARTING_AT_ONCE = 16


def deliveries_of(
    lake: Lake,
    outputs: Sequence[DeliveryOutput],
    options: DeliveryOptions,
    envelope: str | None = None,
) -> list[Delivery]:
    """One :class:`Delivery` per output, in the output's envelope unless ``envelope`` is
    given (then every output's); the outputs of one staging pool share one
    :class:`~engine.deliver.feed.StagingFeed`."""
    if len(outputs) > MOST_OUTPUTS:
        raise DeliveryError(
            f"{len(outputs)} outputs in one process: one process delivers at most "
            f"{MOST_OUTPUTS} (each holds a Kafka producer, and librdkafka's Python binding "
            "has room for about 1,000 clients per process); spread them over several "
            "processes with `zync run --output TOPIC` (repeatable) or `zync to-kafka`"
        )
    staged: dict[str, set[str]] = {}
    for o in outputs:
        staged.setdefault(o.pool, set()).add(o.staged or o.topic)
    feeds = {name: StagingFeed(topics, lake=lake, name=name) for name, topics in staged.items()}
    return [
        Delivery(
            lake,
            o.pool,
            o.topic,
            options,
            envelope=envelope or o.envelope or DEFAULT,
            staged=o.staged,
            feed=feeds[o.pool],
        )
        for o in outputs
    ]


def deliver_outputs(
    lake: Lake,
    outputs: Sequence[DeliveryOutput],
    options: DeliveryOptions,
    *,
    stop: threading.Event | None = None,
    on_event: Callable[[DeliveryEvent], None] | None = None,
    continuous: bool = False,
    envelope: str | None = None,
) -> list[DeliveryStatus]:
    """Run one :class:`Delivery` per output, each in its own thread, until all return
    (or ``stop``); raises the first failure after stopping the others."""
    stop = stop or threading.Event()
    deliveries = deliveries_of(lake, outputs, options, envelope)
    run_deliveries(deliveries, stop, on_event, continuous=continuous)
    return [d.status() for d in deliveries]


def run_deliveries(
    deliveries: Sequence[Delivery],
    stop: threading.Event,
    on_event: Callable[[DeliveryEvent], None] | None = None,
    *,
    continuous: bool = False,
) -> None:
    """Run each delivery in its own thread until all return (or ``stop``); the first
    failure stops the others and is raised.

    They start one at a time, by topic name, each once the previous one holds its
    topic's lock: two processes delivering the same outputs then never split them
    (each refused one topic and stopping), the second is refused its first topic."""
    errors: list[BaseException] = []

    def work(delivery: Delivery) -> None:
        try:
            delivery.run(stop, on_event, continuous=continuous)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            stop.set()
            for other in deliveries:
                other.wake()

    prepare_topics(deliveries)
    gate = threading.BoundedSemaphore(STARTING_AT_ONCE)
    for delivery in deliveries:
        delivery.start_gate = gate
    threads = []
    for delivery in sorted(deliveries, key=lambda d: d.topic):
        if stop.is_set():
            break
        thread = threading.Thread(
            target=work, args=(delivery,), name=f"zync-to-kafka-{delivery.topic}", daemon=True
        )
        thread.start()
        threads.append(thread)
        while not delivery.claimed.wait(0.2) and thread.is_alive():
            pass
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)
    if errors:
        raise errors[0]


def prepare_topics(deliveries: Sequence[Delivery]) -> None:
    """Every delivery's topic, and the claims topic, made ready in one request per Kafka
    cluster before the deliveries start (each then takes its result, :attr:`Delivery.
    prepared`): one by one, 400 outputs took a minute to start. When Kafka cannot be
    reached or refuses, nothing is prepared: each delivery does it itself, and waits or
    says why as it always did."""
    # deferred: confluent_kafka
    from confluent_kafka import KafkaException

    from engine.deliver.claims import ensure_with_claims
    from engine.errors import ZyncError
    from engine.kafka.clients import TopicSpec

    clusters: list[list[Delivery]] = []
    for delivery in deliveries:
        same = next((c for c in clusters if c[0].kafka == delivery.kafka), None)
        if same is None:
            clusters.append([delivery])
        else:
            same.append(delivery)
    for cluster in clusters:
        wanted = {
            d.topic: TopicSpec(d.partitions_wanted, d.replication) for d in cluster
        }
        try:
            ready = ensure_with_claims(cluster[0].kafka, wanted, timeout=5.0)
        except (ZyncError, KafkaException):
            continue  # each delivery makes its own ready, and waits or says why
        for d in cluster:
            d.prepared = ready[d.topic]
