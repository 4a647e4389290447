"""Where Spark runs: ``spark.json`` < ``$ZYNC_SPARK_MASTER`` < ``--spark-master``.

:class:`SparkSettings` is what :func:`engine.spark.get_spark` starts its one session
with; this module knows nothing of Spark itself (no pyspark import).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from engine.settings.errors import ConfigError
from engine.settings.files import read_json_object
from engine.settings.home import env_value, environ, zync_home

SPARK_FILE: Final = "spark.json"
DEFAULT_MASTER: Final = "local[*]"


@dataclass(frozen=True)
class SparkSettings:
    """Where Spark runs and with what extra configuration.

    ``master`` is ``local[*]`` by default, or a cluster URL such as ``spark://host:7077``.
    ``conf`` is passed to the session builder as is and wins over zync's defaults.
    """

    master: str = DEFAULT_MASTER
    conf: dict[str, str] = field(default_factory=dict)
    app_name: str = "zync"


def load_spark_settings(
    master: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> SparkSettings:
    """Spark settings from ``<home>/spark.json`` < ``$ZYNC_SPARK_MASTER`` < ``master``.

    ``spark.json`` looks like ``{"master": "spark://host:7077", "conf": {"key": "value"}}``;
    both keys are optional. Conf values may be strings, numbers or booleans (booleans
    become ``"true"``/``"false"``). The master defaults to ``local[*]``.
    """
    env = environ(env)
    path = (home or zync_home(env)) / SPARK_FILE
    data = read_json_object(path) or {}
    for key in data:
        if key not in ("master", "conf"):
            raise ConfigError(f"{path}: unknown key {key!r}; known keys: master, conf")
    file_master = data.get("master")
    if file_master is not None and not isinstance(file_master, str):
        raise ConfigError(f"{path}: master: expected a string")
    raw_conf = data.get("conf") or {}
    if not isinstance(raw_conf, dict):
        raise ConfigError(f"{path}: conf: expected an object of Spark settings")
    conf: dict[str, str] = {}
    for key, value in raw_conf.items():
        if isinstance(value, bool):
            conf[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            conf[key] = str(value)
        else:
            raise ConfigError(f"{path}: conf: {key}: expected a string, number or boolean")
    chosen = master or env_value(env, "ZYNC_SPARK_MASTER") or file_master or DEFAULT_MASTER
    return SparkSettings(master=chosen, conf=conf)
