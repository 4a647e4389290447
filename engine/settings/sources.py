"""Merging a profile's sources: its file < environment variables < explicit overrides.

A profile declares its keys and their kinds (:class:`Kind`); :func:`merge` reads the
file strictly (unknown keys are errors naming the file and key), then the environment
(``<prefix><KEY>``), then the overrides (None or empty values are ignored), remembering
where each value came from so a wrong one is reported with its origin.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from engine.settings.errors import ConfigError
from engine.settings.files import read_json_object, warn_if_exposed
from engine.settings.home import env_value
from engine.settings.secret import Secret

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})

T = TypeVar("T")
E = TypeVar("E", bound=enum.StrEnum)


class Kind(enum.Enum):
    """What a setting's value is, which decides how its text is converted."""

    STR = enum.auto()
    BOOL = enum.auto()
    SECRET = enum.auto()
    PATH = enum.auto()


@dataclass(frozen=True)
class Setting:
    value: Any
    origin: str  # e.g. "~/.zync/kafka.json: sasl_username" or "$ZYNC_KAFKA_..."
    base_dir: Path | None = None  # relative paths in a file are relative to the file


@dataclass
class Merged:
    settings: dict[str, Setting] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def add_source(self, source: str) -> None:
        if source not in self.sources:
            self.sources.append(source)


def _unknown_key(where: str, key: str, known: Mapping[str, Kind]) -> ConfigError:
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"{where}: unknown key {key!r}{hint}; known keys: {', '.join(known)}")


def merge(
    keys: Mapping[str, Kind],
    path: Path,
    env: Mapping[str, str],
    env_prefix: str,
    overrides: Mapping[str, Any] | None,
) -> Merged:
    """Every key given by the file at ``path``, the environment or ``overrides``, the
    later winning. May warn :class:`~engine.settings.files.InsecureFileWarning`."""
    merged = Merged()
    data = read_json_object(path)
    if data is not None:
        for key in data:
            if key not in keys:
                raise _unknown_key(str(path), key, keys)
        warn_if_exposed(path, data, [k for k, kind in keys.items() if kind is Kind.SECRET])
        for key, value in data.items():
            if value is None or value == "":
                continue
            merged.settings[key] = Setting(value, f"{path}: {key}", path.parent)
            merged.add_source(str(path))
    for key in keys:
        name = env_prefix + key.upper()
        found = env_value(env, name)
        if found is not None:
            merged.settings[key] = Setting(found, f"${name}")
            merged.add_source("environment")
    for key, value in (overrides or {}).items():
        if key not in keys:
            raise _unknown_key("override", key, keys)
        if value is None or value == "":
            continue
        merged.settings[key] = Setting(value, f"option {key}")
        merged.add_source("options")
    return merged


def _convert(kind: Kind, setting: Setting) -> Any:
    value = setting.value
    if kind is Kind.BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ConfigError(f"{setting.origin}: expected true or false")
    if kind is Kind.SECRET:
        if isinstance(value, Secret):
            return value
        if isinstance(value, str):
            return Secret(value)
        raise ConfigError(f"{setting.origin}: expected a string")
    if kind is Kind.PATH:
        if not isinstance(value, str | Path):
            raise ConfigError(f"{setting.origin}: expected a file path")
        path = Path(value).expanduser()
        if not path.is_absolute():
            path = (setting.base_dir or Path.cwd()) / path
        if not path.is_file():
            raise ConfigError(f"{setting.origin}: no such file: {path}")
        return path
    if not isinstance(value, str):
        raise ConfigError(f"{setting.origin}: expected a string")
    return value.strip()


def choice(enum_type: type[E], setting: Setting) -> E:
    """The enum member a setting names (case-insensitive), or a ConfigError listing them."""
    text = str(setting.value).strip().upper()
    try:
        return enum_type(text)
    except ValueError:
        choices = ", ".join(member.value for member in enum_type)
        raise ConfigError(
            f"{setting.origin}: expected one of {choices} (got {setting.value!r})"
        ) from None


def typed(keys: Mapping[str, Kind], merged: Merged) -> dict[str, Any]:
    """Each merged value converted to its kind (``str``, ``bool``, Secret, Path)."""
    return {key: _convert(keys[key], s) for key, s in merged.settings.items()}


def build(cls: type[T], what: str, merged: Merged, values: dict[str, Any]) -> T:
    """``cls(**values)``, a cross-field ConfigError prefixed with where the values came from."""
    try:
        return cls(**values)
    except ConfigError as exc:
        raise ConfigError(f"{what} from {' + '.join(merged.sources)}: {exc}") from None
