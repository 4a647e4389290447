"""Pipeline.start imports pyspark's types in its own thread before any loop starts: two
loops' threads importing them at once met Python's import-lock deadlock check
("deadlock detected by _ModuleLock('pyspark.sql.types')"), and a console came up with no
loops. Checked in a fresh interpreter, where nothing has imported pyspark yet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from pathlib import Path
from engine.api import KafkaProfile, Lake, Pipeline

pipeline = Pipeline(
    Path("demo/invoices/etl.yaml"), Lake(sys.argv[1]),
    kafka=KafkaProfile(bootstrap_servers="127.0.0.1:1"), registry=None,
)
assert "pyspark.sql.types" not in sys.modules, "imported before start: the check proves nothing"
seen = []
for name, service in pipeline.services.items():
    service.start = lambda name=name: seen.append((name, "pyspark.sql.types" in sys.modules))
pipeline.start()
print(sorted(seen))
"""


def test_the_loops_start_after_pyspark_types_are_imported(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "lake")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(
        sorted((name, True) for name in ("apply", "etl", "from-kafka", "to-kafka"))
    )
