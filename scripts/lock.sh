#!/usr/bin/env bash
# Re-resolve requirements.lock from pyproject.toml (run after changing a dependency).
# The lock pins every package of the project's environment (runtime + the test group) with
# hashes; scripts/venv.sh installs exactly that set. requirements-runtime.lock is its
# runtime part alone, at the same versions (constrained by the first): what the container
# image (deploy/image/Containerfile) installs with the same script.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/uv.sh"
cd "$root"
"$UV" pip compile pyproject.toml --group test --python-version 3.11 --generate-hashes \
  --no-header --quiet --output-file requirements.lock "$@"
"$UV" pip compile pyproject.toml --python-version 3.11 --generate-hashes \
  --no-header --quiet --constraint requirements.lock --output-file requirements-runtime.lock
echo "requirements.lock: $(grep -c '^[a-z]' requirements.lock) packages pinned" \
  "($(grep -c '^[a-z]' requirements-runtime.lock) at run time)" >&2
