"""Security end to end on the real broker: SASL_SSL + SCRAM, SASL_PLAINTEXT + PLAIN, mutual TLS.

One Apache Kafka broker for the session (:func:`engine.local.broker.start_broker` with
:class:`~engine.local.broker.BrokerOptions`) has, besides PLAINTEXT (inter-broker), a
listener for each way zync authenticates:

* ``SASL_SSL`` with SCRAM-SHA-512 (the user is written into the metadata at format time);
* ``SASL_PLAINTEXT`` with PLAIN (the user is in the listener's JAAS configuration);
* ``SSL`` that requires a client certificate (mutual TLS).

The certificates (a CA, the broker's for 127.0.0.1, a client's, and another CA that
signed nothing here) are made at test time (:mod:`tests.pki`).

Over each listener one small scenario runs the real ``zync`` commands as processes:
produce, info, consume, from-kafka, to-kafka (transactional; the ETL pass between them
runs in the test's warm Spark, as ETL talks to no Kafka), then ``zync run`` carries a
second batch to the output topic: with all three loops (a Spark of its own) over SCRAM,
with its Kafka loops (from-kafka, to-kafka) over PLAIN and mutual TLS. SCRAM is
configured through ``$ZYNC_KAFKA_*`` variables, PLAIN and mutual TLS through
``kafka.json``; both sources give the same librdkafka settings for every listener. Every
output (``zync dev status`` included) and every file under the scenario's ZYNC_HOME (the
lake, Spark's log) is searched for the password, or a line of the client's private key.

A wrong password (SCRAM, PLAIN), an untrusted broker certificate and a missing client
certificate, among others, fail within seconds in one line naming the setting to fix.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine.kafka.clients import check_reachable, client_config
from engine.local.broker import BrokerOptions, Listener
from engine.local.processes import HOST, free_port
from engine.settings.kafka import load_kafka_profile
from tests.pki import Pki, make_pki

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRAM_USER, PLAIN_USER = "zync-scram", "zync-plain"
#: distinctive, so finding one anywhere is a leak and not a coincidence
SCRAM_PASSWORD = f"scram-pw-{secrets.token_hex(12)}"
PLAIN_PASSWORD = f"plain-pw-{secrets.token_hex(12)}"
WRONG_PASSWORD = f"wrong-pw-{secrets.token_hex(12)}"


# --------------------------------------------------------------------------- the broker


@dataclass(frozen=True)
class Secured:
    """One secured listener and the zync settings (``kafka.json`` keys) that reach it."""

    name: str
    settings: dict[str, str]
    #: what must never be shown: the password, or a line of the client's private key
    secret: str

    def env(self, settings: dict[str, str] | None = None) -> dict[str, str]:
        """The same settings as ``$ZYNC_KAFKA_*`` variables."""
        return {f"ZYNC_KAFKA_{k.upper()}": v for k, v in (settings or self.settings).items()}

    def but(self, changes: dict[str, str | None]) -> dict[str, str]:
        """The settings with some changed (None removes a key)."""
        out = dict(self.settings)
        for key, value in changes.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        return out


@dataclass(frozen=True)
class SecuredBroker:
    pki: Pki
    plaintext: str  # the PLAINTEXT listener's address
    listeners: dict[str, Secured]


def _broker_options(pki: Pki, ports: dict[str, int]) -> BrokerOptions:
    tls = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server_keystore),  # key + certificate
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
    }
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    plain = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
    )
    properties = {
        **{f"listener.name.sasl_ssl.{k}": v for k, v in tls.items()},
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain,
        **{f"listener.name.ssl.{k}": v for k, v in tls.items()},
        "listener.name.ssl.ssl.client.auth": "required",
    }
    return BrokerOptions(
        listeners=tuple(Listener(protocol, port) for protocol, port in ports.items()),
        properties=properties,
        scram_users=(("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),),
    )


@pytest.fixture(scope="session")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    """The secured broker, for the whole session; stopped by PID."""
    from tests.stack import start_broker

    pki = make_pki(tmp_path_factory.mktemp("pki"))
    ports = {protocol: free_port() for protocol in ("SASL_SSL", "SASL_PLAINTEXT", "SSL")}
    running = start_broker(tmp_path_factory.mktemp("secured-broker"), _broker_options(pki, ports))
    key_line = pki.client_key.read_text().splitlines()[1]
    listeners = {
        "scram": Secured(
            "scram",
            {
                "bootstrap_servers": f"{HOST}:{ports['SASL_SSL']}",
                "security_protocol": "SASL_SSL",
                "sasl_mechanisms": "SCRAM-SHA-512",
                "sasl_username": SCRAM_USER,
                "sasl_password": SCRAM_PASSWORD,
                "tls_server_ca_cert_file": str(pki.ca),
            },
            SCRAM_PASSWORD,
        ),
        "plain": Secured(
            "plain",
            {
                "bootstrap_servers": f"{HOST}:{ports['SASL_PLAINTEXT']}",
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanisms": "PLAIN",
                "sasl_username": PLAIN_USER,
                "sasl_password": PLAIN_PASSWORD,
            },
            PLAIN_PASSWORD,
        ),
        "mtls": Secured(
            "mtls",
            {
                "bootstrap_servers": f"{HOST}:{ports['SSL']}",
                "security_protocol": "SSL",
                "tls_server_ca_cert_file": str(pki.ca),
                "tls_client_cert_file": str(pki.client_cert),
                "tls_client_key_file": str(pki.client_key),
            },
            key_line,
        ),
    }
    yield SecuredBroker(pki, running.address, listeners)
    running.stop()


# --------------------------------------------------------------------------- settings


#: librdkafka's keys for each listener's settings (paths filled in by the test)
LIBRDKAFKA = {
    "scram": {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": SCRAM_USER,
        "sasl.password": SCRAM_PASSWORD,
        "ssl.ca.location": "tls_server_ca_cert_file",
    },
    "plain": {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": PLAIN_USER,
        "sasl.password": PLAIN_PASSWORD,
    },
    "mtls": {
        "security.protocol": "SSL",
        "ssl.ca.location": "tls_server_ca_cert_file",
        "ssl.certificate.location": "tls_client_cert_file",
        "ssl.key.location": "tls_client_key_file",
    },
}


@pytest.mark.parametrize("name", ["scram", "plain", "mtls"])
def test_settings_from_file_or_environment_reach_librdkafka(
    name: str, secured: SecuredBroker, tmp_path: Path
) -> None:
    listener = secured.listeners[name]
    (tmp_path / "kafka.json").write_text(json.dumps(listener.settings))
    (tmp_path / "kafka.json").chmod(0o600)
    from_file = load_kafka_profile(env={}, home=tmp_path)
    from_env = load_kafka_profile(env=listener.env(), home=tmp_path / "empty")
    assert from_file == from_env
    expected = {
        "bootstrap.servers": listener.settings["bootstrap_servers"],
        **{k: listener.settings.get(v, v) for k, v in LIBRDKAFKA[name].items()},
    }
    config = client_config(from_env)
    assert {k: config[k] for k in expected} == expected
    assert listener.secret not in repr(from_env)
    assert check_reachable(from_env, timeout=10) is not None  # the broker takes them


# --------------------------------------------------------------------------- scenario

CONFIG = """\
name: secure-{name}
inputs:
  - {{topic: {src}, pool: Raw}}
