"""Connection profiles and local settings: Kafka, Schema Registry, lake, Spark.

Where settings come from, weakest first (a later source wins key by key):

1. files in the zync home (``$ZYNC_HOME``, else ``~/.zync``) with zync's keys:
   ``kafka.json``, ``schema_registry.json`` and ``spark.json``;
2. environment variables;
3. explicit overrides (command-line flags), passed as a mapping to the loaders.

Environment variables read here (an empty value counts as unset):

==================================================  ==============================
``ZYNC_HOME``                                        the zync home (default ``~/.zync``)
``ZYNC_LAKE``                                        lake root (default ``<home>/lake``)
``ZYNC_KAFKA_BOOTSTRAP_SERVERS``                     ``bootstrap_servers``
``ZYNC_KAFKA_SECURITY_PROTOCOL``                     ``security_protocol``
``ZYNC_KAFKA_SASL_MECHANISMS``                       ``sasl_mechanisms``
``ZYNC_KAFKA_SASL_USERNAME``                         ``sasl_username``
``ZYNC_KAFKA_SASL_PASSWORD``                         ``sasl_password``
``ZYNC_KAFKA_TLS_CLIENT_CERT_FILE``                  ``tls_client_cert_file``
``ZYNC_KAFKA_TLS_CLIENT_KEY_FILE``                   ``tls_client_key_file``
``ZYNC_KAFKA_TLS_SERVER_CA_CERT_FILE``               ``tls_server_ca_cert_file``
``ZYNC_KAFKA_TLS_SERVER_INSECURE_SKIP_VERIFY``       ``tls_server_insecure_skip_verify``
``ZYNC_REGISTRY_URL``                                ``url`` (Schema Registry)
``ZYNC_REGISTRY_USER``                               ``user``
``ZYNC_REGISTRY_PASSWORD``                           ``password``
``ZYNC_SPARK_MASTER``                                Spark master (default ``local[*]``)
==================================================  ==============================

Boolean variables accept ``1/0``, ``true/false``, ``yes/no``, ``on/off``.

Profiles are strict: an unknown key in a file is an error naming the file and the key,
and so is a value of the wrong type. Passwords are held as :class:`Secret`, whose
``repr``/``str`` is ``***``; they appear in no message this module produces. A file that
holds a password and is readable by group or others triggers an
:class:`InsecureFileWarning` through :mod:`warnings` (the CLI shows it; a console can
collect it with :func:`warnings.catch_warnings`).

Nothing happens at import time; the zync home is created only when something is
written there (:func:`write_private_json`).
"""

from __future__ import annotations

import difflib
import enum
import hmac
import json
import os
import stat
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engine.errors import ZyncError

if TYPE_CHECKING:
    from engine.spark import SparkSettings

KAFKA_FILE: Final = "kafka.json"
REGISTRY_FILE: Final = "schema_registry.json"
SPARK_FILE: Final = "spark.json"

KAFKA_ENV_PREFIX: Final = "ZYNC_KAFKA_"
REGISTRY_ENV_PREFIX: Final = "ZYNC_REGISTRY_"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class ConfigError(ZyncError, ValueError):
    """A setting is missing or wrong; the message is one line that says where."""


class NotConfiguredError(ConfigError):
    """A command needs a service (Kafka, Schema Registry) that nothing configures."""


class InsecureFileWarning(UserWarning):
    """A file holding a password can be read by group or others."""


class Secret:
    """A string that never shows itself: ``repr`` is ``'***'`` and ``str`` is ``***``.

    Call :meth:`reveal` where the real value is needed (a client's configuration).
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("Secret holds a string")
        self._value = value

    def reveal(self) -> str:
        """The secret value itself; never log or print it."""
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    def __str__(self) -> str:
        return "***"

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))


class SecurityProtocol(enum.StrEnum):
    """How clients talk to the Kafka brokers (librdkafka ``security.protocol``)."""

    PLAINTEXT = "PLAINTEXT"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"
    SSL = "SSL"

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)


class SaslMechanism(enum.StrEnum):
    """SASL mechanisms zync supports (librdkafka ``sasl.mechanisms``)."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


# --------------------------------------------------------------------------- locations


