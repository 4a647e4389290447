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
    pool record giving the transaction id; records whose id is NULL do not match the rule),
    ``complete-when`` (an aggregate over the bundle's records, e.g.
    ``bool_or(value.done)``), ``out``, ``sql``, optional ``where`` and ``expire-after``.
    Records are bundled by transaction id; a bundle's outputs appear, all in one commit,
    only once it is complete. ``sql`` sees one row per bundle with the struct column
    ``bundle``: ``txn_id`` and ``records`` (the bundle's pool records ordered by seqno). The
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

``tables`` (optional) keeps Delta tables from outputs (docs/design.md#tables)::

    tables:
      - name: invoices          # the table's name: <lake>/invoices, and in `zync query`
        from: NewInvoices       # the output whose records it applies
        keys: [ID]              # fields of the output's value that identify a row
        history: false          # true: every version, with valid_from/valid_to (SCD2)
        location: s3://b/t      # optional: a directory or URL of its own

A record updates the columns its value carries (a field the rule writes as NULL sets the
column to NULL) and keeps the others; a tombstone (NULL value) deletes the row of its
key, whose fields are then read from the record's key. See :mod:`engine.apply`.

An output may name the ``envelope`` to-kafka delivers it in (``jdbc``, the default,
``differential``, ``materialize`` or ``debezium``; ``--envelope`` overrides it). An output
with ``from: T`` is delivered only: to-kafka sends the records the rules stage for the
output ``T`` to this topic too (say, in another envelope); rules cannot write to it.

Every rule's ``sql`` is a SELECT without FROM, evaluated per match over a view whose
columns are structs named ``left``/``right`` (denorm), ``in`` (stateless) or ``bundle``
(txn); ``FROM bundle`` is accepted in a txn rule's SELECT. It must yield columns ``key``
and ``value`` (``NULL AS value`` is a tombstone). Each struct is a pool record: ``seqno``,
``kafka`` (topic, partition, offset, timestamp), ``key``, ``value``.

``expire-after`` (denorm and txn) is a duration such as ``30s``, ``15m``, ``1h``, ``2d`` or
``1h30m``: a pending record expires when the newest Kafka timestamp seen on its topic is
more than that newer than its own (event time); it is marked ``expired``, gives no
output and no longer holds the cursor back. A txn bundle expires as a whole.

Loading (:mod:`engine.etl.config_file`) checks everything that needs no data: unknown
keys, types, durations, topics that are not inputs or outputs, outputs in different pools.
:mod:`engine.etl.rules` checks the rest (pools in the lake, SQL against the typed input
schemas) before anything is written.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from engine.durations import parse_timedelta
from engine.errors import ZyncError
from engine.kafka.envelope_names import envelope_name

DEBEZIUM = "debezium"
#: The columns a history table (``history: true``) adds to the output's fields.
HISTORY_COLUMNS = ("valid_from", "valid_to", "valid_from_version", "valid_to_version", "is_current")
DEBEZIUM_TXN_ID = "value.transaction.id"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


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
        return envelope_name(value)

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


class Table(_Strict):
    """A Delta table kept from the records of output ``from`` (SCD type 1, or type 2
    with ``history``), by the apply loop (docs/design.md#tables)."""

    name: str
    from_: str = Field(alias="from")
    keys: list[str] = Field(min_length=1)
    history: bool = False
    location: str | None = None

    @field_validator("name")
    @classmethod
    def _table_name(cls, value: str) -> str:
        if not _TABLE_NAME.match(value):
            raise ValueError(
                f"invalid table name {value!r}: use letters, digits and '_', "
                "starting with a letter or '_' (it is a name in SQL)"
            )
        return value

    @field_validator("from_", "location")
    @classmethod
    def _filled(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: list[str]) -> list[str]:
        for key in value:
            if not key.strip():
                raise ValueError("a key must not be empty")
        if len(set(value)) != len(value):
            raise ValueError("a key is listed twice")
        return value

    @model_validator(mode="after")
    def _reserved(self) -> Table:
        if self.history:
            for key in self.keys:
                if key in HISTORY_COLUMNS:
                    raise ValueError(
                        f"key {key!r} is a column a history table adds "
                        f"({', '.join(HISTORY_COLUMNS)})"
                    )
        return self


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
    tables: list[Table] = Field(default_factory=list)
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

    def staged_topic(self, topic: str) -> str:
        """The staging topic whose records output ``topic`` carries (its ``from``, or
        itself)."""
        for output in self.outputs:
            if output.topic == topic:
                return output.staged
        raise KeyError(topic)

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
