"""A starter ETL configuration for every table a connector captures (``zync init``).

A Debezium connector writes one topic per captured table. :func:`matching_topics` finds
them on the cluster by a glob (``dbserver1.inventory.*``); :func:`sample_topics` reads
each topic's newest record (one consumer, every partition at once) and says whether its
values are Debezium change events (``before``/``after``/``op``); :func:`starter_config`
writes one pass-through rule per topic — each change's key and the row after it, and a
tombstone for a delete — into one raw pool, one staging pool and one output topic per
table, which a user then edits (a denorm, a transaction rule).
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import ZyncError
from engine.kafka.codecs.formats import SchemaLookup
from engine.settings.kafka import KafkaProfile

#: The pass-through rule of a Debezium topic: the key, and the row after the change (a
#: delete gives a tombstone, which a JDBC sink applies as a delete).
DEBEZIUM_SQL = (
    "SELECT in.key AS key, CASE WHEN in.value.op = 'd' THEN NULL ELSE in.value.after END AS value"
)
#: The pass-through rule of any other topic: key and value as they are.
PLAIN_SQL = "SELECT in.key AS key, in.value AS value"
#: How long sampling waits for the newest record of every non-empty partition.
SAMPLE_SECONDS = 10.0
#: Records read at the end of each partition.
_NEWEST = 5
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class StarterError(ZyncError):
    """No configuration can be written from what was asked; the message says why."""


@dataclass(frozen=True)
class TopicSample:
    """What sampling found of a topic: its newest value, if any, was a Debezium change
    event (``debezium``: None when the topic holds no record yet)."""

    topic: str
    debezium: bool | None


def matching_topics(topics: Iterable[str], pattern: str) -> list[str]:
    """The topics ``pattern`` (a shell glob: ``*``, ``?``, ``[...]``; several separated by
    commas) names, sorted; Kafka's and the registry's own (``__*``, ``_schemas``) left
    out. Raises :class:`StarterError` when none does."""
    globs = [p.strip() for p in pattern.split(",") if p.strip()]
    known = sorted(t for t in topics if not t.startswith("_"))
    found = [t for t in known if any(fnmatch.fnmatchcase(t, g) for g in globs)]
    if not found:
        some = ", ".join(known[:8]) + (f" (+{len(known) - 8} more)" if len(known) > 8 else "")
        raise StarterError(f"no topic matches {pattern!r} (topics: {some or 'none'})")
    return found


def is_debezium(value: Any) -> bool:
    """A Debezium change event's value: an object with ``before``, ``after`` and ``op``."""
    return isinstance(value, dict) and {"before", "after", "op"} <= value.keys()


def sample_topics(
    profile: KafkaProfile,
    topics: Mapping[str, int],
    schemas: SchemaLookup | None,
    *,
    timeout: float = SAMPLE_SECONDS,
) -> dict[str, TopicSample]:
    """Each topic's newest record (``topics``: name → partitions), read with one consumer:
    is it a Debezium change event? A topic with no record yet, or none read within
    ``timeout``, samples as unknown."""
    # deferred: librdkafka
    from confluent_kafka import TopicPartition

    from engine.kafka.clients import consumer
    from engine.kafka.consume import AUTO, PartDecoder
    from engine.kafka.watermarks import watermarks

    decoder = PartDecoder(AUTO, schemas, part="value")
    found: dict[str, bool] = {}
    reader = consumer(profile, extra={"isolation.level": "read_uncommitted"})
    try:
        assigned: list[TopicPartition] = []
        last: dict[tuple[str, int], int] = {}
        for topic, count in topics.items():
            for partition, (low, high) in watermarks(reader, topic, list(range(count))).items():
                if high > low:
                    # the newest few: the newest alone may be a tombstone (or a
                    # transaction marker's offset)
                    assigned.append(TopicPartition(topic, partition, max(low, high - _NEWEST)))
                    last[(topic, partition)] = high - 1
        waiting = set(last)
        if assigned:
            reader.assign(assigned)
            deadline = time.monotonic() + timeout
            while waiting and time.monotonic() < deadline:
                for message in reader.consume(500, timeout=0.2):
                    if message.error() is not None:
                        continue
                    topic, partition = str(message.topic()), int(message.partition() or 0)
                    where = (topic, partition)
                    if (message.offset() or 0) >= last.get(where, 0):
                        waiting.discard(where)
                    if message.value() is None:
                        continue  # a tombstone says nothing of the shape
                    try:
                        value = decoder.decode(message.value())
                    except ZyncError:  # DecodeError too
                        continue
                    found[topic] = found.get(topic, False) or is_debezium(value)
    finally:
        reader.close()
    return {t: TopicSample(t, found.get(t)) for t in topics}


