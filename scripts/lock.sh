#!/usr/bin/env bash
# Re-resolve requirements.lock from pyproject.toml (run after changing a dependency).
# The lock pins every package of the project's environment (runtime + the test group) with
# hashes; scripts/venv.sh installs exactly that set.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/uv.sh"
cd "$root"
"$UV" pip compile pyproject.toml --group test --python-version 3.11 --generate-hashes \
  --no-header --quiet --output-file requirements.lock "$@"
echo "requirements.lock: $(grep -c '^[a-z]' requirements.lock) packages pinned" >&2
