#!/usr/bin/env bash
# Run zync's whole test suite (unit, integration, slow) in the project's .venv.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k registry -x`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/venv.sh"
cd "$root"
# The TLS test puts Debian's stunnel in front of the broker when it can; without it the
# test uses a stdlib TLS proxy instead. Install it best-effort where we may.
if ! command -v stunnel >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get install -y -qq stunnel4 >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq stunnel4 >/dev/null 2>&1; }) || true
fi
exec "$root/.venv/bin/python" -m pytest "$@"
