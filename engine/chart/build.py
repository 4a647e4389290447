"""`zync build`: a Helm chart deploying one pipeline, from its ETL configuration.

:func:`plan_chart` reads and checks everything first — the ETL configuration (as every
loop would), the pools' kinds, the connection profiles, the values given — so a pipeline
the chart cannot deploy is refused in one line naming the key before anything is
written; :func:`write_chart` then writes the chart::

    Chart.yaml  values.yaml  values.schema.json  .helmignore
    files/etl.yaml           the ETL configuration, as given (the pods' ConfigMap)
    files/zync-alerts.yaml   deploy/monitoring's alerting rules (the PrometheusRule)
    templates/               one Deployment per loop role (roles.py), the ConfigMaps, the
                             API Service, PodDisruptionBudget, ServiceAccount, Spark's RBAC,
                             ServiceMonitor, PrometheusRule, NOTES.txt

Nothing secret is written: Secrets are named in the values, never read.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from engine import __version__
from engine.chart import values as chart_values
from engine.chart.roles import roles_template
from engine.chart.values import ChartError, Values
from engine.chart.values_yaml import render
from engine.deliver.delivery_options import MOST_OUTPUTS

if TYPE_CHECKING:
    from engine.etl.config import EtlConfig

#: deploy/monitoring beside the engine: zync's source tree (an editable install, the image)
ALERTS: Final = Path(__file__).resolve().parents[2] / "deploy" / "monitoring" / "zync-alerts.yaml"
CHART_API: Final = "v2"
KUBE_VERSION: Final = ">=1.30.0-0"
#: the annotation that marks a chart `zync build` wrote (a directory it may write again)
BUILT_BY: Final = "zync.io/built-by"
_GROUP_NAME = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class ChartPlan:
    """What :func:`write_chart` writes: the checked configuration and values."""

    config_path: Path
    config_text: str
    pipeline: str
    chart_name: str
    chart_version: str
    values: Values
    notes: list[str] = field(default_factory=list)

    @property
    def unset(self) -> list[str]:
        """The values a user still has to give at install (dotted keys)."""
        missing = []
        for key in chart_values.required_at_install():
            node: Any = self.values
            for part in key.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if not node:
                missing.append(key)
        return missing

    def values_yaml(self) -> str:
        unset = ", ".join(self.unset) or "none"
        header = (
            f"Values of {self.chart_name}, the chart of zync pipeline {self.pipeline!r},\n"
            f"written by `zync build` (zync {__version__}) from {self.config_path.name}.\n"
            f"Give your own with `helm install RELEASE CHART -f my-values.yaml`; helm checks\n"
            f"them against values.schema.json. To set at install: {unset}."
        )
        return render(chart_values.schema(), self.values, header)


def plan_chart(
    config: Path,
    *,
    profiles: Path | None = None,
    values_files: Sequence[Path] = (),
    sets: Iterable[str] = (),
    chart_version: str = "0.1.0",
) -> ChartPlan:
    """Read and check what the chart is made of; raises :class:`ChartError` (or the ETL
    configuration's own one-line error) naming the key at fault."""
    from engine.etl.config_file import load_config  # deferred: the ETL's model

    parsed = load_config(config)  # the checks every loop makes when it starts
    _check_pool_kinds(parsed, config)
    text = config.read_text(encoding="utf-8")
    if not re.fullmatch(r"\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?", chart_version):
        raise ChartError(f"--chart-version {chart_version!r}: a chart's version is SemVer, e.g. 0.1.0")
    built = chart_values.defaults()
    notes: list[str] = []
    if profiles is not None:
        found, notes = chart_values.from_profiles(profiles)
        built = chart_values.merge(built, found)
    built["toKafka"]["groups"] = output_groups([o.topic for o in parsed.outputs])
    for path in values_files:
        built = chart_values.merge(built, chart_values.load_values_file(path))
    built = chart_values.merge(built, chart_values.parse_set(sets))
    chart_values.check(built, at_install=False)
    _check_groups(built["toKafka"].get("groups") or [], [o.topic for o in parsed.outputs])
    return ChartPlan(
        config_path=config,
        config_text=text,
        pipeline=parsed.name,
        chart_name=chart_name(parsed.name),
        chart_version=chart_version,
        values=built,
        notes=notes,
    )


def chart_name(pipeline: str) -> str:
    """``zync-<pipeline>`` in the letters a chart's name takes."""
    name = _GROUP_NAME.sub("-", pipeline.lower()).strip("-")
    return f"zync-{name}"[:40].rstrip("-") if name else "zync-pipeline"


def output_groups(topics: Sequence[str]) -> list[dict[str, Any]]:
    """One to-kafka group per output topic, named after it (unique, DNS-label letters)."""
    groups: list[dict[str, Any]] = []
    taken: set[str] = set()
    for topic in topics:
        base = _GROUP_NAME.sub("-", topic.lower()).strip("-")[:17].strip("-") or "output"
        name, n = base, 2
        while name in taken:
            name, n = f"{base}-{n}", n + 1
        taken.add(name)
        groups.append({"name": name, "outputs": [topic]})
    return groups


def _check_pool_kinds(config: EtlConfig, path: Path) -> None:
    """Inputs live in raw pools, outputs in the staging pool: a pool named as both would
    be created as one kind and written as the other."""
    staging = {o.pool for o in config.outputs}
    for index, endpoint in enumerate(config.inputs):
        if endpoint.pool in staging:
            raise ChartError(
                f"{path}: inputs.{index}.pool: {endpoint.pool!r} is the outputs' staging pool; "
                "an input's pool is a raw pool (a pool is raw or staging, not both)"
            )


def _check_groups(groups: list[dict[str, Any]], outputs: list[str]) -> None:
    """Every output delivered by one to-kafka group exactly (one producer per topic)."""
    seen: dict[str, int] = {}
    names: set[str] = set()
    for index, group in enumerate(groups):
        if group["name"] in names:
            raise ChartError(f"values: toKafka.groups.{index}.name: {group['name']!r} is used twice")
        names.add(group["name"])
        if len(group["outputs"]) > MOST_OUTPUTS:
            raise ChartError(
                f"values: toKafka.groups.{index}.outputs: {len(group['outputs'])} outputs; "
                f"one to-kafka process delivers at most {MOST_OUTPUTS} (each holds a Kafka "
                "producer): split them over more groups"
            )
        for topic in group["outputs"]:
            if topic not in outputs:
                raise ChartError(
                    f"values: toKafka.groups.{index}.outputs: {topic!r} is not an output of the "
                    f"pipeline (outputs: {', '.join(outputs)})"
                )
            if topic in seen:
                raise ChartError(
                    f"values: toKafka.groups.{index}.outputs: {topic!r} is delivered by group "
                    f"{seen[topic]} already (one producer per topic)"
                )
            seen[topic] = index
    if groups:
        missing = [t for t in outputs if t not in seen]
        if missing:
            raise ChartError(
                f"values: toKafka.groups: no group delivers output {missing[0]!r} "
                "(name it in a group's outputs)"
            )


def write_chart(plan: ChartPlan, out: Path) -> list[Path]:
    """Write the chart into ``out`` (new, empty, or a chart zync built: replaced); the
    files written."""
    _claim(out)
    files = resources.files("engine.chart").joinpath("files")
    written: list[Path] = []

    def put(relative: str, text: str) -> None:
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)

    put("Chart.yaml", _chart_yaml(plan))
    put("values.yaml", plan.values_yaml())
    put("values.schema.json", chart_values.schema_json())
    put(".helmignore", files.joinpath(".helmignore").read_text())
    put("files/etl.yaml", plan.config_text)
    try:
        put("files/zync-alerts.yaml", ALERTS.read_text(encoding="utf-8"))
    except OSError:
        raise ChartError(
            f"{ALERTS} not found: `zync build` runs from zync's source tree (an editable "
            "install, or the image)"
        ) from None
    for template in sorted(files.joinpath("templates").iterdir(), key=lambda t: t.name):
        put(f"templates/{template.name}", template.read_text())
    put("templates/_roles.tpl", roles_template())
    return written


