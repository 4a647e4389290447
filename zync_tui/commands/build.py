"""`zync build CONFIG -o DIR`: the pipeline as a Helm chart, one Deployment per loop role."""

# No `from __future__ import annotations`: typer reads the annotations at import time.

from pathlib import Path
from typing import Annotated

import typer

from zync_tui.commands import standalone_app
from zync_tui.errors import UserError, err_console, user_errors


def build(
    config: Annotated[
        Path,
        typer.Argument(help="The ETL configuration (YAML), e.g. demo/invoices/etl.yaml.", show_default=False),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="DIR",
                     help="Where to write the chart (new, empty, or a chart zync built).",
                     show_default=False),
    ] = None,
    profiles: Annotated[
        Path | None,
        typer.Option(metavar="DIR",
                     help="A directory of connection profiles laid out as a zync home "
                     "(kafka.json, schema_registry.json, storage.json, spark.json) for the "
                     "cluster: their settings become the chart's values, their secrets never "
                     "(name Secrets instead). Default: none; this machine's are for this "
                     "machine.", show_default=False),
    ] = None,
    values_files: Annotated[
        list[Path] | None,
        typer.Option("--values", "-f", metavar="FILE",
                     help="Values to build in (YAML, as `helm -f`; repeatable, later wins).",
                     show_default=False),
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY=VALUE",
                     help="One value to build in, e.g. --set fromKafka.replicas=3 (repeatable).",
                     show_default=False),
    ] = None,
    chart_version: Annotated[
        str, typer.Option(metavar="SEMVER", help="The chart's version (raise it with each change).")
    ] = "0.1.0",
    values_only: Annotated[
        bool,
        typer.Option("--values-only",
                     help="Print the chart's values.yaml (every value that can be set, its "
                     "default and what it does) and write nothing."),
    ] = False,
) -> None:
    """Write a Helm chart that deploys CONFIG's pipeline on Kubernetes.

    One Deployment per loop role, each `zync run CONFIG --only ROLE`: from-kafka (replicas
    in one consumer group, a PodDisruptionBudget), etl (one pod; Spark local[*], a
    spark:// master or Spark on Kubernetes) and to-kafka (one pod per output group);
    probes on /healthz and /readyz, Prometheus scrape annotations, an optional
    ServiceMonitor and PrometheusRule. Every pod runs the image of
    deploy/image/Containerfile. Then: `helm install RELEASE DIR -f my-values.yaml`.
    """
    from engine.api import plan_chart, write_chart

    with user_errors():
        plan = plan_chart(
            config,
            profiles=profiles,
            values_files=values_files or [],
            sets=sets or [],
            chart_version=chart_version,
        )
        if values_only:
            typer.echo(plan.values_yaml(), nl=False)
            return
        if out is None:
            raise UserError("say where to write the chart: -o DIR (or --values-only to print its values)")
        written = write_chart(plan, out)
    for note in plan.notes:
        err_console.print(f"note: {note}", soft_wrap=True, markup=False)
    err_console.print(
        f"{plan.chart_name} {plan.chart_version}: {len(written)} files in {out}", soft_wrap=True
    )
    unset = plan.unset
    need = f" (set {', '.join(unset)})" if unset else ""
    err_console.print(
        f"next: helm install {plan.pipeline.lower()} {out} -f my-values.yaml{need}; "
        f"`zync build {config} --values-only` lists every value",
        soft_wrap=True,
        markup=False,
    )


def register(app: typer.Typer) -> None:
    """Add `build` to ``app`` as a top-level command."""
    app.command(name="build")(build)


def make_app() -> typer.Typer:
    """A typer app with just this command (tests, ``python -m``)."""
    return standalone_app(register)


if __name__ == "__main__":
    make_app()()
