"""A pipeline chart's values: their schema, their defaults, what the user's connection
profiles and overrides set, the check helm makes at install, and values.yaml.

The schema is one file, ``files/values.schema.yaml`` (each value's type, default and
description, in values.yaml's order). From it come the chart's ``values.schema.json``
(which helm checks every install and upgrade against), ``values.yaml`` (the defaults with
their descriptions as comments, and what ``zync build`` was told), ``zync build
--values-only``, and :func:`check`, which refuses at build time what helm would refuse at
install time, in one line naming the key.

Profiles (``kafka.json``, ``schema_registry.json``, ``storage.json``, ``spark.json`` of a
directory laid out as a zync home) give the connection values; their secrets are never
copied (:func:`from_profiles` says which Secret to name instead).
"""

from __future__ import annotations

import copy
import difflib
import ipaddress
import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from engine.errors import ZyncError
from engine.settings.errors import ConfigError, NotConfiguredError
from engine.settings.kafka import load_kafka_profile
from engine.settings.registry import load_registry_profile
from engine.settings.spark import load_spark_settings
from engine.settings.storage import configured_lake, load_storage_settings

Values = dict[str, Any]


class ChartError(ZyncError, ValueError):
    """A pipeline or values the chart cannot deploy; the message names the key."""


@cache
def _schema_text() -> str:
    return resources.files("engine.chart").joinpath("files/values.schema.yaml").read_text()


def schema() -> dict[str, Any]:
    """The values' JSON schema (a fresh copy)."""
    return dict(yaml.safe_load(_schema_text()))


def schema_json() -> str:
    """``values.schema.json``: the schema without zync's own annotations."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if not str(k).startswith("x-")}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return json.dumps(strip(schema()), indent=2) + "\n"


def defaults() -> Values:
    """Every value's default, in the schema's order."""

    def walk(node: Mapping[str, Any]) -> Any:
        if "default" in node:
            return copy.deepcopy(node["default"])
        return {k: walk(v) for k, v in node.get("properties", {}).items()}

    return dict(walk(schema()))


def required_at_install() -> list[str]:
    """The keys a user must set (``x-required-at-install``), dotted."""
    found: list[str] = []

    def walk(node: Mapping[str, Any], path: str) -> None:
        if node.get("x-required-at-install"):
            found.append(path)
        for key, child in node.get("properties", {}).items():
            walk(child, f"{path}.{key}" if path else key)

    walk(schema(), "")
    return found


def merge(base: Values, overlay: Mapping[str, Any]) -> Values:
    """``overlay`` over ``base``, mappings merged key by key (as helm merges values)."""
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def parse_set(items: Iterable[str]) -> Values:
    """``--set a.b=value`` (repeatable) as values; the value is read as YAML (``3``,
    ``true``, ``[a, b]``), as helm's ``--set`` reads scalars."""
    values: Values = {}
    for item in items:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(p.strip() for p in parts):
            raise ChartError(f"--set {item!r}: expected KEY=VALUE, e.g. fromKafka.replicas=3")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        node = values
        for part in parts[:-1]:
            node = node.setdefault(part.strip(), {})
            if not isinstance(node, dict):
                raise ChartError(f"--set {item!r}: {part} is set to a value already")
        node[parts[-1].strip()] = value
    return values


