"""Connection profiles: sources and precedence, strictness, secrets, librdkafka mapping."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from engine.lake.location import resolve_lake
from engine.settings.errors import ConfigError, NotConfiguredError
from engine.settings.files import InsecureFileWarning, write_private_json
from engine.settings.home import zync_home
from engine.settings.kafka import KafkaProfile, SaslMechanism, SecurityProtocol, load_kafka_profile
from engine.settings.registry import RegistryProfile, load_registry_profile
from engine.settings.secret import Secret
from engine.settings.spark import load_spark_settings
from engine.settings.storage import load_storage_settings

PASSWORD = "hunter2-very-secret"


def _write(path: Path, data: object, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    os.chmod(path, mode)
    return path


# --------------------------------------------------------------------------- locations


def test_zync_home_defaults_to_dot_zync_and_is_not_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert zync_home(env={}) == tmp_path / ".zync"
    assert zync_home(env={"ZYNC_HOME": str(tmp_path / "h")}) == tmp_path / "h"
    assert not (tmp_path / ".zync").exists()
    assert not (tmp_path / "h").exists()


def test_lake_flag_env_file_or_home(tmp_path: Path) -> None:
    home = {"ZYNC_HOME": str(tmp_path)}
    assert resolve_lake(env=home).path == tmp_path / "lake"
    assert resolve_lake(env={**home, "ZYNC_LAKE": str(tmp_path / "l")}).path == tmp_path / "l"
    (tmp_path / "storage.json").write_text('{"lake": "s3://my-bucket/zync/lake/", "AWS_REGION": "eu-west-1"}')
    found = resolve_lake(env=home)
    assert (found.bucket, found.key, found.uri) == ("my-bucket", "zync/lake", "s3://my-bucket/zync/lake")
    assert found.spark_uri == "s3a://my-bucket/zync/lake"
    assert found.join("Raw").uri == "s3://my-bucket/zync/lake/Raw"
    assert found.settings.region == "eu-west-1"
    assert resolve_lake(env={**home, "ZYNC_LAKE": "s3://other-bucket"}).uri == "s3://other-bucket"
    assert resolve_lake(str(tmp_path / "flag"), env=home).path == tmp_path / "flag"
    with pytest.raises(ConfigError, match="did you mean s3://bucket/lake"):
        resolve_lake(env={**home, "ZYNC_LAKE": "s3:/bucket/lake"})
    (tmp_path / "storage.json").write_text('{"AWS_SECRETACCESSKEY": "x"}')
    with pytest.raises(ConfigError, match="unknown key 'AWS_SECRETACCESSKEY'"):
        resolve_lake(env=home)


def test_storage_settings_for_delta_rs_and_spark_never_show_secrets(tmp_path: Path) -> None:
    env = {
        "ZYNC_HOME": str(tmp_path),
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "very-secret",
        "AWS_SESSION_TOKEN": "token-secret",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000/",
        "AWS_ALLOW_HTTP": "true",
    }
    settings = load_storage_settings(env)
    assert "very-secret" not in repr(settings) + str(settings)
    assert "token-secret" not in repr(settings)
    options = settings.delta_options()
    assert options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000"
    assert options["AWS_SECRET_ACCESS_KEY"] == "very-secret"
    assert options["AWS_ALLOW_HTTP"] == "true"
    conf = settings.hadoop_conf()
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    with pytest.raises(ConfigError, match="AWS_ALLOW_HTTP=true"):
        load_storage_settings({**env, "AWS_ALLOW_HTTP": ""})
    with pytest.raises(ConfigError, match="go together"):
        load_storage_settings({"ZYNC_HOME": str(tmp_path), "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE"})


def test_write_private_json_creates_home_lazily_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "home" / "kafka.json"
    write_private_json(path, {"bootstrap_servers": "h:1"})
    assert json.loads(path.read_text()) == {"bootstrap_servers": "h:1"}
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


# --------------------------------------------------------------------------- precedence


def test_kafka_precedence_file_then_env_then_flags(tmp_path: Path) -> None:
    _write(
        tmp_path / "kafka.json",
        {
            "bootstrap_servers": "file:9092",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanisms": "PLAIN",
            "sasl_username": "file-user",
            "sasl_password": "file-pw",
        },
    )
    assert load_kafka_profile(env={}, home=tmp_path).bootstrap_servers == "file:9092"

    env = {
        "ZYNC_KAFKA_BOOTSTRAP_SERVERS": "env:9092",
        "ZYNC_KAFKA_SASL_USERNAME": "env-user",
        "ZYNC_KAFKA_SASL_MECHANISMS": "scram-sha-256",
    }
    profile = load_kafka_profile(env=env, home=tmp_path)
    assert profile.bootstrap_servers == "env:9092"
    assert profile.sasl_username == "env-user"
    assert profile.sasl_mechanisms is SaslMechanism.SCRAM_SHA_256
    assert profile.sasl_password == Secret("file-pw")  # not overridden: the file's

    profile = load_kafka_profile(
        {"bootstrap_servers": "flag:9092", "sasl_username": None}, env=env, home=tmp_path
    )
    assert profile.bootstrap_servers == "flag:9092"
    assert profile.sasl_username == "env-user"  # an unset flag (None) changes nothing


def test_registry_precedence_and_client_config(tmp_path: Path) -> None:
    _write(
        tmp_path / "schema_registry.json",
        {"url": "http://file:8081", "user": "u"} | {"password": PASSWORD},
    )
    profile = load_registry_profile(env={}, home=tmp_path)
    assert profile.client_config() == {
        "url": "http://file:8081",
        "basic.auth.user.info": f"u:{PASSWORD}",
    }
    assert profile.basic_auth() == ("u", PASSWORD)
    env = {"ZYNC_REGISTRY_URL": "http://env:8081/"}
    assert load_registry_profile(env=env, home=tmp_path).url == "http://env:8081/"
    assert load_registry_profile({"url": "https://flag"}, env=env, home=tmp_path).url == (
        "https://flag"
    )
    assert RegistryProfile("http://x:1").client_config() == {"url": "http://x:1"}


def test_empty_values_count_as_unset(tmp_path: Path) -> None:
    # zync's kafka.json templates carry every key, the unused ones empty
    _write(
        tmp_path / "kafka.json",
        {
            "bootstrap_servers": "h:1",
            "sasl_username": "",
            "sasl_password": "",
            "sasl_mechanisms": "",
        },
    )
    profile = load_kafka_profile(env={"ZYNC_KAFKA_SECURITY_PROTOCOL": ""}, home=tmp_path)
    assert profile.security_protocol is SecurityProtocol.PLAINTEXT
    assert profile.librdkafka_config() == {
        "bootstrap.servers": "h:1",
        "security.protocol": "PLAINTEXT",
    }


# --------------------------------------------------------------------------- errors


def test_missing_kafka_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(NotConfiguredError) as info:
        load_kafka_profile(env={}, home=tmp_path)
    assert "zync dev up" in str(info.value)
    assert str(tmp_path / "kafka.json") in str(info.value)
    with pytest.raises(NotConfiguredError, match="no Schema Registry configured"):
        load_registry_profile(env={}, home=tmp_path)
    assert not any(tmp_path.iterdir())  # reading never creates anything


def test_unknown_key_names_file_and_key(tmp_path: Path) -> None:
    path = _write(tmp_path / "kafka.json", {"bootstrap_server": "h:1"})
    with pytest.raises(ConfigError) as info:
        load_kafka_profile(env={}, home=tmp_path)
    message = str(info.value)
    assert str(path) in message
    assert "'bootstrap_server'" in message
    assert "did you mean 'bootstrap_servers'" in message

    _write(tmp_path / "schema_registry.json", {"url": "http://x", "token": "t"})
    with pytest.raises(ConfigError, match=r"schema_registry\.json: unknown key 'token'"):
        load_registry_profile(env={}, home=tmp_path)


def test_bad_json_is_one_line_with_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "kafka.json", '{\n  "bootstrap_servers": "h:1"\n  "x": 1\n}\n')
    with pytest.raises(ConfigError) as info:
        load_kafka_profile(env={}, home=tmp_path)
    message = str(info.value)
    assert message.startswith(f"{path}: line 3 ")
    assert "\n" not in message

    _write(tmp_path / "spark.json", "[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        load_spark_settings(env={}, home=tmp_path)


@pytest.mark.parametrize(
    ("data", "env", "expected"),
    [
        ({"security_protocol": "TLS"}, {}, r"kafka\.json: security_protocol: expected one of"),
        ({}, {"ZYNC_KAFKA_SASL_MECHANISMS": "GSSAPI"}, r"\$ZYNC_KAFKA_SASL_MECHANISMS: expected"),
        ({"tls_server_insecure_skip_verify": "maybe"}, {}, "expected true or false"),
        ({"bootstrap_servers": 9092}, {}, r"kafka\.json: bootstrap_servers: expected a string"),
        ({"security_protocol": "SSL", "tls_server_ca_cert_file": "nope.pem"}, {}, "no such file"),
        ({"security_protocol": "SASL_SSL", "sasl_username": "u"}, {}, "needs sasl_username and"),
        ({"sasl_username": "u"}, {}, "sasl_username is set but security_protocol is PLAINTEXT"),
        (
            {"tls_server_insecure_skip_verify": True},
            {},
            "tls_server_insecure_skip_verify is set but security_protocol is PLAINTEXT",
        ),
    ],
)
def test_bad_values_name_where(tmp_path: Path, data: dict, env: dict, expected: str) -> None:
    _write(tmp_path / "kafka.json", {"bootstrap_servers": "h:1"} | data)
    with pytest.raises(ConfigError, match=expected):
        load_kafka_profile(env=env, home=tmp_path)


def test_client_cert_needs_its_key(tmp_path: Path) -> None:
    cert = _write(tmp_path / "client.pem", "x")
    with pytest.raises(ConfigError, match="go together"):
        load_kafka_profile(
            {"security_protocol": "SSL", "tls_client_cert_file": str(cert)},
            env={"ZYNC_KAFKA_BOOTSTRAP_SERVERS": "h:1"},
            home=tmp_path,
        )


# --------------------------------------------------------------------------- secrets


def test_secret_never_shows() -> None:
    secret = Secret(PASSWORD)
    assert repr(secret) == "'***'"
    assert str(secret) == "***"
    assert f"{secret}" == "***"
    assert secret.reveal() == PASSWORD
    profile = KafkaProfile(
        "h:1",
        SecurityProtocol.SASL_SSL,
        sasl_username="u",
        sasl_password=secret,
    )
    assert PASSWORD not in repr(profile)
    assert PASSWORD not in str(profile)
    registry = RegistryProfile("http://h", "u", Secret(PASSWORD))
    assert PASSWORD not in repr(registry)


def test_secrets_stay_out_of_error_messages(tmp_path: Path) -> None:
    # wrong type for the password, and a cross-field error on a profile holding one
    _write(tmp_path / "kafka.json", {"bootstrap_servers": "h:1", "sasl_password": 12345678})
    with pytest.raises(ConfigError) as info:
        load_kafka_profile(env={}, home=tmp_path)
    assert "12345678" not in str(info.value)
    assert "sasl_password: expected a string" in str(info.value)

    _write(tmp_path / "kafka.json", {"bootstrap_servers": "h:1", "sasl_password": PASSWORD})
    with pytest.raises(ConfigError) as info:
        load_kafka_profile(env={}, home=tmp_path)
    assert PASSWORD not in str(info.value)
    assert "sasl_password is set but security_protocol is PLAINTEXT" in str(info.value)

    _write(tmp_path / "schema_registry.json", {"url": "http://h", "password": PASSWORD})
    with pytest.raises(ConfigError, match="user and password go together") as info:
        load_registry_profile(env={}, home=tmp_path)
    assert PASSWORD not in str(info.value)


def test_readable_credentials_file_warns(tmp_path: Path) -> None:
    data = {
        "bootstrap_servers": "h:1",
        "security_protocol": "SASL_SSL",
        "sasl_username": "u",
        "sasl_password": PASSWORD,
    }
    path = _write(tmp_path / "kafka.json", data, mode=0o644)
    with pytest.warns(InsecureFileWarning, match=r"readable by group/others \(mode 0644\)") as rec:
        load_kafka_profile(env={}, home=tmp_path)
    assert f"chmod 600 {path}" in str(rec[0].message)
    assert PASSWORD not in str(rec[0].message)
    assert rec[0].filename == __file__  # points at the caller, not at engine/settings/

    os.chmod(path, 0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_kafka_profile(env={}, home=tmp_path)
    # no password in the file: nothing to protect, no warning
    _write(tmp_path / "kafka.json", {"bootstrap_servers": "h:1"}, mode=0o644)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_kafka_profile(env={}, home=tmp_path)


# --------------------------------------------------------------------------- librdkafka


def _files(tmp_path: Path) -> dict[str, str]:
    return {
        name: str(_write(tmp_path / f"{name}.pem", "-----"))
        for name in ("tls_client_cert_file", "tls_client_key_file", "tls_server_ca_cert_file")
    }


def test_librdkafka_plaintext() -> None:
    profile = load_kafka_profile(
        {"bootstrap_servers": "a:1,b:2"}, env={}, home=Path("/nonexistent")
    )
    assert profile.librdkafka_config() == {
        "bootstrap.servers": "a:1,b:2",
        "security.protocol": "PLAINTEXT",
    }


def test_librdkafka_sasl_plaintext_defaults_to_plain(tmp_path: Path) -> None:
    env = {
        "ZYNC_KAFKA_BOOTSTRAP_SERVERS": "h:9092",
        "ZYNC_KAFKA_SECURITY_PROTOCOL": "sasl_plaintext",
        "ZYNC_KAFKA_SASL_USERNAME": "alice",
        "ZYNC_KAFKA_SASL_PASSWORD": PASSWORD,
    }
    assert load_kafka_profile(env=env, home=tmp_path).librdkafka_config() == {
        "bootstrap.servers": "h:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": PASSWORD,
    }


def test_librdkafka_sasl_ssl_with_ca(tmp_path: Path) -> None:
    files = _files(tmp_path)
    _write(
        tmp_path / "kafka.json",
        {
            "bootstrap_servers": "h:9093",
            "security_protocol": "SASL_SSL",
            "sasl_mechanisms": "SCRAM-SHA-512",
            "sasl_username": "alice",
            "sasl_password": PASSWORD,
            "tls_server_ca_cert_file": "tls_server_ca_cert_file.pem",  # relative to the file
        },
    )
    assert load_kafka_profile(env={}, home=tmp_path).librdkafka_config() == {
        "bootstrap.servers": "h:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": PASSWORD,
        "ssl.ca.location": files["tls_server_ca_cert_file"],
    }


def test_librdkafka_ssl_mutual_tls(tmp_path: Path) -> None:
    files = _files(tmp_path)
    profile = load_kafka_profile(
        {"bootstrap_servers": "h:9093", "security_protocol": "SSL", **files},
        env={},
        home=tmp_path,
    )
    assert profile.librdkafka_config() == {
        "bootstrap.servers": "h:9093",
        "security.protocol": "SSL",
        "ssl.certificate.location": files["tls_client_cert_file"],
        "ssl.key.location": files["tls_client_key_file"],
        "ssl.ca.location": files["tls_server_ca_cert_file"],
    }


def test_librdkafka_ssl_insecure(tmp_path: Path) -> None:
    env = {
        "ZYNC_KAFKA_BOOTSTRAP_SERVERS": "h:9093",
        "ZYNC_KAFKA_SECURITY_PROTOCOL": "SSL",
        "ZYNC_KAFKA_TLS_SERVER_INSECURE_SKIP_VERIFY": "yes",
    }
    assert load_kafka_profile(env=env, home=tmp_path).librdkafka_config() == {
        "bootstrap.servers": "h:9093",
        "security.protocol": "SSL",
        "enable.ssl.certificate.verification": "false",
        "ssl.endpoint.identification.algorithm": "none",
    }


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"])
def test_librdkafka_accepts_the_keys(protocol: str) -> None:
    """librdkafka itself takes every key and value we produce (no connection is made)."""
    from confluent_kafka import Producer

    sasl = protocol.startswith("SASL")
    profile = KafkaProfile(
        "127.0.0.1:1",
        SecurityProtocol(protocol),
        sasl_mechanisms=SaslMechanism.SCRAM_SHA_256 if sasl else None,
        sasl_username="u" if sasl else None,
        sasl_password=Secret("p") if sasl else None,
        tls_server_insecure_skip_verify=protocol.endswith("SSL"),
    )
    Producer(profile.librdkafka_config()).flush(0)


# --------------------------------------------------------------------------- spark


def test_spark_settings_file_env_flag(tmp_path: Path) -> None:
    assert load_spark_settings(env={}, home=tmp_path).master == "local[*]"
    _write(
        tmp_path / "spark.json",
        {
            "master": "spark://file:7077",
            "conf": {"spark.executor.memory": "4g", "x.n": 3, "x.b": True},
        },
    )
    settings = load_spark_settings(env={}, home=tmp_path)
    assert settings.master == "spark://file:7077"
    assert settings.conf == {"spark.executor.memory": "4g", "x.n": "3", "x.b": "true"}
    env = {"ZYNC_SPARK_MASTER": "local[2]"}
    assert load_spark_settings(env=env, home=tmp_path).master == "local[2]"
    assert load_spark_settings("local[1]", env=env, home=tmp_path).master == "local[1]"


def test_spark_settings_strict(tmp_path: Path) -> None:
    _write(tmp_path / "spark.json", {"master": "local", "confs": {}})
    with pytest.raises(ConfigError, match=r"spark\.json: unknown key 'confs'"):
        load_spark_settings(env={}, home=tmp_path)
    _write(tmp_path / "spark.json", {"conf": {"k": {"nested": 1}}})
    with pytest.raises(ConfigError, match=r"spark\.json: conf: k: expected"):
        load_spark_settings(env={}, home=tmp_path)
