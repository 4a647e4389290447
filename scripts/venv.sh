#!/usr/bin/env bash
# Create or refresh the project's virtual environment in .venv (sourced by demo.sh and test.sh).
# Reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "error: zync needs Python 3.11 or newer as '$python' (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "zync: creating $venv" >&2
  "$python" -m venv "$venv"
fi
stamp="$venv/.zync-installed"
want="$(cat "$root/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "zync: installing dependencies into $venv (first run takes a few minutes)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root" --group "$root/pyproject.toml:test"
  echo "$want" > "$stamp"
fi
