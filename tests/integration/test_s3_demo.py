"""`zync demo --no-tui --lake s3://...`: the headless invoice demo on an S3 lake (moto's
server), through the command line, with the embedded broker and registry the demo
starts itself — the demo reaching S3 with the standard AWS settings only."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.api import dev_down
from engine.lake.pools import Lake
from tests.s3 import SECRET_KEY
from zync_tui.commands import standalone_app
from zync_tui.commands.console import register

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.s3]


def test_headless_demo_on_an_s3_lake(spark, s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("ZYNC_HOME", str(home))
    cli = standalone_app(register)
    try:
        result = CliRunner().invoke(cli, ["demo", "--no-tui", "--lake", s3_url, "--timeout", "240"])
    finally:
        dev_down(home=home)
    output = result.output
    assert result.exit_code == 0, output
    said = " ".join(output.split())  # the console wraps long lines
    assert "8 outputs in Staging, 8 on NewInvoices, 4 rows in the invoices table" in said
    assert f"ready in {s3_url}" in output
    assert SECRET_KEY not in output

    # the pools live on S3, and a reader of our own sees the outputs there
    lake = Lake(s3_url)
    assert {"Raw", "Staging"} <= set(lake.pool_names())
    staging = lake.open_pool("Staging")
    outputs = staging.dataset().to_table(columns=["kafka"]).column("kafka").to_pylist()
    topics = [row["topic"] for row in outputs if row is not None]
    assert topics.count("NewInvoices") == 8
