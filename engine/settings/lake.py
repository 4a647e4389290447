"""Where the lake is: ``$ZYNC_LAKE``, else ``<zync home>/lake``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from engine.settings.errors import ConfigError
from engine.settings.home import env_value, environ, zync_home


def lake_path(env: Mapping[str, str] | None = None) -> Path:
    """The lake root directory: ``$ZYNC_LAKE``, else ``<zync home>/lake``. Not created here.

    Only local directories are supported for now; a URL (``s3://...``) is a
    :class:`ConfigError`.
    """
    env = environ(env)
    value = env_value(env, "ZYNC_LAKE")
    if value is None:
        return zync_home(env) / "lake"
    if "://" in value:
        raise ConfigError(
            f"$ZYNC_LAKE={value}: only a local directory is supported as the lake for now"
        )
    return Path(value).expanduser().absolute()
