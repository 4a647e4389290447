"""`zync setup` and `zync version`: the JVM artifacts zync runs with, and every version."""

from __future__ import annotations

from typing import Annotated

import typer

from zync_tui.errors import UserError, err_console, user_errors


def register(app: typer.Typer) -> None:
    app.command()(setup)
    app.command()(version)


def setup(
    resolver: Annotated[
        str | None,
        typer.Option(help="maven or ivy (default: Maven when `mvn` is installed, else Ivy)"),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing when all is there.")] = False,
    with_: Annotated[
        list[str] | None,
        typer.Option(
            "--with",
            metavar="EXTRA",
            help="Also fetch an optional set: s3 (hadoop-aws and the AWS SDK, ~600 MB, for "
            "Spark on an s3:// lake; fetched on first use otherwise).",
        ),
    ] = None,
) -> None:
    """Fetch the JVM artifacts (delta-spark, Apache Kafka, Spark's Kafka source) once, build
    the Go tools (promtool, helm), and make the class archives that let Spark and the broker
    start in about half the time.

    The list is declared in engine/jvm/artifacts.toml; everything lands in zync's cache
    (~/.cache/zync/jvm, or $ZYNC_JVM_CACHE) and zync runs offline afterwards. Needs Maven
    Central the first time. A class archive is made once per Java and set of jars (about
    a minute; ZYNC_CLASS_ARCHIVES=off skips it). The Go tools (engine/gotools/tools.toml)
    are built once by `go install` into ~/.cache/zync/tools/go (ZYNC_GO_TOOLS=off skips
    them). The README's set-up commands run this for you.
    """
    # engine.api loads pyarrow, delta-rs and Kafka: imported when a command runs, so
    # `zync --help` stays fast (likewise in every command module)
    from engine.api import (
        fetch_jvm_artifacts,
        jvm_artifact_sets,
        jvm_cache_dir,
        jvm_resolved,
    )

    sets = jvm_artifact_sets()
    wanted = {f"spark-{extra}" if f"spark-{extra}" in sets else extra for extra in with_ or []}
    with user_errors():
        unknown = sorted(wanted - {name for name, aset in sets.items() if aset.optional})
        if unknown:
            optional = ", ".join(n.removeprefix("spark-") for n, a in sets.items() if a.optional)
            raise UserError(f"--with {unknown[0]}: no such optional set (choose from {optional})")
        for name, aset in sets.items():
            if aset.optional and name not in wanted:
                continue
            already = jvm_resolved(name) is not None
            found = fetch_jvm_artifacts(
                name, resolver=resolver, progress=lambda line: err_console.print(line, soft_wrap=True)
            )
            if not (quiet and already):
                err_console.print(
                    f"{name}: {len(found.jars)} jars ({found.resolver}) in "
                    f"{jvm_cache_dir()} — {aset.purpose}",
                    soft_wrap=True,
                )
    _go_tools(quiet)
    _class_archives(quiet)


def _go_tools(quiet: bool) -> None:
    """Build the declared Go tools (engine/gotools/tools.toml) that are not built yet;
    none with ZYNC_GO_TOOLS=off (the container image: they are for development)."""
    import os

    from engine.api import GoToolError, go_tool, go_tools, install_go_tool

    if os.environ.get("ZYNC_GO_TOOLS", "").strip().lower() in ("off", "0", "false", "no"):
        return
    for name, tool in go_tools().items():
        already = go_tool(name) is not None
        try:
            where, seconds = install_go_tool(
                name, progress=lambda line: err_console.print(line, soft_wrap=True)
            )
        except GoToolError as exc:  # zync runs without it: only the monitoring checks need it
            err_console.print(f"[yellow]warning:[/] {name} not built: {exc}", soft_wrap=True)
            continue
        if not (quiet and already):
            built = f"built in {seconds:.0f}s" if seconds else "there"
            err_console.print(f"{name} {tool.version}: {where} ({built}) — {tool.user}", soft_wrap=True)


def _class_archives(quiet: bool) -> None:
    """Make Spark's and the broker's class archives; one that cannot be made is a
    warning (zync runs without it), not an error."""
    from engine.api import (
        ZyncError,
        class_archives_enabled,
        make_broker_class_archive,
        make_spark_class_archive,
    )

    if not class_archives_enabled():
        return
    for what, make in (("Spark's driver", make_spark_class_archive),
                       ("the embedded broker", make_broker_class_archive)):  # fmt: skip
        if not quiet:
            err_console.print(f"class archive for {what}: checking …", soft_wrap=True)
        try:
            archive = make()
        except ZyncError as exc:  # any failure: a class archive is only an optimisation
            err_console.print(
                f"[yellow]warning:[/] no class archive for {what} ({exc}); its JVM starts "
                "without one, slower",
                soft_wrap=True,
            )
            continue
        if archive.new or not quiet:
            err_console.print(
                f"{archive.kind}: class archive {archive.size / 2**20:.0f} MB "
                f"({'made' if archive.new else 'there'}) in {archive.path.parent} — "
                f"{what} maps its classes instead of loading them",
                soft_wrap=True,
            )


def version(
    all_jars: Annotated[
        bool, typer.Option("--all", help="List every JVM jar, dependencies included.")
    ] = False,
) -> None:
    """Print the versions of zync, Spark, Delta, Kafka, librdkafka and every JVM artifact."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    from engine.api import (
        SETUP_COMMAND,
        __version__,
        jvm_artifact_sets,
        jvm_resolved,
        librdkafka_version,
    )

    def dist(name: str) -> str:
        try:
            return dist_version(name)
        except PackageNotFoundError:
            return "not installed"

    rows = [
        ("zync", __version__),
        ("spark (pyspark)", dist("pyspark")),
        ("delta-spark", dist("delta-spark")),
        ("delta-rs (deltalake)", dist("deltalake")),
        ("librdkafka", librdkafka_version()),
        ("confluent-kafka", dist("confluent-kafka")),
        ("textual", dist("textual")),
    ]
    for name, aset in jvm_artifact_sets().items():
        found = jvm_resolved(name)
        for coordinate in aset.artifacts:
            command = f"{SETUP_COMMAND} --with {name.removeprefix('spark-')}" if aset.optional else SETUP_COMMAND
            state = "" if found else f"  (not fetched: run `{command}`)"
            rows.append((f"jvm {name}: {coordinate.group}:{coordinate.artifact}",
                         coordinate.version + state))
        if found and all_jars:
            declared = set(aset.artifacts)
            for jar in found.jars:
                if jar.coordinate not in declared:
                    rows.append((f"jvm {name}:   {jar.coordinate.group}:{jar.coordinate.artifact}",
                                 jar.coordinate.version))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        typer.echo(f"{name:<{width}}  {value}")
