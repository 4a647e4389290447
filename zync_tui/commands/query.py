"""`zync query SQL`: Spark SQL over the pools of the lake, as a table, JSON lines or CSV.

The lead's CLI adds it with :func:`register`. Run alone:
``python -m zync_tui.commands.query query "SELECT ..."``.
"""

# No `from __future__ import annotations`: typer reads the annotations at import time.

import csv
import enum
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zync_tui.commands import standalone_app
from zync_tui.errors import UserError, lake_errors, warn
from zync_tui.shared_options import LakeOption, SparkMasterOption, open_lake, spark_session

if TYPE_CHECKING:
    from engine.api import Lake

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)


class OutputFormat(enum.StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


def query(
    sql: Annotated[str, typer.Argument(help="Spark SQL; every pool is a view (see below).",
                                       show_default=False)],
    lake: LakeOption = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")] = OutputFormat.table,
    as_of: Annotated[
        int | None,
        typer.Option("--as-of", metavar="VERSION", min=0, help="Read every pool at this Delta version (for one pool: P VERSION AS OF n).",
                     show_default=False),
    ] = None,
    as_of_staging: Annotated[
        str | None,
        typer.Option(
            "--as-of-staging",
            metavar="[POOL:]VERSION",
            help="Read every table at its version that reflects exactly this version of "
            "its staging pool (and that pool at it): several tables as of one source "
            "point. Refused, in one line, when a table has not applied it yet.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=0, help="Print at most this many rows.", show_default=False)
    ] = None,
    spark_master: SparkMasterOption = None,
) -> None:
    """Run Spark SQL over the pools of the lake.

    Each pool P is the view P: its records (seqno, kafka, key, value), typed, so value.after.ID works; with P_deadletters (seqno, kafka, stage, error, key_bytes, value_bytes) and, for staging pools, P_markers. A '-' in a pool name becomes '_' (raw-2024 is raw_2024).

    Time travel, per reference: P VERSION AS OF n, or P TIMESTAMP AS OF 'YYYY-MM-DD HH:MM:SS' (the newest version committed by then; UTC unless spark.json sets the session time zone); several versions of one pool may meet in a query. --as-of n reads every pool at version n. Delta's DESCRIBE HISTORY P \\[LIMIT n] and DESCRIBE DETAIL P take the pool names you see.

    Tables (`tables:` of an ETL configuration, kept by `zync apply`) are there by name, as Delta tables: invoices VERSION AS OF n, DESCRIBE HISTORY invoices (its userMetadata names the staging versions each commit applied), and its change feed, table_changes('invoices', 2, 5). --as-of-staging V reads every table at its version that reflects staging version V.

    Examples:
      zync query "SELECT value.after.ID FROM Raw WHERE value.op = 'c'"
      zync query "SELECT count(*) FROM Staging VERSION AS OF 3"
      zync query "SELECT * FROM Raw TIMESTAMP AS OF '2026-11-23 10:00:00'"
      zync query "SELECT n.* FROM Staging VERSION AS OF 5 n
                  LEFT ANTI JOIN Staging VERSION AS OF 3 o USING (seqno)"
      zync query "DESCRIBE HISTORY Raw LIMIT 5"
      zync query "DESCRIBE DETAIL `raw-2024`"
      zync query "SELECT * FROM invoices ORDER BY ID"
      zync query "SELECT * FROM table_changes('invoices', 1, 3)"
      zync query --as-of-staging 7 "SELECT * FROM invoices JOIN customers USING (customer)"
    """
    from engine.api import query_result  # deferred: keeps `zync --help` fast

    with lake_errors():
        the_lake = open_lake(lake)  # before Spark: an S3 lake gives the session s3a
        tables_at, pool_at = _as_of_staging(the_lake, as_of_staging)
        spark = spark_session(spark_master)
        result = query_result(
            spark, the_lake, sql, as_of=as_of, tables_at=tables_at, pool_at=pool_at, limit=limit
        )
        for name, reason in result.skipped.items():
            if as_of is None:
                warn(f"{escape(name)} skipped: {escape(reason)}")
        if fmt is OutputFormat.json:
            for line in result.json_lines():
                sys.stdout.write(line + "\n")
            return
        found = result.table()
        names, rows = found.columns, found.rows
        if fmt is OutputFormat.csv:
            writer = csv.writer(sys.stdout, lineterminator="\n")
            writer.writerow(names)
            writer.writerows([["" if v is None else v for v in values] for values in rows])
            return
        table = Table(box=None, header_style="bold", pad_edge=False)
        for name in names:
            table.add_column(escape(name), overflow="fold")
        for values in rows:
            table.add_row(*[escape(v) if v is not None else "[dim]NULL[/]" for v in values])
        _out.print(table)
        _err.print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


def _as_of_staging(
    lake: "Lake", text: str | None
) -> tuple[dict[str, int] | None, tuple[str, int] | None]:
    """The tables' versions (and the staging pool's) ``--as-of-staging`` names."""
    if text is None:
        return None, None
    from engine.api import tables_as_of_staging  # deferred: keeps `zync --help` fast

    pool, _, number = text.rpartition(":")
    if not number.strip().isdigit():
        raise UserError(f"--as-of-staging {text!r}: expected a version, or POOL:VERSION")
    version = int(number)
    found = tables_as_of_staging(lake, version, pool or None)
    staging = found[0].staging
    chosen = ", ".join(f"{t.name} at version {t.version}" for t in found)
    _err.print(f"as of {escape(staging)} version {version}: {escape(chosen)}")
    return {t.name: t.version for t in found}, (staging, version)


def register(root: typer.Typer) -> None:
    """Add the top-level `query` command."""
    root.command(name="query")(query)


def make_app() -> typer.Typer:
    """A typer app with just this command (tests, ``python -m``)."""
    return standalone_app(register)


if __name__ == "__main__":
    make_app()()
