#!/usr/bin/env bash
# Run zync's checks, then its whole test suite (unit, integration, slow), in the project's .venv.
# The checks come first, while `zync setup` fetches the JVM artifacts and makes the class
# archives, and fail the run: ruff (lint), mypy (types; its incremental cache lives in
# zync's user cache, one per checkout path, so a new clone at the same path checks only
# what changed) and lint-imports (the import contracts), all configured in pyproject.toml.
# The layout test (tests/unit/test_boundaries.py: every module of engine, zync_tui and
# demo) runs with the suite. pytest then
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
mypy_cache="${XDG_CACHE_HOME:-$HOME/.cache}/zync/mypy"
mkdir -p "$mypy_cache"
# a checkout's cache unused for two weeks goes
find "$mypy_cache" -mindepth 1 -maxdepth 1 -type d -mtime +14 -exec rm -rf {} + 2>/dev/null || true
mypy_cache="$mypy_cache/$(printf %s "$root" | sha256sum | cut -c1-16)"
mkdir -p "$mypy_cache" && touch "$mypy_cache"
"$bin/mypy" --cache-dir "$mypy_cache"
echo "== lint-imports" >&2
"$bin/lint-imports" --no-cache --no-logo
echo "== zync setup" >&2
wait "$setup_pid"
trap - EXIT
echo "== pytest" >&2
exec "$bin/python" -m pytest -n "${ZYNC_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder \
  --durations=25 "$@"
