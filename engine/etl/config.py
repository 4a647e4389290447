"""The ETL configuration: a strict, typed model of the YAML file.

A configuration names its inputs (topics of raw pools), its outputs (topics of ONE
staging pool) and its rules (``transforms``), tried in file order: every input record
is consumed by the first rule whose topic and ``where`` match it, and a record no rule
matches is marked processed with no output (docs/design.md#etl-configuration)::

    name: invoices                  # identifies this ETL's markers and cursors
    inputs:
      - {topic: Invoices, pool: Raw}
      - {topic: InvoiceStatus, pool: Raw}
    outputs:                        # `output:` (a single mapping) is accepted too
      - {topic: NewInvoices, pool: Staging}
      - {topic: InvoiceChanges, pool: Staging, from: NewInvoices, envelope: debezium}
    transforms:
      - type: denorm
        name: new-invoice           # optional; markers name the rule by it
        where: value.op IN ('c', 'r')
        left: Invoices
        right: InvoiceStatus
        join-on: left.value.after.ID = right.value.after.InvoiceID
        out: NewInvoices
        expire-after: 1h
        sql: SELECT left.key AS key, named_struct(...) AS value

Rule types and their keys:

``denorm`` — ``left``, ``right`` (two different input topics), ``join-on`` (a Spark SQL
    boolean over the struct columns ``left`` and ``right``), ``out``, ``sql``, optional
    ``where`` and ``expire-after``. A left record waits (pending) for a right record
    satisfying ``join-on`` and pending right records wait for left ones; when they meet,
    both are marked processed and ``sql`` is evaluated once per matching pair.
``stateless`` — ``in`` (one input topic), ``out``, ``sql``, optional ``where``. Every
    matching record is processed at once; ``sql`` may yield zero or more rows per record
    (a ``WHERE`` clause, ``explode``).
``txn`` — ``in`` (a topic or a list of topics), ``txn-id`` (an expression over the
    envelope giving the transaction id; records whose id is NULL do not match the rule),
    ``complete-when`` (an aggregate over the bundle's records, e.g.
    ``bool_or(value.done)``), ``out``, ``sql``, optional ``where`` and ``expire-after``.
    Records are bundled by transaction id; a bundle's outputs appear, all in one commit,
    only once it is complete. ``sql`` sees one row per bundle with the struct column
    ``bundle``: ``txn_id`` and ``records`` (the bundle's envelopes ordered by seqno). The
    input topics' types are merged, so ``records`` has one element type.

    **Debezium transaction metadata** (``provide.transaction.metadata=true``): write
    ``complete-when: debezium`` and ``transaction-topic: <prefix>.transaction`` (an input
    topic too). ``txn-id`` then defaults to ``value.transaction.id`` (the ``transaction``
    block Debezium adds to each change event); the BEGIN/END events of the transaction
    topic are matched by their ``value.id``. A bundle is complete when its END event has
    arrived and, for every entry of END's ``data_collections`` that belongs to one of the
    rule's ``in`` topics (topic ``T`` holds collection ``C`` when ``T == C`` or ``T`` ends
    with ``.C``, Debezium's topic naming), the bundle holds exactly ``event_count`` events
    of ``T`` — across topics and partitions. The BEGIN/END events are consumed with the
    bundle; ``records`` holds the change events only. Do not let ``where`` filter a
    transaction's change events out, or its counts can never be met (it expires).

An output may name the ``envelope`` to-kafka delivers it in (``jdbc``, the default,
``differential``, ``materialize`` or ``debezium``; ``--envelope`` overrides it). An output
with ``from: T`` is delivered only: to-kafka sends the records the rules stage for the
output ``T`` to this topic too (say, in another envelope); rules cannot write to it.

Every rule's ``sql`` is a SELECT without FROM, evaluated per match over a view whose
columns are structs named ``left``/``right`` (denorm), ``in`` (stateless) or ``bundle``
(txn); ``FROM bundle`` is accepted in a txn rule's SELECT. It must yield columns ``key``
and ``value`` (``NULL AS value`` is a tombstone). Each struct is an envelope: ``seqno``,
``kafka`` (topic, partition, offset, timestamp), ``key``, ``value``.

``expire-after`` (denorm and txn) is a duration such as ``30s``, ``15m``, ``1h``, ``2d`` or
``1h30m``: a pending record expires when the newest Kafka timestamp seen on its topic is
more than that newer than its own (event time); it is marked ``expired``, gives no
output and no longer holds the cursor back. A txn bundle expires as a whole.

Loading checks everything that needs no data: unknown keys, types, durations, topics
that are not inputs or outputs, outputs in different pools. :mod:`engine.etl.rules`
checks the rest (pools in the lake, SQL against the typed input schemas) before
anything is written.
"""

from __future__ import annotations

