"""The loop roles a pipeline's chart deploys: one entry each, one Deployment per entry
(per output group for to-kafka).

A role is a loop of `zync run CONFIG --only <loop>`; what the chart needs of it is here,
and the templates know no role by name: ``templates/deployment.yaml`` ranges over this
list (written into the chart as ``templates/_roles.tpl``). A new loop is one more entry
(as ``apply``'s), its values section (``values.schema.yaml``) and, when it takes
options, its arguments (``templates/_role-args.tpl``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import yaml

#: one pod at a time: the old one is gone before the new one starts (a second ETL or a
#: second producer of a topic would only be fenced or wasted)
RECREATE: Final = "Recreate"
#: replicas replaced one by one (a consumer group rebalances its partitions)
ROLLING: Final = "RollingUpdate"

#: the parts of the ETL configuration: every loop reads ``name`` (its metrics' pipeline)
CONFIG_PARTS: Final = ("name", "inputs", "outputs", "transforms", "tables")


@dataclass(frozen=True)
class Role:
    """A loop the chart deploys.

    ``key``: its section of values.yaml. ``reads``: the parts of the ETL configuration
    the loop acts on; a pod restarts on ``helm upgrade`` only when those change (its
    checksum annotation covers them alone). ``scales``: its replicas come from values
    (a consumer group shares the work) instead of being 1. ``by_output``: one Deployment
    per output group of ``toKafka.groups``. ``spark``: it runs Spark (the settings of
    ``spark:`` reach it). ``disruption_budget``: a PodDisruptionBudget when asked.
    """

    name: str
    key: str
    reads: tuple[str, ...]
    strategy: str = RECREATE
    scales: bool = False
    by_output: bool = False
    spark: bool = False
    disruption_budget: bool = False
    needs: str = ""

    def __post_init__(self) -> None:
        unknown = (set(self.reads) | ({self.needs} - {""})) - set(CONFIG_PARTS)
        if unknown:
            raise ValueError(f"role {self.name}: unknown configuration part {sorted(unknown)[0]!r}")
        if self.scales != (self.strategy == ROLLING):
            raise ValueError(f"role {self.name}: only a role that scales rolls its pods")

    def as_template_entry(self) -> dict[str, object]:
        return {
            "name": self.name,
            "key": self.key,
            "reads": list(self.reads),
            "strategy": self.strategy,
            "scales": self.scales,
            "byOutput": self.by_output,
            "spark": self.spark,
            "disruptionBudget": self.disruption_budget,
            "needs": self.needs,
        }


ROLES: Final = (
    Role(
        "from-kafka",
        "fromKafka",
        reads=("name", "inputs"),
        strategy=ROLLING,
        scales=True,
        disruption_budget=True,
    ),
    Role("etl", "etl", reads=CONFIG_PARTS, spark=True),
    Role("to-kafka", "toKafka", reads=("name", "outputs"), by_output=True),
    # a second apply process is harmless (each staging version is applied once) but wasted
    Role("apply", "apply", reads=("name", "outputs", "tables"), needs="tables"),
)


def roles_template() -> str:
    """``templates/_roles.tpl``: the role list as YAML, for ``fromYamlArray``."""
    body = str(yaml.safe_dump([r.as_template_entry() for r in ROLES], sort_keys=False))
    return (
        "{{/* The loop roles of this chart, written by `zync build` from zync's\n"
        "engine/chart/roles.py: templates/deployment.yaml makes one Deployment per entry\n"
        "(per output group for an entry with byOutput). */}}\n"
        '{{- define "zync.roles" -}}\n' + body + "{{- end }}\n"
    )
