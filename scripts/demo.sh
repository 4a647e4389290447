#!/usr/bin/env bash
# Run the zync demo on the embedded default: broker, registry, lake and Spark on this machine.
# Extra arguments go to `zync demo`, e.g. `bash scripts/demo.sh --no-tui`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/venv.sh"
exec "$root/.venv/bin/zync" demo "$@"
