"""What checking a rule found, kept on disk for the next process (:class:`RuleCheckCache`).

Checking a rule is Spark's analysis of its expressions and SQL against its input types,
and, for the row evaluator, the analysed plans as Spark's JSON: ~0.1 s a rule for a
60-column Debezium topic, so a configuration of 200 rules took 20 s at every start — a
`zync etl` pass, a restart after kill -9, a pod rescheduled. The result depends only on
the rule, its topics' types and Spark (its version and SQL settings), so it is kept
under the zync home (``cache/rule-checks/<digest>.json.gz``), named by a digest of all
of them: a changed rule, type, Spark or setting is a new name and is checked again.
Entries unused for :data:`KEEP_DAYS` days are removed now and then.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.etl.checked import RuleCheck
from engine.etl.config import Rule
from engine.etl.typed_records import TopicTypes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The format of an entry; a change makes every earlier entry a miss.
FORMAT = 1
KEEP_DAYS = 14


class RuleCheckCache:
    """Rule checks by digest, in ``directory``; ``facts`` says which Spark checked them."""

    def __init__(self, directory: Path, facts: str) -> None:
        self.directory = directory
        self.facts = facts
        self._swept = False

    @classmethod
    def for_session(cls, directory: Path, spark: SparkSession) -> RuleCheckCache:
        """A cache for rules checked by ``spark``: its version and every ``spark.sql.*``
        setting it started with are part of each entry's name."""
        settings = sorted(
            (k, v) for k, v in spark.sparkContext.getConf().getAll() if k.startswith("spark.sql.")
        )
        facts = json.dumps({"spark": spark.version, "settings": settings}, sort_keys=True)
        return cls(directory, facts)

    def key(self, rule: Rule, types: Mapping[str, TopicTypes], *, capture: bool) -> str:
        """The name of ``rule``'s entry with its topics' ``types``."""
        topics = set(rule.topics) | {t for t in [getattr(rule, "transaction_topic", None)] if t}
        described = {
            "format": FORMAT,
            "facts": self.facts,
            "capture": capture,
            "rule": rule.model_dump(mode="json", by_alias=True),
            "types": {
                t: [None if x is None else x.json() for x in types.get(t, (None, None))]
                for t in sorted(topics)
            },
        }
        return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()

    def get(self, key: str) -> RuleCheck | None:
        path = self.directory / f"{key}.json.gz"
        try:
            data = json.loads(gzip.decompress(path.read_bytes()))
            check = _from_json(data)
        except (OSError, ValueError, KeyError, TypeError):
            return None  # none yet, or unreadable: checked again
        with contextlib.suppress(OSError):
            os.utime(path)  # used: kept
        return check

    def put(self, key: str, check: RuleCheck) -> None:
        """Keep ``check`` (best effort: a cache that cannot be written is only slower)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"{key}.json.gz"
            temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            temporary.write_bytes(gzip.compress(json.dumps(_to_json(check)).encode(), 6))
            temporary.replace(path)
        except OSError:
            return
        if not self._swept:
            self._swept = True
            self._sweep()

    def _sweep(self) -> None:
        old = time.time() - KEEP_DAYS * 86_400
        for entry in self.directory.glob("*.json.gz"):
            with contextlib.suppress(OSError):
                if entry.stat().st_mtime < old:
                    entry.unlink()


def _to_json(check: RuleCheck) -> dict[str, Any]:
    return {
        "key": None if check.key_type is None else check.key_type.json(),
        "value": None if check.value_type is None else check.value_type.json(),
        "typed": check.typed,
        "plans": {
            name: {
                "plan": a.plan,
                "schema": a.schema,
                "time_zone": a.session.time_zone,
                "decimal_precision_loss": a.session.decimal_precision_loss,
            }
            for name, a in check.plans.items()
        },
    }


def _from_json(data: dict[str, Any]) -> RuleCheck:
    # deferred: the row evaluator's and pyspark's types, loaded when an entry is read
    from engine.etl.rowwise.analysed import Analysed
    from engine.etl.rowwise.compiled import Session
    from engine.sparktypes import load_type

    plans = {
        name: Analysed(
            p["plan"],
            p["schema"],
            Session(time_zone=p["time_zone"], decimal_precision_loss=p["decimal_precision_loss"]),
        )
        for name, p in data["plans"].items()
    }
    return RuleCheck(load_type(data["key"]), load_type(data["value"]), bool(data["typed"]), plans)
