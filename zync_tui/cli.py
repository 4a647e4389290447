"""The `zync` command line: every command, one line of help each."""

from __future__ import annotations

import typer

from zync_tui.commands import (
    apply,
    build,
    console,
    deliver,
    dev,
    etl,
    ingest,
    init,
    kafka,
    pool,
    query,
    run,
    setup,
)

app = typer.Typer(
    name="zync",
    help=(
        "Keep Kafka topics and Delta Lake tables in sync, and turn Debezium change "
        "streams into clean, denormalized change streams with Spark — exactly once.\n\n"
        "Start here: `zync dev up` runs a broker and a schema registry on this machine; "
        "`zync demo` shows the whole pipeline in the console."
    ),
    no_args_is_help=True,
    rich_markup_mode="markdown",
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

app.add_typer(dev.app, name="dev")
kafka.register(app)  # produce, consume, ls, info
pool.register(app)  # pool ...
ingest.register(app)  # from-kafka
query.register(app)  # query
etl.register(app)  # etl, pending, expired
init.register(app)  # init
deliver.register(app)  # to-kafka
apply.register(app)  # apply
run.register(app)  # run
console.register(app)  # tui, demo
build.register(app)  # build
setup.register(app)  # setup, version


def main() -> None:
    app()


if __name__ == "__main__":
    main()
