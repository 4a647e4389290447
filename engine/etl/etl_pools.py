"""The pools one ETL reads and writes, kept warm between passes.

:class:`EtlPools` opens each raw (input) pool and the staging (output) pool once,
refusing a pool of the wrong kind; gives the input topics' Spark types from the raw
pools' metadata; keeps the configuration checked against them (checked again only when
those types change); and records the outputs' types in the staging pool. The
SparkSession is the process's one session (:func:`engine.spark.get_spark`) unless a
session or a factory of one is given; it is started on first use, so an inspection that
finds nothing to look at never starts a JVM. Not thread-safe: :class:`engine.etl.run.EtlRunner`
holds its lock around every use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.etl.check import check_rules
from engine.etl.check_cache import RuleCheckCache
from engine.etl.config import EtlConfig, EtlConfigError, TxnRule
from engine.etl.cursors import Positions
from engine.etl.table_checks import check_tables
from engine.etl.typed_records import TopicTypes
from engine.lake.pool_errors import PoolError
from engine.lake.pools import RAW, STAGING, Lake, Pool
from engine.lake.topic_types import TopicTypes as PoolTypes
from engine.settings.home import zync_home
from engine.spark import SparkSource, spark_factory

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from engine.etl.checked import Checked, RuleCheck
    from engine.etl.rowwise.rule_set import Refused, RowRule


class EtlPools:
    """One ETL configuration's pools over a lake, its Spark session and checked rules."""

    def __init__(self, config: EtlConfig, lake: Lake, spark: SparkSource = None) -> None:
        self.config = config
        self.lake = lake
        self._spark_source = spark_factory(spark)
        self._spark: SparkSession | None = None
        self._pools: dict[str, Pool] = {}
        self._types: tuple[dict[str, str], dict[str, TopicTypes]] | None = None
        self._checked: Checked | None = None
        #: per rule: the signature of its topics' types when checked, and what was found
        self._checks: dict[int, tuple[str, RuleCheck]] = {}
        #: per rule: the check it was compiled from, and what compiling it gave
        self._compiled: dict[int, tuple[RuleCheck, RowRule | Refused]] = {}
        #: keep Spark's analysis of each rule when checking, for the row evaluator
        self.capture_plans = True
        self._cache: RuleCheckCache | None = None
        self._recorded: str | None = None

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = self._spark_source()
        return self._spark

    def _pool(self, name: str, kind: str, role: str) -> Pool:
        pool = self._pools.get(name)
        if pool is None:
            try:
                pool = self.lake.open_pool(name)
            except PoolError as exc:
                raise EtlConfigError(f"{self.config.source}: {role} pool {name!r}: {exc}") from None
            self._pools[name] = pool
        if pool.kind != kind:
            raise EtlConfigError(
                f"{self.config.source}: {role} pool {name!r} is a {pool.kind} pool, "
                f"an ETL {role} must be a {kind} pool"
            )
        return pool

    @property
    def staging(self) -> Pool:
        return self._pool(self.config.staging_pool, STAGING, "output")

    def raw(self, name: str) -> Pool:
        return self._pool(name, RAW, "input")

    def refresh(self) -> None:
        """Load every pool's newest snapshot."""
        for name in self.config.raw_pools:
            self.raw(name).refresh()
        self.staging.refresh()

    def positions(self) -> Positions:
        """The ETL's positions in the loaded staging snapshot."""
        return Positions.load(self.config, self.staging)

    def types(self) -> dict[str, TopicTypes]:
        """Each input topic's (key, value) Spark types from its raw pool (None: unknown);
        made again only when a raw pool's recorded types changed."""
        recorded = self._recorded_types()
        if self._types is None or self._types[0] != recorded:
            types = {
                t: self.raw(self.config.pool_of(t)).spark_types(t) for t in self.config.input_topics
            }
            self._types = (recorded, types)
        return self._types[1]

    def check(self) -> Checked:
        """Check the configuration against the lake and the input types; raises
        :class:`EtlConfigError`. A rule is analyzed again only when the types of its own
        topics changed: JSON topics' types grow as values arrive, and a configuration of
        hundreds of rules would otherwise be checked whole at each change."""
        _ = self.staging
        types = self.types()
        signatures = self._rule_signatures()
        reuse = {
            i: check for i, (sig, check) in self._checks.items() if signatures[i] == sig
        }
        if len(reuse) < len(signatures) or self._checked is None:
            checked = check_rules(
                self.config,
                self.spark,
                types,
                reuse=reuse,
                capture=self.capture_plans,
                cache=self._check_cache(),
            )
            if self.config.tables:
                staged = {self.config.staged_topic(t.from_) for t in self.config.tables}
                recorded = {topic: self.staging.spark_types(topic) for topic in staged}
                check_tables(self.config, checked, self.lake, recorded)
            self._checked = checked
            self._checks = {
                i: (signatures[i], check) for i, check in enumerate(self._checked.rules)
            }
        return self._checked

    def row_rules(self) -> list[RowRule | Refused]:
        """Every rule compiled for evaluation row by row, or refused with the reason,
        from the analysis :meth:`check` kept (no Spark call); compiled again only for a
        rule checked again."""
        # deferred: the evaluator's modules, loaded by a pass that may use them
        from engine.etl.rowwise.rule_set import compile_checked

        checks = self.check().rules
        stale = [i for i, check in enumerate(checks) if self._compiled.get(i, (None,))[0] is not check]
        if stale:
            config, types = self.config, self.types()
            compiled = compile_checked(config, checks, types, only=stale)
            for i in stale:
                self._compiled[i] = (checks[i], compiled[i])
        return [self._compiled[i][1] for i in range(len(checks))]

    def _check_cache(self) -> RuleCheckCache:
        """Rule checks kept under the zync home for the next process (check_cache.py)."""
        if self._cache is None:
            self._cache = RuleCheckCache.for_session(zync_home() / "cache" / "rule-checks", self.spark)
        return self._cache

    def _recorded_types(self) -> dict[str, str]:
        """Each input topic's types as its raw pool records them (JSON text)."""
        out = {}
        for topic in self.config.input_topics:
            recorded = self.raw(self.config.pool_of(topic)).topic_types(topic)
            out[topic] = "" if recorded is None else f"{recorded.key}\n{recorded.value}"
        return out

    def _rule_signatures(self) -> dict[int, str]:
        """Per rule, the recorded types of the topics it reads, as one text."""
        recorded = self._types[0] if self._types is not None else self._recorded_types()
        signatures = {}
        for index, rule in enumerate(self.config.transforms):
            topics = set(rule.topics)
            if isinstance(rule, TxnRule) and rule.transaction_topic:
                topics.add(rule.transaction_topic)
            signatures[index] = "\n\n".join(recorded.get(t, "") for t in sorted(topics))
        return signatures

    def record_output_types(self, checked: Checked) -> bool:
        """Record the outputs' key and value types in the staging pool (once per change);
        True when that made a commit (the staging pool is then at a newer version)."""
        found = checked.output_types(self.config)
        wanted = {
            topic: PoolTypes(key=k.json() if k else None, value=v.json() if v else None)
            for topic, (k, v) in found.items()
        }
        signature = repr(sorted((t, w.key, w.value) for t, w in wanted.items()))
        if not wanted or signature == self._recorded:
            return False
        changed = self.staging.record_types(wanted)
        self._recorded = signature
        return changed

