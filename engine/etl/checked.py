"""What checking a configuration found: per rule, whether its output types are known and
which they are, merged per output topic (recorded in the staging pool)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.etl.config import EtlConfig
from engine.etl.typed_records import TopicTypes
from engine.sparktypes import merge_spark_types

if TYPE_CHECKING:
    from pyspark.sql.types import DataType


@dataclass
class RuleCheck:
    """What checking found about one rule: output types (None: not known yet), and, when
    asked for, Spark's analysis of its parts for the row evaluator (``plans``:
    ``select``, ``join-on`` and ``where:<topic>``, :class:`engine.etl.rowwise.analysed.Analysed`)."""

    key_type: DataType | None = None
    value_type: DataType | None = None
    typed: bool = False
    plans: dict[str, Any] = field(default_factory=dict)


@dataclass
class Checked:
    """The result of :func:`check_rules`: per-rule output types."""

    rules: list[RuleCheck] = field(default_factory=list)

    def output_types(self, config: EtlConfig) -> dict[str, TopicTypes]:
        """Per output topic, the merged key and value types of the rules writing it."""
        found: dict[str, TopicTypes] = {}
        for rule, check in zip(config.transforms, self.rules, strict=True):
            if not check.typed:
                continue
            key, value = found.get(rule.out, (None, None))
            k, v = _useful(check.key_type), _useful(check.value_type)
            if k is not None:
                key = k if key is None else merge_spark_types(key, k)
            if v is not None:
                value = v if value is None else merge_spark_types(value, v)
            found[rule.out] = (key, value)
        return found


def _useful(data_type: DataType | None) -> DataType | None:
    from pyspark.sql import types as T  # deferred: pyspark

    return None if data_type is None or isinstance(data_type, T.NullType) else data_type

