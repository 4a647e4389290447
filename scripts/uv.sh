#!/usr/bin/env bash
# Make $UV point at the pinned uv (sourced by venv.sh and lock.sh). uv installs the locked
# environment in seconds where pip takes minutes; it is fetched once into .tools/uv.
set -euo pipefail
_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_uv_version="0.13.9"
_python="${PYTHON:-python3}"
if ! "$_python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "error: zync needs Python 3.11 or newer as '$_python' (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
UV="$_root/.tools/uv/bin/uv"
if [ ! -x "$UV" ] || [ "$("$UV" --version 2>/dev/null | cut -d' ' -f2)" != "$_uv_version" ]; then
  echo "zync: fetching uv $_uv_version into .tools/uv" >&2
  rm -rf "$_root/.tools/uv"
  PIP_ROOT_USER_ACTION=ignore "$_python" -m pip install --quiet --disable-pip-version-check --target "$_root/.tools/uv" \
    "uv==$_uv_version"
fi
export UV