import difflib
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from engine.durations import parse_timedelta
from engine.errors import ZyncError

DEBEZIUM = "debezium"
DEBEZIUM_TXN_ID = "value.transaction.id"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


class EtlConfigError(ZyncError, ValueError):
    """The ETL configuration is wrong; the message names the file, rule and text."""


Duration = Annotated[timedelta, Field(description="e.g. 30s, 15m, 1h")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Endpoint(_Strict):
    """An input or output: a topic in a pool of the lake."""

    topic: str
    pool: str

    @field_validator("topic", "pool")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


class Output(Endpoint):
    """An output: a topic in the staging pool, delivered by to-kafka in ``envelope``
    (None: the default). With ``from``, the topic is delivery only: it carries the
    records staged for the output ``from``."""

    envelope: str | None = None
    from_: str | None = Field(default=None, alias="from")

    @field_validator("envelope")
    @classmethod
    def _envelope(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # deferred: the envelopes import the codecs (pyarrow, fastavro)
        from engine.deliver.envelopes import envelope_named

        return envelope_named(value).name

    @field_validator("from_")
    @classmethod
    def _from(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value

    @property
    def staged(self) -> str:
        """The staging topic whose records this output carries."""
        return self.from_ or self.topic


class _Rule(_Strict):
    name: str | None = None
    where: str | None = None
    out: str
    sql: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.match(value):
            raise ValueError(
                f"invalid rule name {value!r}: use letters, digits, '_', '.' and '-'"
            )
        return value

    @field_validator("where", "sql")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value.strip() if value is not None else None

    @property
    def topics(self) -> tuple[str, ...]:
        """The input topics whose records this rule may consume."""
        raise NotImplementedError

    @property
    def expire(self) -> timedelta | None:
        return None


class DenormRule(_Rule):
    """Join a left record with a right record (see the module docstring)."""

    type: Literal["denorm"]
    left: str
    right: str
    join_on: str = Field(alias="join-on")
    expire_after: Duration | None = Field(default=None, alias="expire-after")

    @field_validator("expire_after", mode="before")
    @classmethod
    def _expire(cls, value: Any) -> timedelta | None:
        return None if value is None else parse_timedelta(value)

    @field_validator("join_on")
    @classmethod
    def _join_on(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    @model_validator(mode="after")
    def _sides(self) -> DenormRule:
        if self.left == self.right:
            raise ValueError(f"left and right must be different topics (both are {self.left!r})")
        return self

    @property
    def topics(self) -> tuple[str, ...]:
        return (self.left, self.right)

    @property
    def expire(self) -> timedelta | None:
        return self.expire_after


class StatelessRule(_Rule):
    """One input record → zero or more outputs (see the module docstring)."""

    type: Literal["stateless"]
    in_: str = Field(alias="in")

    @property
    def topics(self) -> tuple[str, ...]:
        return (self.in_,)


class TxnRule(_Rule):
    """Transaction bundles, complete or not at all (see the module docstring)."""

    type: Literal["txn"]
    in_: list[str] = Field(alias="in", min_length=1)
    txn_id: str | None = Field(default=None, alias="txn-id")
    complete_when: str = Field(alias="complete-when")
    transaction_topic: str | None = Field(default=None, alias="transaction-topic")
    expire_after: Duration | None = Field(default=None, alias="expire-after")

    @field_validator("expire_after", mode="before")
    @classmethod
    def _expire(cls, value: Any) -> timedelta | None:
        return None if value is None else parse_timedelta(value)

    @field_validator("in_", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _mode(self) -> TxnRule:
        if self.debezium:
            if not self.transaction_topic:
                raise ValueError(
                    "`complete-when: debezium` needs `transaction-topic` "
                    "(Debezium's <prefix>.transaction topic)"
                )
            if self.transaction_topic in self.in_:
                raise ValueError(
                    f"transaction-topic {self.transaction_topic!r} must not be listed in `in`"
                )
        else:
            if self.transaction_topic:
                raise ValueError("`transaction-topic` is only used with `complete-when: debezium`")
            if not self.txn_id:
                raise ValueError(
                    "a txn rule needs `txn-id` (an expression giving the transaction id, "
                    "e.g. value.txn)"
                )
        if len(set(self.in_)) != len(self.in_):
            raise ValueError("`in` lists a topic twice")
        return self

    @property
    def debezium(self) -> bool:
        return self.complete_when.strip().lower() == DEBEZIUM

    @property
    def txn_id_expr(self) -> str:
        return self.txn_id or DEBEZIUM_TXN_ID

    @property
    def topics(self) -> tuple[str, ...]:
        extra = (self.transaction_topic,) if self.transaction_topic else ()
        return (*self.in_, *extra)

    @property
    def expire(self) -> timedelta | None:
        return self.expire_after


Rule = Annotated[DenormRule | StatelessRule | TxnRule, Field(discriminator="type")]


class EtlConfig(_Strict):
    """One ETL: inputs, outputs (one staging pool) and rules in file order."""

    name: str
    inputs: list[Endpoint] = Field(min_length=1)
    outputs: list[Output] = Field(min_length=1)
    transforms: list[Rule] = Field(min_length=1)
    #: The file this configuration came from (for messages), when loaded from one.
    source: str = Field(default="<config>", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _single_output(cls, data: Any) -> Any:
        if isinstance(data, dict) and "output" in data:
            if "outputs" in data:
                raise ValueError("give either `output` or `outputs`, not both")
            data = dict(data)
            single = data.pop("output")
            data["outputs"] = single if isinstance(single, list) else [single]
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value) or "/" in value:
            raise ValueError(
                f"invalid ETL name {value!r}: use letters, digits, '_', '.' and '-'"
            )
        return value

    # -- derived ----------------------------------------------------------------------

    @property
    def staging_pool(self) -> str:
        return self.outputs[0].pool

    @property
    def input_topics(self) -> list[str]:
        return [i.topic for i in self.inputs]

    @property
    def output_topics(self) -> list[str]:
        """The topics rules write to (outputs with ``from`` are delivered only)."""
        return [o.topic for o in self.outputs if o.from_ is None]

    def envelope_of(self, topic: str) -> str | None:
        """The envelope output ``topic`` is delivered in (None: the default)."""
        for output in self.outputs:
            if output.topic == topic:
                return output.envelope
        raise KeyError(topic)

    def pool_of(self, topic: str) -> str:
        for endpoint in self.inputs:
            if endpoint.topic == topic:
                return endpoint.pool
        raise KeyError(topic)

    @property
    def raw_pools(self) -> list[str]:
        return sorted({i.pool for i in self.inputs})

    def rule_label(self, index: int) -> str:
        """The rule's name in markers: its ``name``, else its 1-based position."""
        rule = self.transforms[index]
        return rule.name or str(index + 1)

    def describe_rule(self, index: int) -> str:
        """``rule 2 (stateless 'status-updates')`` for messages."""
        rule = self.transforms[index]
        named = f" {rule.name!r}" if rule.name else ""
        return f"rule {index + 1} ({rule.type}{named})"


# ----------------------------------------------------------------------------- loading


def load_config(path: str | Path) -> EtlConfig:
    """Read and check an ETL configuration file; raises :class:`EtlConfigError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EtlConfigError(f"{path}: no such ETL configuration file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise EtlConfigError(f"{path}: cannot read: {reason}") from None
    return parse_config(text, source=str(path))


def parse_config(text: str, *, source: str = "<config>") -> EtlConfig:
    """Parse the YAML text of an ETL configuration; raises :class:`EtlConfigError`."""
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f": line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise EtlConfigError(f"{source}{where}: invalid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise EtlConfigError(f"{source}: expected a mapping with name, inputs, outputs, transforms")
    try:
        config = EtlConfig.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise EtlConfigError(_describe(exc, data, node, source)) from None
    _check_references(config, node)
    return config


def _check_references(config: EtlConfig, node: yaml.Node | None) -> None:
    """Topics named by rules are inputs/outputs; one staging pool; unique rule names."""
    source = config.source
    inputs = config.input_topics
    outputs = config.output_topics
    seen: set[str] = set()
    for topic in inputs:
        if topic in seen:
            raise EtlConfigError(f"{source}: input topic {topic!r} is listed twice")
        seen.add(topic)
    pools = sorted({o.pool for o in config.outputs})
    if len(pools) > 1:
        line = _line(node, ("outputs",)) or _line(node, ("output",))
        raise EtlConfigError(
            f"{source}{_at(line)}: all outputs must go to one staging pool, "
            f"they name {', '.join(repr(p) for p in pools)}"
        )
    every = [o.topic for o in config.outputs]
    if len(set(every)) != len(every):
        raise EtlConfigError(f"{source}: an output topic is listed twice")
    delivered_only = {o.topic: o.from_ for o in config.outputs if o.from_ is not None}
    for index, output in enumerate(config.outputs):
        if output.from_ is not None and output.from_ not in outputs:
            line = _line(node, ("outputs", index, "from")) or _line(node, ("output", "from"))
            raise EtlConfigError(
                f"{source}{_at(line)}: output {output.topic!r}: `from` names topic "
                f"{output.from_!r}, which is not an output the rules write"
                f"{_suggest(output.from_, outputs)} (outputs: {', '.join(outputs)})"
            )
    names: set[str] = set()
    for index, rule in enumerate(config.transforms):
        where = f"{source}{_at(_line(node, ('transforms', index)))}: {config.describe_rule(index)}"
        for key, topic in _rule_topics(rule):
            if topic not in inputs:
                line = _line(node, ("transforms", index, key))
                raise EtlConfigError(
                    f"{source}{_at(line)}: {config.describe_rule(index)}: `{key}` names "
                    f"topic {topic!r}, which is not an input"
                    f"{_suggest(topic, inputs)} (inputs: {', '.join(inputs)})"
                )
        if rule.out in delivered_only:
            line = _line(node, ("transforms", index, "out"))
            raise EtlConfigError(
                f"{source}{_at(line)}: {config.describe_rule(index)}: `out` names topic "
                f"{rule.out!r}, which is delivered from {delivered_only[rule.out]!r}: "
                f"write to {delivered_only[rule.out]!r}"
            )
        if rule.out not in outputs:
            line = _line(node, ("transforms", index, "out"))
            raise EtlConfigError(
                f"{source}{_at(line)}: {config.describe_rule(index)}: `out` names topic "
                f"{rule.out!r}, which is not an output{_suggest(rule.out, outputs)} "
                f"(outputs: {', '.join(outputs)})"
            )
        label = config.rule_label(index)
        if label in names:
            raise EtlConfigError(f"{where}: rule name {label!r} is used twice")
        names.add(label)


def _rule_topics(rule: Any) -> list[tuple[str, str]]:
    if isinstance(rule, DenormRule):
        return [("left", rule.left), ("right", rule.right)]
    if isinstance(rule, StatelessRule):
        return [("in", rule.in_)]
    found = [("in", t) for t in rule.in_]
    if rule.transaction_topic:
        found.append(("transaction-topic", rule.transaction_topic))
    return found


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _at(line: int | None) -> str:
    return f": line {line}" if line else ""


def _line(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the deepest YAML node along ``loc`` (keys and indexes)."""
    best: int | None = None if node is None else node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    best = key.start_mark.line + 1
                    node = value
                    break
            else:
                continue  # e.g. a union tag in the pydantic location: skip it
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
            best = node.start_mark.line + 1
        else:
            continue
    return best


_TYPE_LABELS = {"denorm", "stateless", "txn"}


def _describe(exc: ValidationError, data: dict[str, Any], node: yaml.Node | None, source: str) -> str:
    """One line for the first pydantic error: file, line, rule and what is wrong."""
    errors = exc.errors()
    # a misspelt key explains the "missing" error it causes: report it first
    first = min(errors, key=lambda e: 0 if e["type"] == "extra_forbidden" else 1)
    loc = tuple(first["loc"])
    line = _line(node, loc)
    prefix = f"{source}{_at(line)}"
    rule_part = ""
    if len(loc) >= 2 and loc[0] == "transforms" and isinstance(loc[1], int):
        index = loc[1]
        raw = data.get("transforms") or []
        rule = raw[index] if index < len(raw) and isinstance(raw[index], dict) else {}
        kind = rule.get("type")
        name = rule.get("name")
        kind_text = f"{kind}" if isinstance(kind, str) else "rule"
        named = f" {name!r}" if isinstance(name, str) else ""
        rule_part = f"rule {index + 1} ({kind_text}{named}): "
        loc = tuple(p for p in loc[2:] if p not in _TYPE_LABELS)
    field = ".".join(str(p) for p in loc if p != "source")
    message = _message(first, field, loc)
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return f"{prefix}: {rule_part}{message}{more}"


def _message(error: Any, field: str, loc: tuple[Any, ...]) -> str:
    kind = error["type"]
    where = f"`{field}`" if field else "the rule" if not loc else "value"
    if kind == "missing":
        return f"{where} is missing"
    if kind == "extra_forbidden":
        key = loc[-1] if loc else field
        if key in _OUTPUT_KEYS and loc[:1] == ("inputs",):
            return f"`{key}` is a key of outputs, not of inputs"
        return f"unknown key `{key}`{_suggest(str(key), _KEYS)}"
    if kind == "union_tag_invalid":
        tag = error.get("ctx", {}).get("tag")
        return f"unknown rule type {tag!r}: use denorm, stateless or txn"
    if kind == "union_tag_not_found":
        return "`type` is missing: use denorm, stateless or txn"
    text = str(error.get("msg", kind))
    text = text.removeprefix("Value error, ")
    value = error.get("input")
    shown = ""
    if isinstance(value, str | int | float) and not isinstance(value, bool) and kind != "value_error":
        shown = f" (got {value!r})"
    return f"{where}: {text}{shown}" if field else f"{text}{shown}"


_OUTPUT_KEYS = ("envelope", "from")
_KEYS = [
    "name", "inputs", "outputs", "output", "transforms", "topic", "pool", "type", "where",
    "left", "right", "join-on", "out", "expire-after", "sql", "in", "txn-id",
    "complete-when", "transaction-topic", "envelope", "from",
]
