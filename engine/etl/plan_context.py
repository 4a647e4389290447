"""The rows a rule's plan yields, and the one SQL statement a pass is built into.

A pass evaluates every rule in ONE Spark SQL statement (:class:`PassQuery`): common
table expressions for the candidates, their first matching rule and each rule's view,
then a ``UNION ALL`` of two kinds of rows, told apart by ``kind``:

* *fates* (``f``): rows per candidate of a rule (a record may appear more than once;
  the driver keeps one per record, processed winning over pending) — ``pool, seqno,
  topic, partition, offset, ts, rule, ri`` (rule index), ``bundle`` (txn id) and
  ``status``: ``processed``, ``pending`` or ``dead`` (expiry is decided afterwards on
  the driver, :mod:`engine.etl.expiry`);
* *outputs* (``o``): ``out, key, value`` (JSON text made by ``to_json`` on the
  executors), ``ts`` (the newest input timestamp) and the ordering columns ``o1..o5``:
  the largest input seqno, the rule index, the left (or first) input seqno, the right
  input seqno and the row's position among one match's outputs (docs/design.md#ordering).

Text, not DataFrame calls: Spark parses and plans the whole pass once (a few
milliseconds), where building the same plan call by call through py4j cost a second per
pass — the difference between a warm pass of half a second and one of two.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.etl.checked import Checked
from engine.etl.config import EtlConfig
from engine.etl.sql import quote, wrap_select
from engine.etl.typed_records import TopicTypes

PENDING = "pending"
NO_RULE = -1

#: The hidden columns of a rule's view, added before the user's select list.
ORDER_COLUMNS = ("__zo1", "__zo2", "__zo3", "__zo4", "__zts")

FATE_COLUMNS = (
    "pool", "seqno", "topic", "partition", "offset", "ts", "rule", "ri", "bundle", "status"
)
#: The status of dead-letter rows a pass reads (not candidates: they only move cursors).
DEAD = "dead"
OUTPUT_COLUMNS = ("out", "key", "value", "avro", "ts", "o1", "o2", "o3", "o4", "o5")

#: Every column of a pass's result, with its type.
RESULT_TYPES: Mapping[str, str] = {
    "kind": "string", "pool": "string", "seqno": "bigint", "topic": "string", "partition": "int",
    "offset": "bigint", "ts": "timestamp", "rule": "string", "ri": "int", "bundle": "string",
    "status": "string", "out": "string", "key": "string", "value": "string",
    "avro": "struct<key_schema: string, value_schema: string, key: binary, value: binary>",
    "o1": "bigint",
    "o2": "int", "o3": "bigint", "o4": "bigint", "o5": "bigint",
}  # fmt: skip


def result_row(kind: str, values: Mapping[str, str]) -> str:
    """A SELECT list of every result column: ``values`` (SQL expressions) where given,
    NULL elsewhere, each cast to its type."""
    exprs = {"kind": quote(kind), **values}
    return ", ".join(
        f"CAST({exprs.get(name, 'NULL')} AS {type_}) AS {name}"
        for name, type_ in RESULT_TYPES.items()
    )


@dataclass
class PassQuery:
    """One pass as SQL text: named CTEs, then the union of its fate and output rows."""

    config: EtlConfig
    types: Mapping[str, TopicTypes]
    checked: Checked
    #: The view (or CTE) of the assigned candidates the rules read
    #: (:func:`engine.etl.rules.assign_sql`).
    assigned: str = ""
    #: Broadcast the small sides of joins (the candidates of a pass are few).
    small: bool = True
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    ctes: list[tuple[str, str]] = field(default_factory=list)
    #: The SELECTs of the union, each with its kind (``f``: fates, ``o``: outputs).
    rows: list[tuple[str, str]] = field(default_factory=list)
    #: The SQL text of each rule's SELECT, as run (for --explain).
    sql: dict[int, str] = field(default_factory=dict)
    #: The CTEs the statement reads more than once (a denorm's join feeds its left
    #: fates, its right fates and its outputs). Spark inlines a deterministic CTE at
    #: every use, computing it again each time; a large pass computes these once and
    #: keeps them (:meth:`take_views`).
    shared: set[str] = field(default_factory=set)
    #: Per input topic, the view of its assigned candidates parsed
    #: (:func:`engine.etl.rules.topic_records`).
    topic_views: dict[str, str] = field(default_factory=dict)
    _written: dict[str, TopicTypes] | None = field(default=None, init=False, repr=False)

    def name(self, base: str) -> str:
        """A CTE or view name of this pass (no user name can collide with it; plain
        letters, digits and underscores: no quoting needed)."""
        return f"__z{self.token}_{base}"

    def cte(self, base: str, body: str, *, name: str | None = None, shared: bool = False) -> str:
        """Add a CTE; ``shared``: the statement reads it more than once."""
        name = name or self.name(base)
        self.ctes.append((name, body))
        if shared:
            self.shared.add(name)
        return name

    def take_views(self) -> list[tuple[str, str, bool]]:
        """Take every CTE out of the statement: each as ``(name, SELECT, shared)``, in
        order. The caller makes each a temp view of that name (the shared ones computed
        once and kept) before it runs :meth:`part`. Spark finds a cached frame by its
        plan and misses one whose plan holds a CTE (a CTE's ids differ at each analysis:
        SPARK-46741, SPARK-51068): with no CTE left, no plan of the pass holds one."""
        taken = [(name, body, name in self.shared) for name, body in self.ctes]
        self.ctes = []
        return taken

    def rule_view(self, index: int, body: str) -> str:
        """The CTE a rule's SELECT runs over: its struct columns and the order columns
        (named as ``--explain`` shows it: ``zync_etl_<token>_<rule index>``)."""
        return self.cte("", body, name=f"zync_etl_{self.token}_{index}")

    def fates(
        self,
        source: str,
        *,
        label: str | None,
        status: str,
        index: int | str = NO_RULE,
        where: str | None = None,
        pool: str = "pool",
        holder: str = "",
        bundle: str = "NULL",
    ) -> None:
        """Fate rows of ``source`` (``holder``: the struct holding ``seqno`` and
        ``kafka``, e.g. ``right.``; empty for plain columns). ``label`` is the rule's
        name, or None; ``index`` the rule's index, or SQL giving it (then ``label`` is
        taken from the configuration's rule names by that index)."""
        kafka = f"{holder}kafka"
        values = {
            "pool": pool,
            "seqno": f"{holder}seqno",
            "topic": f"{kafka}.topic",
            "partition": f"{kafka}.partition",
            "offset": f"{kafka}.offset",
            "ts": f"{kafka}.timestamp",
            "rule": "NULL" if label is None else quote(label),
            "ri": str(index),
        }
        if isinstance(index, str):
            names = ", ".join(
                quote(self.config.rule_label(i)) for i in range(len(self.config.transforms))
            )
            values["rule"] = f"element_at(array({names}), {index} + 1)"
        values |= {
            "bundle": bundle,
            "status": status,
        }
        self.rows.append(
            (
                "f",
                f"SELECT {result_row('f', values)} FROM {source}"
                + (f" WHERE {where}" if where else ""),
            )
        )

    def outputs(self, index: int, view: str, from_names: tuple[str, ...] = ()) -> None:
        """Output rows of rule ``index``: its SELECT run over ``view`` (which holds the
        rule's struct columns and :data:`ORDER_COLUMNS`), key and value made JSON text."""
        # deferred: pyspark types
        from engine.etl.typed_records import avro_bodies_sql, json_text_sql

        rule = self.config.transforms[index]
        wrapped = wrap_select(rule.sql, view, ORDER_COLUMNS, from_names=from_names)
        self.sql[index] = wrapped
        result = self.cte(f"r{index}_sql", wrapped)
        check = self.checked.rules[index]
        values = {
            "out": quote(rule.out),
            "key": json_text_sql("key", check.key_type),
            "value": json_text_sql("value", check.value_type),
            "avro": avro_bodies_sql(check.key_type, check.value_type, self.written(rule.out)),
            "ts": "__zts",
            "o1": "__zo1",
            "o2": "__zo2",
            "o3": "__zo3",
            "o4": "__zo4",
            "o5": "monotonically_increasing_id()",
        }
        self.rows.append(("o", f"SELECT {result_row('o', values)} FROM {result}"))

    def written(self, topic: str) -> TopicTypes:
        """The key and value types recorded for output ``topic``: the merge of the types
        the pass's rules write to it (what to-kafka registers)."""
        if self._written is None:
            self._written = self.checked.output_types(self.config)
        return self._written.get(topic, (None, None))

    def text(self) -> str:
        """The whole statement."""
        withs = ",\n".join(f"{name} AS (\n{body}\n)" for name, body in self.ctes)
        union = "\nUNION ALL\n".join(select for _, select in self.rows)
        return f"WITH\n{withs}\n{union}" if withs else union

    def part(self, kind: str, columns: tuple[str, ...]) -> str | None:
        """The rows of one kind (``f`` or ``o``) alone, only ``columns`` of them, once
        the CTEs are views (:meth:`take_views`); None when the pass has none."""
        assert not self.ctes, "part() reads the CTEs as views: take_views() first"
        selects = [select for k, select in self.rows if k == kind]
        if not selects:
            return None
        union = "\nUNION ALL\n".join(selects)
        return f"SELECT {', '.join(columns)} FROM (\n{union}\n)"
