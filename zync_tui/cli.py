"""The `zync` command line: every command, one line of help each."""

from __future__ import annotations

import typer

from zync_tui.commands import console, deliver, dev, etl, kafka, pool, run

app = typer.Typer(
    name="zync",
    help=(
        "Keep Kafka topics and Delta Lake tables in sync, and turn Debezium change "
        "streams into clean, denormalized change streams with Spark — exactly once.\n\n"
        "Start here: `zync dev up` runs a broker and a schema registry on this machine; "
        "`zync demo` shows the whole pipeline in the console."
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

app.add_typer(dev.app, name="dev")
kafka.register(app)  # produce, consume, ls, info
pool.register(app)  # pool ..., from-kafka, query
etl.register(app)  # etl, pending, expired
deliver.register(app)  # to-kafka
run.register(app)  # run
console.register(app)  # tui, demo


@app.command()
def version() -> None:
    """Print the versions of zync, Spark, delta-rs and librdkafka."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    import confluent_kafka

    import engine

    def dist(name: str) -> str:
        try:
            return dist_version(name)
        except PackageNotFoundError:
            return "not installed"

    rows = [
        ("zync", engine.__version__),
        ("spark (pyspark)", dist("pyspark")),
        ("delta-rs (deltalake)", dist("deltalake")),
        ("librdkafka", confluent_kafka.libversion()[0]),
        ("confluent-kafka", confluent_kafka.version()[0]),
        ("textual", dist("textual")),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        typer.echo(f"{name:<{width}}  {value}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