outputs:
  - {{topic: {out}, pool: Staging}}
transforms:
  - type: stateless
    name: shout
    in: {src}
    out: {out}
    sql: |
      SELECT in.key AS key,
             named_struct('id', in.value.id, 'msg', upper(in.value.msg)) AS value
"""


@dataclass
class Scenario:
    """One listener's zync home, environment, topics, and everything zync printed."""

    listener: Secured
    home: Path
    env: dict[str, str]
    config: Path
    src: str
    out: str
    outputs: list[str] = field(default_factory=list)

    def zync(
        self,
        *args: str,
        input: str | None = None,  # noqa: A002 - subprocess's name
        timeout: float = 180,
        ok: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``zync ARGS`` as a process of its own; keep what it printed."""
        done = subprocess.run(
            [sys.executable, "-m", "zync_tui.cli", *args],
            input=input,
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.outputs.append(done.stdout + done.stderr)
        if ok:
            assert done.returncode == 0, f"zync {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done

    def consume(self, topic: str, count: int, wait: float = 60) -> list[dict[str, Any]]:
        """The first ``count`` records of ``topic``; waits for them up to ``wait`` seconds
        without a new one."""
        done = self.zync(
            "consume", "-t", topic, "--from-beginning", "--max", str(count),
            "--exit-after", f"{wait:g}s", timeout=wait + 120,
        )  # fmt: skip
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def scenario(listener: Secured, tmp_path: Path, *, via_env: bool) -> Scenario:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZYNC_")}
    env.update(ZYNC_HOME=str(home), PYTHONUNBUFFERED="1")
    if via_env:
        env.update(listener.env())
    else:
        (home / "kafka.json").write_text(json.dumps(listener.settings))
        (home / "kafka.json").chmod(0o600)
    # Spark for `zync run`: small and quick
    (home / "spark.json").write_text(json.dumps({
        "master": "local[2]",
        "conf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
    }))  # fmt: skip
    suffix = secrets.token_hex(3)
    src, out = f"secure_in_{listener.name}_{suffix}", f"secure_out_{listener.name}_{suffix}"
    config = tmp_path / "etl.yaml"
    config.write_text(CONFIG.format(name=listener.name, src=src, out=out))
    return Scenario(listener, home, env, config, src, out)


def _records(first: int, count: int) -> str:
    return "".join(
        json.dumps({"id": i, "msg": f"message {i}"}) + "\n" for i in range(first, first + count)
    )


def _run_etl(s: Scenario) -> None:
    """One ETL pass, in this process (its Spark session is warm; ETL talks to no Kafka)."""
    from zync_tui.cli import app

    result = CliRunner().invoke(app, ["etl", str(s.config), "--lake", str(s.home / "lake")])
    s.outputs.append(result.output)
    assert result.exit_code == 0, result.output + "".join(
        traceback.format_exception(*result.exc_info)
    )[-3000:]


def _raw_records(s: Scenario) -> int:
    import pyarrow.dataset as ds

    from engine.lake.pools import Lake

    table = Lake(s.home / "lake").open_pool("Raw").table.to_pyarrow_dataset()
    return table.to_table(columns=["seqno"], filter=ds.field("marker").is_null()).num_rows


def _zync_run(s: Scenario, log: Path, expect: int, *, etl_here: bool) -> str:
    """`zync run` until ``expect`` records are in the output topic, then SIGTERM.

    ``etl_here``: run only its Kafka loops (from-kafka, to-kafka) and make the ETL pass
    in this process once the raw pool holds ``expect`` records, which spares a second
    Spark start (the ETL loop talks to no Kafka)."""
    only = ["--only", "from-kafka", "--only", "to-kafka"] if etl_here else []
    with log.open("w") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "zync_tui.cli", "run", str(s.config), "-f", "json",
             "--etl-interval", "500ms", *only],
            env=s.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            if etl_here:
                deadline = time.monotonic() + 120
                while _raw_records(s) < expect:
                    assert run.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.2)
                _run_etl(s)
            got = s.consume(s.out, expect, wait=300)  # Spark starts first: slow on a busy machine
        finally:
            run.send_signal(signal.SIGTERM)
            try:
                code = run.wait(120)
            finally:
                if run.poll() is None:
                    run.kill()
    text = log.read_text()
    s.outputs.append(text)
    assert code == 0, text
    assert [r["value"]["id"] for r in got] == list(range(expect)), text
    for service in ("from-kafka", "to-kafka") if etl_here else ("from-kafka", "etl", "to-kafka"):
        assert re.search(rf"{service}\s+stopped", text), text
    return text


def _assert_no_secret(s: Scenario) -> None:
    secret = s.listener.secret
    for text in s.outputs:
        assert secret not in text
    holders = [
        path.relative_to(s.home).as_posix()
        for path in sorted(s.home.rglob("*"))
        if path.is_file() and secret.encode() in path.read_bytes()
    ]
    configured_by_file = "ZYNC_KAFKA_BOOTSTRAP_SERVERS" not in s.env
    assert holders == (["kafka.json"] if configured_by_file and s.listener.name != "mtls" else [])


@pytest.mark.spark
@pytest.mark.slow(seconds=150)
@pytest.mark.parametrize(
    ("name", "via_env", "full_run"),
    [("scram", True, True), ("plain", False, False), ("mtls", False, False)],
)
def test_every_command_over_a_secured_listener(
    name: str, via_env: bool, full_run: bool, secured: SecuredBroker, spark: Any, tmp_path: Path
) -> None:
    s = scenario(secured.listeners[name], tmp_path, via_env=via_env)
    lake = s.home / "lake"
    from engine.lake.pools import Lake

    Lake(lake).create_pool("Raw")
    Lake(lake).create_pool("Staging", "staging")

    produced = s.zync("produce", "-t", s.src, "--format", "connect-json", "--key", "id",
                      input=_records(0, 3))  # fmt: skip
    assert f"produced 3 records to {s.src}" in produced.stdout
    info = json.loads(s.zync("info", "-t", s.src, "--json").stdout)
    assert [(p["low"], p["high"]) for p in info["partitions"]] == [(0, 3)]
    assert [r["value"]["msg"] for r in s.consume(s.src, 3)] == [f"message {i}" for i in range(3)]

    s.zync("from-kafka", str(s.config), "--exit-after", "1s")
    _run_etl(s)
    delivered = s.zync("to-kafka", str(s.config), "-f", "json")
    assert f"{s.out}: 3 message(s) produced" in delivered.stdout
    got = s.consume(s.out, 3)
    assert [(r["key"], r["value"]) for r in got] == [
        (i, {"id": i, "msg": f"MESSAGE {i}"}) for i in range(3)
    ]

    s.zync("produce", "-t", s.src, "--format", "connect-json", "--key", "id",
           input=_records(3, 2))  # fmt: skip
    # `zync run`: every loop (a Spark of its own) on one listener; its Kafka loops on the others
    _zync_run(s, tmp_path / "run.log", expect=5, etl_here=not full_run)
    if full_run:
        assert (s.home / "logs" / "spark.log").is_file()  # Spark's log is searched too

    s.zync("dev", "status", ok=False)  # nothing runs there: exit 1, but it must say nothing secret
    _assert_no_secret(s)


# --------------------------------------------------------------------------- failures


def _fails_in_one_line(env: dict[str, str], *args: str) -> tuple[str, float]:
    """Run ``zync ARGS`` in this process with ``env``; its one error line and how long.

    Nothing else is printed, but for to-kafka's status lines (its events, on stdout)."""
    from zync_tui.cli import app

    started = time.monotonic()
    result = CliRunner().invoke(app, list(args), env=env, input='{"a": 1}\n')
    elapsed = time.monotonic() - started
    assert result.exit_code == 1, result.output
    if args[0] == "to-kafka":
        assert all(re.match(r"\d\d:\d\d:\d\d ", ln) for ln in result.stdout.splitlines())
    else:
        assert result.stdout == ""
    assert "Traceback" not in result.stderr
    for secret in (WRONG_PASSWORD, SCRAM_PASSWORD, PLAIN_PASSWORD):
        assert secret not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0], elapsed