def _claim(out: Path) -> None:
    """``out`` may be written: absent, empty, or a chart `zync build` wrote (whose
    templates and files are removed first, so none of an older build stays)."""
    if not out.exists():
        out.mkdir(parents=True)
        return
    if not out.is_dir():
        raise ChartError(f"-o {out}: not a directory")
    if not any(out.iterdir()):
        return
    chart = out / "Chart.yaml"
    try:
        built = yaml.safe_load(chart.read_text()).get("annotations", {}).get(BUILT_BY)
    except (OSError, AttributeError, yaml.YAMLError):
        built = None
    if not built:
        raise ChartError(f"-o {out}: not empty and not a chart `zync build` wrote; choose another")
    for old in ("templates", "files"):
        shutil.rmtree(out / old, ignore_errors=True)


def _chart_yaml(plan: ChartPlan) -> str:
    chart = {
        "apiVersion": CHART_API,
        "name": plan.chart_name,
        "description": f"zync pipeline {plan.pipeline}: Kafka -> Delta Lake -> Spark ETL -> Kafka, exactly once",
        "type": "application",
        "version": plan.chart_version,
        "appVersion": __version__,
        "kubeVersion": KUBE_VERSION,
        "keywords": ["zync", "kafka", "delta-lake", "spark", "cdc"],
        "annotations": {BUILT_BY: f"zync {__version__}", "zync.io/pipeline": plan.pipeline},
    }
    return "# Written by `zync build`; build again rather than edit.\n" + str(
        yaml.safe_dump(chart, sort_keys=False)
    )
