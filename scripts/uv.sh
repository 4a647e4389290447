#!/usr/bin/env bash
# Make $UV point at the pinned uv (sourced by venv.sh and lock.sh). uv installs the locked
# environment in seconds where pip takes minutes. It is fetched once per user and version
# into zync's cache (${XDG_CACHE_HOME:-~/.cache}/zync/tools/uv-VERSION), so a new checkout
# does not fetch it again.
set -euo pipefail
_uv_version="0.13.9"
_python="${PYTHON:-python3}"
if ! "$_python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "error: zync needs Python 3.11 or newer as '$_python' (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
_tools="${XDG_CACHE_HOME:-$HOME/.cache}/zync/tools"
UV="$_tools/uv-$_uv_version/bin/uv"
if [ ! -x "$UV" ] || [ "$("$UV" --version 2>/dev/null | cut -d' ' -f2)" != "$_uv_version" ]; then
  echo "zync: fetching uv $_uv_version into $_tools" >&2
  mkdir -p "$_tools"
  # into a directory of its own, then renamed: another checkout may be fetching it too
  _fetch="$(mktemp -d "$_tools/.uv-$_uv_version.XXXXXX")"
  PIP_ROOT_USER_ACTION=ignore "$_python" -m pip install --quiet --disable-pip-version-check --target "$_fetch" \
    "uv==$_uv_version"
  rm -rf "$_tools/uv-$_uv_version"
  mv "$_fetch" "$_tools/uv-$_uv_version" 2>/dev/null || rm -rf "$_fetch"
fi
export UV