FAILURES = [
    # (listener, changed settings, command, what the line must name)
    ("scram", {"sasl_password": WRONG_PASSWORD}, "info",
     ["the broker refused the SASL SCRAM-SHA-512 login of user 'zync-scram'",
      "check sasl_password"]),
    ("plain", {"sasl_password": WRONG_PASSWORD}, "produce",
     ["the broker refused the SASL PLAIN login of user 'zync-plain'", "check sasl_password"]),
    ("plain", {"sasl_mechanisms": "SCRAM-SHA-256"}, "info",
     ["does not offer SASL mechanism SCRAM-SHA-256 (it offers PLAIN)", "set sasl_mechanisms"]),
    ("scram", {"tls_server_ca_cert_file": "OTHER_CA"}, "consume",
     ["the broker's TLS certificate is not signed by the CA certificate(s) in OTHER_CA",
      "set tls_server_ca_cert_file"]),
    ("mtls", {"tls_server_ca_cert_file": "OTHER_CA"}, "info",
     ["the broker's TLS certificate is not signed by", "set tls_server_ca_cert_file"]),
    ("mtls", {"tls_client_cert_file": None, "tls_client_key_file": None}, "from-kafka",
     ["the broker requires a client certificate (mutual TLS)",
      "set tls_client_cert_file and tls_client_key_file"]),
    ("mtls", {"security_protocol": "SASL_SSL", "sasl_username": "x", "sasl_password": "y"},
     "info", ["check security_protocol (SASL_SSL)"]),
    ("plain", {"sasl_password": WRONG_PASSWORD}, "to-kafka",
     ["the broker refused the SASL PLAIN login of user 'zync-plain'", "check sasl_password"]),
    ("scram", {"sasl_password": WRONG_PASSWORD}, "run",
     ["the broker refused the SASL SCRAM-SHA-512 login of user 'zync-scram'",
      "check sasl_password"]),
    ("mtls", {"tls_client_key_file": "SERVER_KEY"}, "info",
     ["Kafka settings: the private key in tls_client_key_file (SERVER_KEY) does not belong to "
      "the certificate in tls_client_cert_file"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "changes", "command", "expected"),
    FAILURES,
    ids=["scram-password", "plain-password", "plain-mechanism", "scram-untrusted-ca",
         "mtls-untrusted-ca", "mtls-no-client-cert", "mtls-sasl-client", "plain-to-kafka",
         "scram-run", "mtls-wrong-key"],
)  # fmt: skip
def test_a_refused_connection_is_one_prompt_line_naming_the_setting(
    name: str,
    changes: dict[str, str | None],
    command: str,
    expected: list[str],
    secured: SecuredBroker,
    tmp_path: Path,
) -> None:
    files = {"OTHER_CA": str(secured.pki.other_ca), "SERVER_KEY": str(secured.pki.server_key)}

    def fill(text: str) -> str:
        for placeholder, path in files.items():
            text = text.replace(placeholder, path)
        return text

    listener = secured.listeners[name]
    settings = listener.but({k: fill(v) if v else v for k, v in changes.items()})
    env = {**listener.env(settings), "ZYNC_HOME": str(tmp_path)}
    from engine.lake.pools import Lake

    Lake(tmp_path / "lake").create_pool("Staging", "staging")
    config = tmp_path / "etl.yaml"
    config.write_text(CONFIG.format(name="refused", src="anything", out="elsewhere"))
    args = {
        "info": ["info", "-t", "anything"],
        "produce": ["produce", "-t", "anything", "--format", "json"],
        "consume": ["consume", "-t", "anything", "--from-beginning"],
        "from-kafka": ["from-kafka", "-t", "anything", "-p", "Raw", "--create-pool",
                       "--lake", str(tmp_path / "lake")],
        "to-kafka": ["to-kafka", "-t", "elsewhere", "-p", "Staging", "-f", "json",
                     "--lake", str(tmp_path / "lake")],
        "run": ["run", str(config), "-f", "json", "--lake", str(tmp_path / "lake")],
    }[command]  # fmt: skip
    line, elapsed = _fails_in_one_line(env, *args, "--timeout", "30")
    assert line.startswith("error: "), line
    for part in expected:
        assert fill(part) in line, line
    assert elapsed < 5, f"took {elapsed:.1f}s: {line}"  # refused at once, not at the timeout