def _environ(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _env_value(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "")
    return value if value != "" else None


def zync_home(env: Mapping[str, str] | None = None) -> Path:
    """The zync home: ``$ZYNC_HOME``, else ``~/.zync``. Not created here."""
    value = _env_value(_environ(env), "ZYNC_HOME")
    if value is None:
        return Path.home() / ".zync"
    return Path(value).expanduser().absolute()


def lake_path(env: Mapping[str, str] | None = None) -> Path:
    """The lake root directory: ``$ZYNC_LAKE``, else ``<zync home>/lake``. Not created here.

    Only local directories are supported for now; a URL (``s3://...``) is a
    :class:`ConfigError`.
    """
    env = _environ(env)
    value = _env_value(env, "ZYNC_LAKE")
    if value is None:
        return zync_home(env) / "lake"
    if "://" in value:
        raise ConfigError(
            f"$ZYNC_LAKE={value}: only a local directory is supported as the lake for now"
        )
    return Path(value).expanduser().absolute()


def kafka_profile_path(home: Path | None = None) -> Path:
    """``<zync home>/kafka.json``."""
    return (home or zync_home()) / KAFKA_FILE


def registry_profile_path(home: Path | None = None) -> Path:
    """``<zync home>/schema_registry.json``."""
    return (home or zync_home()) / REGISTRY_FILE


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


# --------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class KafkaProfile:
    """How to reach a Kafka cluster; keys as in zync's ``~/.zync/kafka.json``.

    Cross-field rules are checked on construction: SASL protocols need a username and
    password, SASL settings need a SASL protocol, TLS files need SSL or SASL_SSL, and a
    client certificate needs its key (and the other way round).
    """

    bootstrap_servers: str
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanisms: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    tls_client_cert_file: Path | None = None
    tls_client_key_file: Path | None = None
    tls_server_ca_cert_file: Path | None = None
    tls_server_insecure_skip_verify: bool = False

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ConfigError("bootstrap_servers is empty")
        protocol = self.security_protocol
        if protocol.uses_sasl:
            if not self.sasl_username or not self.sasl_password:
                raise ConfigError(
                    f"security_protocol {protocol} needs sasl_username and sasl_password"
                )
        else:
            for name in ("sasl_mechanisms", "sasl_username", "sasl_password"):
                if getattr(self, name):
                    raise ConfigError(
                        f"{name} is set but security_protocol is {protocol}: "
                        "use SASL_PLAINTEXT or SASL_SSL, or remove it"
                    )
        if not protocol.uses_tls:
            for name in (
                "tls_client_cert_file",
                "tls_client_key_file",
                "tls_server_ca_cert_file",
                "tls_server_insecure_skip_verify",
            ):
                if getattr(self, name):
                    raise ConfigError(
                        f"{name} is set but security_protocol is {protocol}: "
                        "use SSL or SASL_SSL, or remove it"
                    )
        if bool(self.tls_client_cert_file) != bool(self.tls_client_key_file):
            raise ConfigError(
                "tls_client_cert_file and tls_client_key_file go together: set both or neither"
            )

    def librdkafka_config(self) -> dict[str, str]:
        """The settings for a confluent-kafka client (librdkafka keys).

        The result holds the password in clear: hand it to the client, never log it.
        """
        config = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": str(self.security_protocol),
        }
        if self.security_protocol.uses_sasl:
            mechanism = self.sasl_mechanisms or SaslMechanism.PLAIN
            config["sasl.mechanisms"] = str(mechanism)
            config["sasl.username"] = self.sasl_username or ""
            config["sasl.password"] = self.sasl_password.reveal() if self.sasl_password else ""
        if self.tls_client_cert_file:
            config["ssl.certificate.location"] = str(self.tls_client_cert_file)
        if self.tls_client_key_file:
            config["ssl.key.location"] = str(self.tls_client_key_file)
        if self.tls_server_ca_cert_file:
            config["ssl.ca.location"] = str(self.tls_server_ca_cert_file)
        if self.tls_server_insecure_skip_verify:
            config["enable.ssl.certificate.verification"] = "false"
            config["ssl.endpoint.identification.algorithm"] = "none"
        return config


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


# --------------------------------------------------------------------------- loading


class _Kind(enum.Enum):
    STR = enum.auto()
    BOOL = enum.auto()
    SECRET = enum.auto()
    PATH = enum.auto()


_KAFKA_KEYS: Final[Mapping[str, _Kind]] = {
    "bootstrap_servers": _Kind.STR,
    "security_protocol": _Kind.STR,
    "sasl_mechanisms": _Kind.STR,
    "sasl_username": _Kind.STR,
    "sasl_password": _Kind.SECRET,
    "tls_client_cert_file": _Kind.PATH,
    "tls_client_key_file": _Kind.PATH,
    "tls_server_ca_cert_file": _Kind.PATH,
    "tls_server_insecure_skip_verify": _Kind.BOOL,
}

_REGISTRY_KEYS: Final[Mapping[str, _Kind]] = {
    "url": _Kind.STR,
    "user": _Kind.STR,
    "password": _Kind.SECRET,
}


@dataclass(frozen=True)
class _Setting:
    value: Any
    origin: str  # e.g. "~/.zync/kafka.json: sasl_username" or "$ZYNC_KAFKA_..."
    base_dir: Path | None = None  # relative paths in a file are relative to the file


@dataclass
class _Merged:
    settings: dict[str, _Setting] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def add_source(self, source: str) -> None:
        if source not in self.sources:
            self.sources.append(source)


def _unknown_key(where: str, key: str, known: Mapping[str, _Kind]) -> ConfigError:
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"{where}: unknown key {key!r}{hint}; known keys: {', '.join(known)}")


def _warn_if_exposed(path: Path, data: Mapping[str, Any], secret_keys: list[str]) -> None:
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


