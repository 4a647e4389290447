"""Object storage settings: where the lake is, and how to reach an ``s3://`` lake.

The keys are the standard AWS ones, read as the AWS CLI and delta-rs read them:
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``
(or ``AWS_DEFAULT_REGION``), ``AWS_ENDPOINT_URL`` (an S3-compatible store),
``AWS_PROFILE`` (a profile of ``~/.aws/credentials`` / ``~/.aws/config``, resolved with
botocore) and ``AWS_ALLOW_HTTP`` (``true`` for an ``http://`` endpoint). The same keys may
be written in ``<zync home>/storage.json``, with ``lake`` (the lake's location) beside
them; the environment wins key by key.

:class:`StorageSettings` turns them into what each reader needs, so the user never
repeats them: delta-rs ``storage_options``, Spark's s3a Hadoop configuration, a pyarrow
file system and boto3 clients. Secrets are :class:`~engine.settings.secret.Secret`, so a
``repr`` or a message never shows them.

Instance-metadata credentials (EC2/ECS roles) are not looked up: that would send
requests to a link-local address on machines that are not in a cloud. Export the
role's credentials, or use a profile (``credential_process``, SSO, ``role_arn``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engine.settings.errors import ConfigError
from engine.settings.files import read_json_object, warn_if_exposed
from engine.settings.home import env_value, environ, zync_home
from engine.settings.secret import Secret

if TYPE_CHECKING:
    import pyarrow.fs

STORAGE_FILE: Final = "storage.json"
LAKE_KEY: Final = "lake"
AWS_KEYS: Final = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_PROFILE",
    "AWS_ALLOW_HTTP",
)
_SECRETS: Final = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
DEFAULT_REGION: Final = "us-east-1"
#: how long a request to the store may wait for a connection / an answer (seconds)
CONNECT_TIMEOUT: Final = 5
READ_TIMEOUT: Final = 30


@dataclass(frozen=True)
class StorageSettings:
    """How to reach S3 (or an S3-compatible store); ``origin`` says where they came from."""

    access_key_id: str | None = None
    secret_access_key: Secret | None = None
    session_token: Secret | None = None
    region: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    allow_http: bool = False
    origin: str = "defaults"

    def __post_init__(self) -> None:
        if self.endpoint_url is not None:
            if not self.endpoint_url.startswith(("http://", "https://")):
                raise ConfigError(
                    f"AWS_ENDPOINT_URL={self.endpoint_url!r} ({self.origin}): expected "
                    "http://HOST:PORT or https://HOST"
                )
            if self.endpoint_url.startswith("http://") and not self.allow_http:
                raise ConfigError(
                    f"AWS_ENDPOINT_URL={self.endpoint_url} is plain http ({self.origin}): "
                    "set AWS_ALLOW_HTTP=true to allow it"
                )
        if bool(self.access_key_id) != bool(self.secret_access_key):
            raise ConfigError(
                f"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together ({self.origin}): "
                "set both or neither"
            )

    @property
    def has_credentials(self) -> bool:
        return bool(self.access_key_id and self.secret_access_key)

    def where(self) -> str:
        """The endpoint in words, for messages (never a secret)."""
        return self.endpoint_url or f"AWS S3 ({self.region or DEFAULT_REGION})"

    def with_profile_credentials(self) -> StorageSettings:
        """These settings, with credentials and region from the AWS profile (``AWS_PROFILE``,
        else the default profile of ``~/.aws``) where they are not given. Instance
        metadata is never asked (see the module's docstring)."""
        if self.has_credentials and self.region:
            return self
        # deferred: botocore is only needed for profiles
        import botocore.session
        from botocore.exceptions import BotoCoreError

        try:
            session = botocore.session.Session(profile=self.profile)
            resolver = session.get_component("credential_provider")
            for name in ("iam-role", "container-role"):
                if resolver.get_provider(name) is not None:
                    resolver.remove(name)
            creds = None if self.has_credentials else session.get_credentials()
            region = self.region or session.get_config_variable("region")
        except BotoCoreError as exc:
            raise ConfigError(f"AWS profile {self.profile or 'default'}: {exc}") from None
        found = replace(self, region=region or None)
        if creds is not None and creds.access_key:
            frozen = creds.get_frozen_credentials()
            found = replace(
                found,
                access_key_id=frozen.access_key,
                secret_access_key=Secret(frozen.secret_key),
                session_token=Secret(frozen.token) if frozen.token else None,
                origin=f"{self.origin} + AWS profile {self.profile or 'default'}",
            )
        return found

    # -- what each reader needs ----------------------------------------------------------

    def delta_options(self) -> dict[str, str]:
        """delta-rs ``storage_options`` (secrets in clear: hand them over, never log)."""
        options = {"AWS_REGION": self.region or DEFAULT_REGION}
        if self.access_key_id and self.secret_access_key:
            options["AWS_ACCESS_KEY_ID"] = self.access_key_id
            options["AWS_SECRET_ACCESS_KEY"] = self.secret_access_key.reveal()
        if self.session_token:
            options["AWS_SESSION_TOKEN"] = self.session_token.reveal()
        if self.endpoint_url:
            options["AWS_ENDPOINT_URL"] = self.endpoint_url
        if self.allow_http:
            options["AWS_ALLOW_HTTP"] = "true"
        return options

    def hadoop_conf(self) -> dict[str, str]:
        """Spark's s3a configuration (``spark.hadoop.fs.s3a.*``), secrets in clear."""
        prefix = "spark.hadoop.fs.s3a."
        conf = {
            f"{prefix}impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            f"{prefix}endpoint.region": self.region or DEFAULT_REGION,
            f"{prefix}connection.timeout": str(READ_TIMEOUT * 1000),
            f"{prefix}connection.establish.timeout": str(CONNECT_TIMEOUT * 1000),
            f"{prefix}attempts.maximum": "3",
        }
        if self.access_key_id and self.secret_access_key:
            conf[f"{prefix}access.key"] = self.access_key_id
            conf[f"{prefix}secret.key"] = self.secret_access_key.reveal()
            provider = "SimpleAWSCredentialsProvider"
            if self.session_token:
                conf[f"{prefix}session.token"] = self.session_token.reveal()
                provider = "TemporaryAWSCredentialsProvider"
            conf[f"{prefix}aws.credentials.provider"] = f"org.apache.hadoop.fs.s3a.{provider}"
        if self.endpoint_url:
            conf[f"{prefix}endpoint"] = self.endpoint_url
            conf[f"{prefix}path.style.access"] = "true"
            conf[f"{prefix}connection.ssl.enabled"] = str(
                self.endpoint_url.startswith("https://")
            ).lower()
        return conf

    def arrow_filesystem(self) -> pyarrow.fs.S3FileSystem:
        """A pyarrow S3 file system with these settings."""
        import pyarrow.fs  # deferred: pyarrow's S3 support loads on use

        kwargs: dict[str, Any] = {
            "region": self.region or DEFAULT_REGION,
            "connect_timeout": CONNECT_TIMEOUT,
            "request_timeout": READ_TIMEOUT,
        }
        if self.access_key_id and self.secret_access_key:
            kwargs["access_key"] = self.access_key_id
            kwargs["secret_key"] = self.secret_access_key.reveal()
            if self.session_token:
                kwargs["session_token"] = self.session_token.reveal()
        else:
            kwargs["anonymous"] = True  # never pyarrow's own chain (instance metadata)
        if self.endpoint_url:
            scheme, _, rest = self.endpoint_url.partition("://")
            kwargs["scheme"] = scheme
            kwargs["endpoint_override"] = rest.rstrip("/")
        return pyarrow.fs.S3FileSystem(**kwargs)

    def client(self, service: str) -> Any:
        """A boto3 client (``s3``) with these settings and short timeouts."""
        # deferred: boto3 is only needed for an s3:// lake
        import boto3
        from botocore.config import Config

        config = Config(
            connect_timeout=CONNECT_TIMEOUT,
            read_timeout=READ_TIMEOUT,
            retries={"max_attempts": 2, "mode": "standard"},
            s3={"addressing_style": "path"} if self.endpoint_url else None,
        )
        return boto3.session.Session().client(
            service,
            region_name=self.region or DEFAULT_REGION,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=(
                self.secret_access_key.reveal() if self.secret_access_key else None
            ),
            aws_session_token=self.session_token.reveal() if self.session_token else None,
            config=config,
        )


def storage_file(home: Path | None = None) -> Path:
    """``<zync home>/storage.json``."""
    return (home or zync_home()) / STORAGE_FILE


def _file_values(env: Mapping[str, str], home: Path | None) -> tuple[Path, dict[str, Any]]:
    path = storage_file(home or zync_home(env))
    data = read_json_object(path) or {}
    known = (LAKE_KEY, *AWS_KEYS)
    for key in data:
        if key not in known:
            raise ConfigError(f"{path}: unknown key {key!r}; known keys: {', '.join(known)}")
        if data[key] is not None and not isinstance(data[key], str | bool):
            raise ConfigError(f"{path}: {key}: expected a string")
    warn_if_exposed(path, data, list(_SECRETS))
    return path, {k: v for k, v in data.items() if v not in (None, "")}


def configured_lake(
    env: Mapping[str, str] | None = None, home: Path | None = None
) -> tuple[str, str] | None:
    """The lake the configuration names, and where: ``$ZYNC_LAKE``, else ``lake`` in
    ``storage.json``; None when neither does."""
    env = environ(env)
    if (value := env_value(env, "ZYNC_LAKE")) is not None:
        return value, "$ZYNC_LAKE"
    path, data = _file_values(env, home)
    if LAKE_KEY in data:
        return str(data[LAKE_KEY]), f"{path}: {LAKE_KEY}"
    return None


def load_storage_settings(
    env: Mapping[str, str] | None = None, home: Path | None = None
) -> StorageSettings:
    """The AWS settings: ``storage.json`` < the environment. Raises :class:`ConfigError`."""
    env = environ(env)
    path, data = _file_values(env, home)
    values: dict[str, str | bool] = {}
    origins: list[str] = []
    for key in AWS_KEYS:
        if key in data:
            values[key] = data[key]
            if str(path) not in origins:
                origins.append(str(path))
        if (found := env_value(env, key)) is not None:
            values[key] = found
            if "environment" not in origins:
                origins.append("environment")
    origin = " + ".join(origins) or "defaults"
    allow = values.get("AWS_ALLOW_HTTP", False)
    if isinstance(allow, str):
        if allow.strip().lower() not in _TRUE | _FALSE:
            raise ConfigError(f"AWS_ALLOW_HTTP={allow!r} ({origin}): expected true or false")
        allow = allow.strip().lower() in _TRUE

    def text(key: str) -> str | None:
        value = values.get(key)
        return str(value).strip() or None if value is not None else None

    secret, token = text("AWS_SECRET_ACCESS_KEY"), text("AWS_SESSION_TOKEN")
    return StorageSettings(
        access_key_id=text("AWS_ACCESS_KEY_ID"),
        secret_access_key=Secret(secret) if secret else None,
        session_token=Secret(token) if token else None,
        region=text("AWS_REGION") or text("AWS_DEFAULT_REGION"),
        endpoint_url=(text("AWS_ENDPOINT_URL") or "").rstrip("/") or None,
        profile=text("AWS_PROFILE"),
        allow_http=bool(allow),
        origin=origin,
    )
