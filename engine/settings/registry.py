"""The Schema Registry connection profile: ``schema_registry.json`` <
``$ZYNC_REGISTRY_*`` < flags."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from engine.settings.errors import ConfigError, NotConfiguredError
from engine.settings.home import environ, zync_home
from engine.settings.secret import Secret
from engine.settings.sources import Kind, build, merge, typed

REGISTRY_FILE: Final = "schema_registry.json"
REGISTRY_ENV_PREFIX: Final = "ZYNC_REGISTRY_"


@dataclass(frozen=True)
class RegistryProfile:
    """How to reach a Confluent-compatible Schema Registry (``schema_registry.json``)."""

    url: str
    user: str | None = None
    password: Secret | None = None

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"url must start with http:// or https:// (got {self.url!r})")
        if bool(self.user) != bool(self.password):
            raise ConfigError("user and password go together: set both or neither")

    def client_config(self) -> dict[str, str]:
        """The configuration for ``confluent_kafka.schema_registry.SchemaRegistryClient``.

        The result holds the password in clear: hand it to the client, never log it.
        """
        config = {"url": self.url.rstrip("/")}
        if self.user and self.password:
            config["basic.auth.user.info"] = f"{self.user}:{self.password.reveal()}"
        return config

    def basic_auth(self) -> tuple[str, str] | None:
        """``(user, password)`` for HTTP clients such as httpx, or None without auth."""
        if self.user and self.password:
            return (self.user, self.password.reveal())
        return None


_REGISTRY_KEYS: Final[Mapping[str, Kind]] = {
    "url": Kind.STR,
    "user": Kind.STR,
    "password": Kind.SECRET,
}


def registry_profile_path(home: Path | None = None) -> Path:
    """``<zync home>/schema_registry.json``."""
    return (home or zync_home()) / REGISTRY_FILE


def load_registry_profile(
    overrides: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> RegistryProfile:
    """The registry profile from ``<home>/schema_registry.json`` < ``$ZYNC_REGISTRY_*`` <
    ``overrides`` (keys ``url``, ``user``, ``password``).

    Raises :class:`NotConfiguredError` when no source gives ``url`` and
    :class:`ConfigError` for anything wrong. May warn
    :class:`~engine.settings.files.InsecureFileWarning`.
    """
    env = environ(env)
    path = registry_profile_path(home or zync_home(env))
    merged = merge(_REGISTRY_KEYS, path, env, REGISTRY_ENV_PREFIX, overrides)
    if "url" not in merged.settings:
        raise NotConfiguredError(
            f"no Schema Registry configured: run `zync dev up` or write {path} "
            f"(or set {REGISTRY_ENV_PREFIX}URL)"
        )
    return build(
        RegistryProfile, "Schema Registry settings", merged, typed(_REGISTRY_KEYS, merged)
    )