def output_name(template: str, topic: str) -> str:
    """An output topic's name: ``template`` with ``{topic}`` (the input topic) and
    ``{table}`` (its last dot-separated part, a Debezium topic's table)."""
    values = {"topic": topic, "table": topic.rsplit(".", 1)[-1]}
    unknown = sorted(set(_PLACEHOLDER.findall(template)) - values.keys())
    if unknown:
        raise StarterError(
            f"output name {template!r}: unknown placeholder {{{unknown[0]}}}; use {{topic}} or {{table}}"
        )
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def starter_config(
    samples: Mapping[str, TopicSample],
    *,
    name: str,
    raw: str = "Raw",
    staging: str = "Staging",
    output: str = "clean.{table}",
) -> dict[str, Any]:
    """The configuration (a YAML-ready mapping): one raw pool holding every topic, one
    pass-through rule per topic into its output topic in one staging pool. Raises
    :class:`StarterError` when two topics would share an output."""
    outputs: dict[str, str] = {}
    for topic in samples:
        out = output_name(output, topic)
        if out in outputs.values():
            other = next(t for t, o in outputs.items() if o == out)
            raise StarterError(
                f"topics {other!r} and {topic!r} would both write {out!r}: use an output name "
                "with {topic} (e.g. --output 'clean.{topic}')"
            )
        if out in samples:
            raise StarterError(f"output {out!r} is one of the input topics: choose another name")
        outputs[topic] = out
    transforms = []
    for topic, sample in samples.items():
        rule: dict[str, Any] = {
            "name": f"copy-{topic}",
            "type": "stateless",
            "in": topic,
            "out": outputs[topic],
            "sql": PLAIN_SQL if sample.debezium is False else DEBEZIUM_SQL,
        }
        if sample.debezium is not False:
            rule["where"] = "value.op IS NOT NULL"
        transforms.append(rule)
    return {
        "name": name,
        "inputs": [{"topic": t, "pool": raw} for t in samples],
        "outputs": [{"topic": outputs[t], "pool": staging} for t in samples],
        "transforms": transforms,
    }


def header(pattern: str, samples: Mapping[str, TopicSample]) -> str:
    """The comment at the top of a starter configuration: how it was made, and what
    sampling could not tell."""
    unknown = [t for t, s in samples.items() if s.debezium is None]
    plain = [t for t, s in samples.items() if s.debezium is False]
    lines = [
        f"Written by `zync init --from-topics {pattern!r}`: one pass-through rule per topic.",
        "Edit freely: join tables (type: denorm), keep source transactions whole (type: txn),",
        "filter with `where:`. Check it with `zync etl CONFIG --explain`.",
    ]
    if plain:
        lines.append(f"Not Debezium change events (copied as they are): {', '.join(plain)}.")
    if unknown:
        lines.append(
            f"Empty when sampled, taken for Debezium change events: {', '.join(unknown)}."
        )
    return "".join(f"# {line}\n" for line in lines)


def dump(config: Mapping[str, Any]) -> str:
    """The configuration as YAML, keys in the order a person reads them."""
    import yaml  # deferred: only a writer needs it

    return str(yaml.safe_dump(dict(config), sort_keys=False, width=120, allow_unicode=True))
