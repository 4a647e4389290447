"""The zync home (``$ZYNC_HOME``, else ``~/.zync``) and how settings read the environment.

An empty environment variable counts as unset everywhere settings read one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def environ(env: Mapping[str, str] | None) -> Mapping[str, str]:
    """``env`` when given (tests pass their own), else the process's environment."""
    return os.environ if env is None else env


def env_value(env: Mapping[str, str], name: str) -> str | None:
    """The variable's value, or None when it is unset or empty."""
    value = env.get(name, "")
    return value if value != "" else None


def zync_home(env: Mapping[str, str] | None = None) -> Path:
    """The zync home: ``$ZYNC_HOME``, else ``~/.zync``. Not created here."""
    value = env_value(environ(env), "ZYNC_HOME")
    if value is None:
        return Path.home() / ".zync"
    return Path(value).expanduser().absolute()
