"""Settings files in the zync home: reading a JSON object, writing one privately, and
warning when a file holding a password is readable by others."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.settings.errors import ConfigError


class InsecureFileWarning(UserWarning):
    """A file holding a password can be read by group or others."""


def write_private_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as JSON to ``path``, readable by its owner only (mode 0600).

    The parent directory is created (mode 0700) when missing. The file is replaced
    atomically, so a reader never sees half of it. Raises :class:`OSError`.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, sort_keys=True)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when the file does not exist.

    Raises :class:`ConfigError` (one line, naming the file and line) for bad JSON, a
    top level that is not an object, or an unreadable file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{path}: cannot read: {reason}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object at the top level")
    return data


def warn_if_exposed(path: Path, data: Mapping[str, Any], secret_keys: list[str]) -> None:
    """Warn :class:`InsecureFileWarning` when ``data`` (read from ``path``) holds a
    password and the file is readable by group or others.

    The warning points at the caller of the profile loader that called the merge that
    called this (``stacklevel=4``), so keep that call depth.
    """
    if not any(data.get(key) for key in secret_keys):
        return
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return
    if mode & 0o044:
        warnings.warn(
            f"{path} holds a password and is readable by group/others "
            f"(mode {mode:04o}): run `chmod 600 {path}`",
            InsecureFileWarning,
            stacklevel=4,
        )