def load_values_file(path: Path) -> Values:
    """A values file (YAML mapping), as ``helm -f`` reads one."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ChartError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f": line {mark.line + 1}" if mark is not None else ""
        raise ChartError(f"{path}{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ChartError(f"{path}: expected a mapping of values")
    return data


def check(values: Mapping[str, Any], source: str = "values", *, at_install: bool = True) -> None:
    """Refuse values the schema refuses (helm would, at install) in one line naming the
    key: ``values: spark.mode: 'yarn' is not one of ...``. ``at_install`` False: the
    values a user sets at install (:func:`required_at_install`) may still be empty."""
    import jsonschema  # deferred: only `zync build` checks values

    validator = jsonschema.Draft7Validator(schema())
    later = set() if at_install else {tuple(k.split(".")) for k in required_at_install()}
    errors = [
        e
        for e in _leaves(list(validator.iter_errors(values)))
        if not (tuple(str(p) for p in e.absolute_path) in later and e.instance == "")
    ]
    if not errors:
        return
    error = max(errors, key=lambda e: (len(e.absolute_path), e.validator != "required"))
    where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    raise ChartError(f"{source}: {where}: {_message(error)}")


def _leaves(errors: list[Any]) -> list[Any]:
    """The errors inside if/then and allOf, not the ones that sum them up."""
    flat: list[Any] = []
    todo = list(errors)
    while todo:
        error = todo.pop()
        if error.context:
            todo.extend(error.context)
        else:
            flat.append(error)
    return flat


def _message(error: Any) -> str:
    if error.validator == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(known))[0]
        close = difflib.get_close_matches(unknown, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown key {unknown!r}{hint}; known: {', '.join(known)}"
    if error.validator == "minLength" and error.instance == "":
        return "must be set"
    if error.validator == "pattern":
        return f"{error.instance!r} is not {_pattern_words(error.validator_value)}"
    return str(error.message)


def _pattern_words(pattern: str) -> str:
    known = {
        "^(s3://": "s3://BUCKET/PREFIX or an absolute path",
        "^[^\\s,]+:[0-9]+": "host:port[,host:port...]",
        "^spark://": "spark://host:port[,host2:port]",
        "^(k8s://": "k8s://https://host:port",
        "^(local": "local, local[N] or local[*]",
        "^(https?://": "an http:// or https:// URL",
        "^([0-9]+(ms": "a duration such as 30s, 5m or 1h",
        "^[0-9]+[kmgt]": "a size such as 512m or 4g",
        "^[a-z0-9]([a-z0-9-]": "a name of lowercase letters, digits and '-', at most 20",
    }
    return next((words for start, words in known.items() if pattern.startswith(start)), f"/{pattern}/")


# -- connection profiles → values -------------------------------------------------------


def _loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hosts(servers: str) -> list[str]:
    return [s.strip().rpartition(":")[0] for s in servers.split(",") if s.strip()]


def from_profiles(home: Path) -> tuple[Values, list[str]]:
    """The values a directory of connection profiles gives (laid out as a zync home:
    ``kafka.json``, ``schema_registry.json``, ``storage.json``, ``spark.json``), and
    notes on what was left out (secrets, local files). The environment is not read."""
    if not home.is_dir():
        raise ChartError(f"--profiles {home}: no such directory")
    values: Values = {}
    notes: list[str] = []
    try:
        kafka = load_kafka_profile(env={}, home=home)
    except NotConfiguredError:
        kafka = None
    except ConfigError as exc:
        raise ChartError(str(exc)) from None
    if kafka is not None:
        loopback = [h for h in _hosts(kafka.bootstrap_servers) if _loopback(h)]
        if loopback:
            raise ChartError(
                f"{home / 'kafka.json'}: bootstrap_servers {kafka.bootstrap_servers}: "
                f"{loopback[0]} is this machine's loopback, which no pod reaches"
            )
        section: Values = {
            "bootstrapServers": kafka.bootstrap_servers,
            "securityProtocol": str(kafka.security_protocol),
        }
        if kafka.security_protocol.uses_sasl:
            section["sasl"] = {
                "mechanism": str(kafka.sasl_mechanisms or "PLAIN"),
                "username": kafka.sasl_username or "",
            }
            if kafka.sasl_password is not None:
                notes.append(
                    "kafka.json's sasl_password is not copied: put it in a Secret and set "
                    "kafka.sasl.passwordSecret.name"
                )
        if kafka.tls_client_cert_file or kafka.tls_server_ca_cert_file:
            section["tls"] = {"clientAuth": bool(kafka.tls_client_cert_file)}
            notes.append(
                "kafka.json's certificate files are not copied: put them in a Secret (ca.crt, "
                "tls.crt, tls.key) and set kafka.tls.secretName"
            )
        values["kafka"] = section
    try:
        registry = load_registry_profile(env={}, home=home)
    except NotConfiguredError:
        registry = None
    except ConfigError as exc:
        raise ChartError(str(exc)) from None
    if registry is not None:
        host = urlsplit(registry.url).hostname or ""
        if _loopback(host):
            raise ChartError(
                f"{home / 'schema_registry.json'}: url {registry.url}: {host} is this "
                "machine's loopback, which no pod reaches"
            )
        values["schemaRegistry"] = {"url": registry.url, "user": registry.user or ""}
        if registry.password is not None:
            notes.append(
                "schema_registry.json's password is not copied: put it in a Secret and set "
                "schemaRegistry.passwordSecret.name"
            )
    try:
        storage = load_storage_settings(env={}, home=home)
        lake = configured_lake(env={}, home=home)
        spark = load_spark_settings(env={}, home=home)
    except ConfigError as exc:
        raise ChartError(str(exc)) from None
    lake_values: Values = {}
    if lake is not None:
        lake_values["url"] = lake[0]
    s3: Values = {}
    if storage.region:
        s3["region"] = storage.region
    if storage.endpoint_url:
        s3["endpoint"] = storage.endpoint_url
    if storage.allow_http:
        s3["allowHttp"] = True
    if s3:
        lake_values["s3"] = s3
    if storage.has_credentials or storage.profile:
        notes.append(
            "storage.json's AWS credentials are not copied: put them in a Secret and set "
            "lake.s3.credentialsSecret.name, or give the pods a cloud identity through "
            "serviceAccount.annotations"
        )
    if lake_values:
        values["lake"] = lake_values
    if (home / "spark.json").is_file():
        values["spark"] = _spark_values(spark.master, spark.conf)
    return values, notes


def _spark_values(master: str, conf: Mapping[str, str]) -> Values:
    if master.startswith("spark://"):
        mode = "standalone"
    elif master.startswith("k8s://"):
        mode = "kubernetes"
    else:
        mode = "local"
    section: Values = {"mode": mode, "master": master}
    if conf:
        section["conf"] = dict(conf)
    return section
