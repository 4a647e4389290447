"""The connection options every command that talks to Kafka or the registry takes
(``--bootstrap-servers``, ``--registry-url``, ...), on top of ``~/.zync/kafka.json``,
``~/.zync/schema_registry.json`` and the ``ZYNC_KAFKA_*`` / ``ZYNC_REGISTRY_*``
variables: :func:`with_connection` adds them to a command, which receives a
:class:`Connection` that loads the profiles when asked."""

# No `from __future__ import annotations`: the connection options are added to each
# command's signature at import time, and typer needs real annotation objects.

import functools
import inspect
import logging
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer
from rich.markup import escape

from zync_tui.errors import user_errors, warn

if TYPE_CHECKING:
    from engine.api import KafkaProfile, RegistryProfile

T = TypeVar("T")

CONNECTION = "Connection (overrides ~/.zync/*.json and ZYNC_* variables)"


_KAFKA_OPTIONS: list[tuple[str, Any, Any]] = [
    (
        "bootstrap_servers",
        str | None,
        typer.Option("--bootstrap-servers", "-b", metavar="HOST:PORT[,...]",
                     help="Kafka brokers.", rich_help_panel=CONNECTION),
    ),
    (
        "security_protocol",
        str | None,
        typer.Option(help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
                     rich_help_panel=CONNECTION),
    ),
    (
        "sasl_mechanisms",
        str | None,
        typer.Option(help="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.", rich_help_panel=CONNECTION),
    ),
    ("sasl_username", str | None, typer.Option(help="SASL user.", rich_help_panel=CONNECTION)),
    (
        "sasl_password",
        str | None,
        typer.Option(help="SASL password (better: ZYNC_KAFKA_SASL_PASSWORD or kafka.json, "
                     "which other users cannot read in the process list).",
                     rich_help_panel=CONNECTION, show_default=False),
    ),
    (
        "tls_client_cert_file",
        Path | None,
        typer.Option(help="Client certificate (PEM) for mutual TLS.", rich_help_panel=CONNECTION),
    ),
    (
        "tls_client_key_file",
        Path | None,
        typer.Option(help="Client private key (PEM).", rich_help_panel=CONNECTION),
    ),
    (
        "tls_server_ca_cert_file",
        Path | None,
        typer.Option(help="CA certificate(s) (PEM) that signed the brokers' certificates.",
                     rich_help_panel=CONNECTION),
    ),
    (
        "tls_server_insecure_skip_verify",
        bool | None,
        typer.Option("--tls-server-insecure-skip-verify", show_default=False,
                     help="Do not verify the brokers' certificates (testing only).",
                     rich_help_panel=CONNECTION),
    ),
]

_REGISTRY_OPTIONS: list[tuple[str, Any, Any]] = [
    (
        "registry_url",
        str | None,
        typer.Option("--registry-url", "-r", metavar="URL", help="Schema Registry URL.",
                     rich_help_panel=CONNECTION),
    ),
    ("registry_user", str | None, typer.Option(help="Schema Registry user.",
                                               rich_help_panel=CONNECTION)),
    (
        "registry_password",
        str | None,
        typer.Option(help="Schema Registry password (better: ZYNC_REGISTRY_PASSWORD).",
                     rich_help_panel=CONNECTION, show_default=False),
    ),
]

_TIMEOUT_OPTION = (
    "timeout",
    float,
    typer.Option(help="Seconds to wait for Kafka or the registry to answer.",
                 rich_help_panel=CONNECTION),
)


@dataclass
class Connection:
    """The connection options of one command; loads profiles on demand."""

    kafka_overrides: dict[str, object]
    registry_overrides: dict[str, object]
    timeout: float = 10.0

    def kafka(self) -> "KafkaProfile":
        # engine.api loads pyarrow, delta-rs and Kafka: imported when a command runs, so
        # `zync --help` stays fast (likewise in every command module)
        from engine.api import load_kafka_profile

        return _with_warnings(lambda: load_kafka_profile(self.kafka_overrides))

    @typing.overload
    def registry(self, *, required: Literal[True]) -> "RegistryProfile": ...
    @typing.overload
    def registry(self, *, required: bool) -> "RegistryProfile | None": ...

    def registry(self, *, required: bool) -> "RegistryProfile | None":
        """The registry profile; None when nothing configures one and it is optional."""
        from engine.api import NotConfiguredError, load_registry_profile

        try:
            return _with_warnings(lambda: load_registry_profile(self.registry_overrides))
        except NotConfiguredError:
            if required:
                raise
            return None


def _with_warnings(load: Callable[[], T]) -> T:
    """Run ``load`` and show the warnings it raised (an exposed credentials file) on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return load()
        finally:
            for item in caught:
                warn(escape(str(item.message)))


def _quiet_librdkafka() -> None:
    """librdkafka's log lines go to our logger; without a handler Python would print its
    warnings on stderr, next to our one-line errors."""
    logger = logging.getLogger("engine.kafka.librdkafka")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False


def with_connection(*, kafka: bool = True, registry: bool = True) -> Callable[[Any], Any]:
    """Add the connection options to a command, which receives them as ``conn``."""
    options = (_KAFKA_OPTIONS if kafka else []) + (_REGISTRY_OPTIONS if registry else [])

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(fn, include_extras=True)
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(fn).parameters.values()
            if p.name != "conn"
        ]
        extra = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation=Annotated[annotation, option])
            for name, annotation, option in options
        ]
        name, annotation, option = _TIMEOUT_OPTION
        extra.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=10.0,
                                       annotation=Annotated[annotation, option]))

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            kafka_overrides = {n: kwargs.pop(n) for n, _, _ in _KAFKA_OPTIONS if n in kwargs}
            registry_overrides = {
                n.removeprefix("registry_"): kwargs.pop(n)
                for n, _, _ in _REGISTRY_OPTIONS
                if n in kwargs
            }
            conn = Connection(kafka_overrides, registry_overrides, kwargs.pop("timeout"))
            _quiet_librdkafka()
            with user_errors():
                return fn(conn=conn, **kwargs)

        params = own + extra
        del command.__wrapped__  # typer must see the new signature, not the original's
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return decorate
