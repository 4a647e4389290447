#!/usr/bin/env bash
# Create or refresh the project's environment (sourced by demo.sh and test.sh):
#   1. .venv holds exactly the packages pinned in requirements.lock, plus zync itself
#      (editable); it is re-synced only when the lock or pyproject.toml changed. zync's own
#      modules and tests are compiled to bytecode on every call, and the packages' modules
#      the first time a process imports them: PYTHONDONTWRITEBYTECODE is unset for the
#      scripts that source this one, since an environment that sets it would make every
#      process compile every module it imports from source (`import engine.api` and its
#      names, pyspark, polars and textual: 2.8 s of CPU instead of 1.0). Compiling every
#      package at install instead (uv's --compile-bytecode) took 16 s and 30 CPU-s on a new
#      checkout, mostly for modules nothing imports (sympy's and moto's 1,500 files each);
#   2. the JVM artifacts declared in engine/jvm/artifacts.toml (delta-spark, Apache Kafka,
#      Spark's Kafka source, ...) are resolved into zync's cache by `zync setup`
#      (Maven when installed, else Ivy), which also makes the class archives of Spark's
#      driver and the broker (about a minute, once per .venv); afterwards zync runs offline.
# The container image (deploy/image/Containerfile) is built by this same script, with:
#   ZYNC_LOCK=requirements-runtime.lock  the runtime packages only (default: requirements.lock,
#                                        runtime + tests), at the same versions;
#   ZYNC_SETUP_ARGS="--with s3"          more arguments to `zync setup` (the S3 jars);
#   ZYNC_COMPILE=all                     every installed package compiled to bytecode now
#                                        (a read-only root file system can write none later).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
source "$root/scripts/uv.sh"

if [ ! -x "$venv/bin/python" ]; then
  echo "zync: creating $venv" >&2
  "$UV" venv --quiet --python "${PYTHON:-python3}" "$venv"
fi
stamp="$venv/.zync-installed"
# (the trailing word changes when this script installs differently)
lock="$root/${ZYNC_LOCK:-requirements.lock}"
want="$( (cat "$lock" "$root/pyproject.toml"; echo bytecode-on-import) | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "zync: installing the locked dependencies of $(basename "$lock") into $venv" >&2
  VIRTUAL_ENV="$venv" "$UV" pip sync --quiet --require-hashes "$lock"
  VIRTUAL_ENV="$venv" "$UV" pip install --quiet --no-deps -e "$root"
  echo "$want" > "$stamp"
fi
unset PYTHONDONTWRITEBYTECODE
sources=()
for dir in engine zync_tui demo tests; do [ -d "$root/$dir" ] && sources+=("$root/$dir"); done
"$venv/bin/python" -m compileall -q -j 0 "${sources[@]}" > /dev/null
if [ "${ZYNC_COMPILE:-}" = all ]; then
  "$venv/bin/python" -m compileall -q -j 0 "$venv/lib" > /dev/null || true  # a few test files of packages do not compile
fi
# test.sh sets ZYNC_SETUP=later: it runs `zync setup` itself, beside its checks
if [ "${ZYNC_SETUP:-now}" != later ]; then
  # shellcheck disable=SC2086 # ZYNC_SETUP_ARGS holds several words
  "$venv/bin/zync" setup --quiet ${ZYNC_SETUP_ARGS:-}
fi
