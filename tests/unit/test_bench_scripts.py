"""Every benchmark runs as the README says (``.venv/bin/python bench/X.py``): its
``--help`` works from outside the checkout, so a script never depends on being run as a
module or from the repository's root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if "argparse" in p.read_text())


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_a_benchmark_script_starts_from_anywhere(script: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower()
