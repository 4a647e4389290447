"""The Kafka connection profile: ``kafka.json`` < ``$ZYNC_KAFKA_*`` < flags, and the
librdkafka configuration it gives."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from engine.settings.errors import ConfigError, NotConfiguredError
from engine.settings.home import environ, zync_home
from engine.settings.secret import Secret
from engine.settings.sources import Kind, build, choice, merge, typed

KAFKA_FILE: Final = "kafka.json"
KAFKA_ENV_PREFIX: Final = "ZYNC_KAFKA_"


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


_KAFKA_KEYS: Final[Mapping[str, Kind]] = {
    "bootstrap_servers": Kind.STR,
    "security_protocol": Kind.STR,
    "sasl_mechanisms": Kind.STR,
    "sasl_username": Kind.STR,
    "sasl_password": Kind.SECRET,
    "tls_client_cert_file": Kind.PATH,
    "tls_client_key_file": Kind.PATH,
    "tls_server_ca_cert_file": Kind.PATH,
    "tls_server_insecure_skip_verify": Kind.BOOL,
}


def kafka_profile_path(home: Path | None = None) -> Path:
    """``<zync home>/kafka.json``."""
    return (home or zync_home()) / KAFKA_FILE


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
    :class:`ConfigError` for anything wrong. May warn
    :class:`~engine.settings.files.InsecureFileWarning`.
    """
    env = environ(env)
    path = kafka_profile_path(home or zync_home(env))
    merged = merge(_KAFKA_KEYS, path, env, KAFKA_ENV_PREFIX, overrides)
    if "bootstrap_servers" not in merged.settings:
        raise NotConfiguredError(
            f"no Kafka configured: run `zync dev up` or write {path} "
            f"(or set {KAFKA_ENV_PREFIX}BOOTSTRAP_SERVERS)"
        )
    values = typed(_KAFKA_KEYS, merged)
    if "security_protocol" in values:
        values["security_protocol"] = choice(
            SecurityProtocol, merged.settings["security_protocol"]
        )
    if "sasl_mechanisms" in values:
        values["sasl_mechanisms"] = choice(SaslMechanism, merged.settings["sasl_mechanisms"])
    return build(KafkaProfile, "Kafka settings", merged, values)
