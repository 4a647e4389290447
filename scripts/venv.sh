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
want="$( (cat "$root/requirements.lock" "$root/pyproject.toml"; echo bytecode-on-import) | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "zync: installing the locked dependencies into $venv" >&2
  VIRTUAL_ENV="$venv" "$UV" pip sync --quiet --require-hashes "$root/requirements.lock"
  VIRTUAL_ENV="$venv" "$UV" pip install --quiet --no-deps -e "$root"
  echo "$want" > "$stamp"
fi
unset PYTHONDONTWRITEBYTECODE
"$venv/bin/python" -m compileall -q -j 0 "$root/engine" "$root/zync_tui" "$root/demo" "$root/tests" > /dev/null
# test.sh sets ZYNC_SETUP=later: it runs `zync setup` itself, beside its checks
if [ "${ZYNC_SETUP:-now}" != later ]; then
  "$venv/bin/zync" setup --quiet
fi
