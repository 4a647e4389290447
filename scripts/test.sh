#!/usr/bin/env bash
# Run zync's whole test suite (unit, integration, slow) in the project's .venv.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k registry -x`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/venv.sh"
cd "$root"
exec "$root/.venv/bin/python" -m pytest "$@"
