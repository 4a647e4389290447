"""What from-kafka is asked to do: its inputs (topic → pool, from flags or a YAML file's
``inputs:``), its options (batching, formats, bad records, groups, shaper, upkeep) and
the consumer group a pool's positions are mirrored to by default."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from engine.ingest.errors import IngestError
from engine.settings.yaml_text import load_yaml

ON_ERROR = ("deadletter", "fail")
FORMATS = ("auto", "avro", "connect-json", "json")


@dataclass(frozen=True)
class IngestInput:
    """One topic and the pool it goes to."""

    topic: str
    pool: str


@dataclass(frozen=True)
class IngestOptions:
    """How :class:`~engine.ingest.loop.Ingest` batches, decodes, reacts to bad records and
    keeps pools tidy.

    * ``max_records``/``max_bytes``/``interval``: a batch is committed when it holds that
      many records or bytes of values, or when its oldest record has waited that many
      seconds (so a record waits about ``interval`` plus one commit at most; the decision
      is :class:`engine.ingest.buffer.Buffers`');
    * ``linger``: when the consumer has caught up (a poll brought less than it asked
      for), a batch is committed once its oldest record has waited this many seconds — a
      trickle of records is committed at once, while a backlog still makes large
      batches;
    * ``exit_after``: seconds without any record after which
      :meth:`~engine.ingest.loop.Ingest.run` returns (``None``: run until stopped; in a
      workers group, counted from the latest rebalance);
    * ``value_format``/``key_format``: one of :data:`FORMATS`;
    * ``on_error``: ``deadletter`` or ``fail`` (see :mod:`engine.ingest`);
    * ``group``: the consumer group positions are mirrored to (``None``: ``zync-<pool>``
      per pool, or the workers group; ``""``: no mirroring);
    * ``workers_group``: share the partitions with other processes through this consumer
      group (``None``: assign every partition to this process). Positions are still read
      from the pools only; the mirror then goes to this group, through the subscribing
      consumer (``group`` naming another group mirrors there instead, from an assign-mode
      consumer: a group no consumer subscribes to);
    * ``shaper``: the SQL text of a shaper (:mod:`engine.lake.batch_shaper`), ``shaper_source``
      names it in messages;
    * ``create_pools``: create missing pools instead of failing;
    * ``checkpoint_every``/``compact_small_files``: the pools' upkeep
      (:class:`engine.lake.maintenance.Upkeep`; 0 disables);
    * ``pause_gc``: pause Python's automatic garbage collection while running and collect
      between commits instead (faster; process-wide while the loop runs).
    """

    max_records: int = 100_000
    max_bytes: int = 64 * 2**20
    interval: float = 1.0
    linger: float = 0.0
    exit_after: float | None = None
    value_format: str = "auto"
    key_format: str = "auto"
    on_error: str = "deadletter"
    group: str | None = None
    workers_group: str | None = None
    shaper: str | None = None
    shaper_source: str = "<shaper>"
    create_pools: bool = False
    checkpoint_every: int = 100
    compact_small_files: int = 200
    pause_gc: bool = True

    def __post_init__(self) -> None:
        if self.max_records < 1:
            raise IngestError("max_records must be at least 1")
        if self.max_bytes < 1:
            raise IngestError("max_bytes must be at least 1")
        if self.interval <= 0:
            raise IngestError("interval must be positive")
        if self.linger < 0:
            raise IngestError("linger must not be negative")
        if self.exit_after is not None and self.exit_after <= 0:
            raise IngestError("exit_after must be positive")
        if self.workers_group is not None and not self.workers_group.strip():
            raise IngestError("workers group must be a non-empty consumer group name")
        if self.on_error not in ON_ERROR:
            raise IngestError(
                f"on_error must be one of {', '.join(ON_ERROR)} (got {self.on_error!r})"
            )
        for name in ("value_format", "key_format"):
            value = getattr(self, name)
            if value not in FORMATS:
                raise IngestError(
                    f"{name.replace('_', ' ')} must be one of {', '.join(FORMATS)} (got {value!r})"
                )


def default_group(pool: str) -> str:
    """The consumer group from-kafka mirrors a pool's positions to: ``zync-<pool>``."""
    return f"zync-{pool}"


def load_inputs(path: str | Path) -> list[IngestInput]:
    """The ``inputs:`` list of a YAML file (an ETL configuration): ``{topic, pool}`` each.

    Only ``inputs`` is read; the rest of the file belongs to the ETL. Each entry must
    have exactly ``topic`` and ``pool`` (strings); anything else is an error naming the
    file and the entry.
    """
    path = Path(path)
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise IngestError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise IngestError(f"{path}:{where}: invalid YAML: {problem}") from None
    if not isinstance(data, dict) or "inputs" not in data:
        raise IngestError(f"{path}: no `inputs:` list (e.g. `inputs: [{{topic: T, pool: Raw}}]`)")
    entries = data["inputs"]
    if not isinstance(entries, list) or not entries:
        raise IngestError(f"{path}: `inputs` must be a non-empty list of {{topic, pool}}")
    inputs = []
    for i, entry in enumerate(entries, 1):
        where = f"{path}: inputs[{i}]"
        if not isinstance(entry, dict):
            raise IngestError(f"{where}: expected a mapping with topic and pool")
        unknown = sorted(set(entry) - {"topic", "pool"})
        if unknown:
            raise IngestError(f"{where}: unknown key {unknown[0]!r}; an input has topic and pool")
        for key in ("topic", "pool"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise IngestError(f"{where}: `{key}` must be a non-empty string")
        inputs.append(IngestInput(entry["topic"].strip(), entry["pool"].strip()))
    return inputs
