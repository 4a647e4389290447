#!/usr/bin/env bash
# Run zync's checks, then its whole test suite (unit, integration, slow), in the project's .venv.
# The checks come first, while `zync setup` fetches the JVM artifacts and makes the class
# archives, and fail the run: ruff (lint), mypy (types), lint-imports (the import
# contracts), all configured in pyproject.toml, and the layout test
# (tests/unit/test_boundaries.py: every module of engine, zync_tui and demo). pytest then
# runs on three workers (pytest-xdist; four were slower: bench/RESULTS.md, "The test suite";
# each test file stays on one worker, the longest files first — tests/conftest.py orders them
# by their `slow(seconds=…)` marks, and --no-loadscope-reorder keeps that order: xdist would
# otherwise start the files with the most tests first, which are the quick ones; most tests
# wait on brokers, JVMs and subprocesses, so three overlap well on two cores) and prints the
# 25 slowest tests.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k registry -x`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ZYNC_SETUP=later source "$root/scripts/venv.sh"
cd "$root"
bin="$root/.venv/bin"
# `zync setup` (the JVM artifacts, with the optional set the S3 lake tests need for Spark
# over s3a, ~600 MB, fetched once; then the class archives, about a minute on a fresh
# checkout) runs beside the checks, which need none of it; the run waits for it before
# pytest, and stops it if a check fails first
"$bin/zync" setup --quiet --with s3 &
setup_pid=$!
trap 'kill "$setup_pid" 2>/dev/null || true' EXIT

echo "== ruff" >&2
"$bin/ruff" check --quiet .
echo "== mypy" >&2
"$bin/mypy"
echo "== lint-imports" >&2
"$bin/lint-imports" --no-cache --no-logo
echo "== layout" >&2
"$bin/python" -m pytest --quiet --no-header -p no:cacheprovider tests/unit/test_boundaries.py

echo "== zync setup" >&2
wait "$setup_pid"
trap - EXIT
echo "== pytest" >&2
exec "$bin/python" -m pytest -n "${ZYNC_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder \
  --durations=25 "$@"