def _merge(
    keys: Mapping[str, _Kind],
    path: Path,
    env: Mapping[str, str],
    env_prefix: str,
    overrides: Mapping[str, Any] | None,
) -> _Merged:
    merged = _Merged()
    data = read_json_object(path)
    if data is not None:
        for key in data:
            if key not in keys:
                raise _unknown_key(str(path), key, keys)
        _warn_if_exposed(path, data, [k for k, kind in keys.items() if kind is _Kind.SECRET])
        for key, value in data.items():
            if value is None or value == "":
                continue
            merged.settings[key] = _Setting(value, f"{path}: {key}", path.parent)
            merged.add_source(str(path))
    for key in keys:
        name = env_prefix + key.upper()
        env_value = _env_value(env, name)
        if env_value is not None:
            merged.settings[key] = _Setting(env_value, f"${name}")
            merged.add_source("environment")
    for key, value in (overrides or {}).items():
        if key not in keys:
            raise _unknown_key("override", key, keys)
        if value is None or value == "":
            continue
        merged.settings[key] = _Setting(value, f"option {key}")
        merged.add_source("options")
    return merged


def _convert(kind: _Kind, setting: _Setting) -> Any:
    value = setting.value
    if kind is _Kind.BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ConfigError(f"{setting.origin}: expected true or false")
    if kind is _Kind.SECRET:
        if isinstance(value, Secret):
            return value
        if isinstance(value, str):
            return Secret(value)
        raise ConfigError(f"{setting.origin}: expected a string")
    if kind is _Kind.PATH:
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


def _choice(enum_type: type[enum.StrEnum], setting: _Setting) -> Any:
    text = str(setting.value).strip().upper()
    try:
        return enum_type(text)
    except ValueError:
        choices = ", ".join(member.value for member in enum_type)
        raise ConfigError(
            f"{setting.origin}: expected one of {choices} (got {setting.value!r})"
        ) from None


def _typed(keys: Mapping[str, _Kind], merged: _Merged) -> dict[str, Any]:
    return {key: _convert(keys[key], s) for key, s in merged.settings.items()}


def _build(cls: type[Any], what: str, merged: _Merged, values: dict[str, Any]) -> Any:
    try:
        return cls(**values)
    except ConfigError as exc:
        raise ConfigError(f"{what} from {' + '.join(merged.sources)}: {exc}") from None


def load_kafka_profile(
    overrides: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> KafkaProfile:
    """The Kafka profile from ``<home>/kafka.json`` < ``$ZYNC_KAFKA_*`` < ``overrides``.

    ``overrides`` uses the file's keys (``{"bootstrap_servers": "host:9092"}``); None
    values are ignored, so unset flags can be passed as they are. Raises
    :class:`NotConfiguredError` when no source gives ``bootstrap_servers`` and
    :class:`ConfigError` for anything wrong. May warn :class:`InsecureFileWarning`.
    """
    env = _environ(env)
    path = kafka_profile_path(home or zync_home(env))
    merged = _merge(_KAFKA_KEYS, path, env, KAFKA_ENV_PREFIX, overrides)
    if "bootstrap_servers" not in merged.settings:
        raise NotConfiguredError(
            f"no Kafka configured: run `zync dev up` or write {path} "
            f"(or set {KAFKA_ENV_PREFIX}BOOTSTRAP_SERVERS)"
        )
    values = _typed(_KAFKA_KEYS, merged)
    if "security_protocol" in values:
        values["security_protocol"] = _choice(
            SecurityProtocol, merged.settings["security_protocol"]
        )
    if "sasl_mechanisms" in values:
        values["sasl_mechanisms"] = _choice(SaslMechanism, merged.settings["sasl_mechanisms"])
    return _build(KafkaProfile, "Kafka settings", merged, values)


def load_registry_profile(
    overrides: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> RegistryProfile:
    """The registry profile from ``<home>/schema_registry.json`` < ``$ZYNC_REGISTRY_*`` <
    ``overrides`` (keys ``url``, ``user``, ``password``).

    Raises :class:`NotConfiguredError` when no source gives ``url`` and
    :class:`ConfigError` for anything wrong. May warn :class:`InsecureFileWarning`.
    """
    env = _environ(env)
    path = registry_profile_path(home or zync_home(env))
    merged = _merge(_REGISTRY_KEYS, path, env, REGISTRY_ENV_PREFIX, overrides)
    if "url" not in merged.settings:
        raise NotConfiguredError(
            f"no Schema Registry configured: run `zync dev up` or write {path} "
            f"(or set {REGISTRY_ENV_PREFIX}URL)"
        )
    return _build(
        RegistryProfile, "Schema Registry settings", merged, _typed(_REGISTRY_KEYS, merged)
    )


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
    from engine.spark import DEFAULT_MASTER, SparkSettings

    env = _environ(env)
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
    chosen = master or _env_value(env, "ZYNC_SPARK_MASTER") or file_master or DEFAULT_MASTER
    return SparkSettings(master=chosen, conf=conf)
