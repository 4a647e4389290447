"""Secure connections: mutual TLS through a TLS-terminating proxy, SASL settings and failures.

Tansu (the embedded broker) cannot terminate TLS or authenticate clients in this build
(docs/design.md#the-embedded-stack, re-checked for Tansu 0.6.0: ``--cert`` and ``--key`` are refused together,
a listener given a combined PEM never completes a handshake, and ``tansu user create``
fails with "early eof", so no SASL user can exist). So:

* **TLS**: a dedicated broker advertises the address of a TLS-terminating proxy in front
  of it — Debian's stunnel4 when installed, else a small stdlib ``ssl`` proxy written
  here — that requires client certificates signed by a CA generated at test time.
  ``zync produce`` / ``zync consume`` run with security_protocol SSL and the tls_*
  settings; a wrong CA and a missing client certificate fail in one line.
* **SASL**: how the settings reach librdkafka; a SASL client against a plaintext
  listener fails its handshake in one line; and against a Tansu started with
  ``--authentication`` the SCRAM exchange really runs and is refused ("unknown user"),
  in one line. A *successful* SASL login cannot be exercised: no user can be created.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.kafka.clients import client_config
from engine.local import processes
from engine.settings.kafka import load_kafka_profile
from zync_tui.commands.kafka import make_app

pytestmark = pytest.mark.integration

runner = CliRunner()
APP = make_app()
HOST = "127.0.0.1"


def zync(*args: str, input: str | None = None):  # noqa: A002 - click's name
    return runner.invoke(APP, list(args), input=input)


# --------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _cert(subject: str, key, issuer: str, issuer_key, *, ca: bool, server: bool = False):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                          content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert=None, key=None) -> Path:
    from cryptography.hazmat.primitives import serialization

    if cert is not None:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    else:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a server certificate for 127.0.0.1, a client certificate, and another CA."""
    d = tmp_path_factory.mktemp("tls")
    ca_key, other_key = _key(), _key()
    ca = _cert("zync test CA", ca_key, "zync test CA", ca_key, ca=True)
    other = _cert("some other CA", other_key, "some other CA", other_key, ca=True)
    server_key, client_key = _key(), _key()
    server = _cert(HOST, server_key, "zync test CA", ca_key, ca=False, server=True)
    client = _cert("zync-client", client_key, "zync test CA", ca_key, ca=False)
    return Pki(
        ca=_write(d / "ca.pem", cert=ca),
        server_cert=_write(d / "server.pem", cert=server),
        server_key=_write(d / "server.key", key=server_key),
        client_cert=_write(d / "client.pem", cert=client),
        client_key=_write(d / "client.key", key=client_key),
        other_ca=_write(d / "other-ca.pem", cert=other),
    )


# --------------------------------------------------------------------------- processes


def _wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {HOST}:{port} after {timeout}s")


@contextlib.contextmanager
def tansu(tmp: Path, *, advertised_port: int | None = None, authentication: bool = False):
    """A Tansu broker of our own (memory storage); yields its port. Stopped by PID."""
    port = processes.free_port()
    argv = devstack.broker_argv(devstack.broker_binary(), port)
    if advertised_port is not None:
        argv[argv.index("--advertised-listener-url") + 1] = f"tcp://{HOST}:{advertised_port}"
    if authentication:
        argv.append("--authentication")
    log = (tmp / f"tansu-{port}.log").open("wb")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        _wait_port(port)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@contextlib.contextmanager
def stunnel(tmp: Path, pki: Pki, port: int, target: int) -> Iterator[str]:
    conf = tmp / "stunnel.conf"
    conf.write_text(
        "foreground = yes\n"
        f"pid = {tmp / 'stunnel.pid'}\n"
        f"output = {tmp / 'stunnel.log'}\n"
        "debug = 5\n"
        "[kafka]\n"
        f"accept = {HOST}:{port}\n"
        f"connect = {HOST}:{target}\n"
        f"cert = {pki.server_cert}\n"
        f"key = {pki.server_key}\n"
        f"CAfile = {pki.ca}\n"
        "requireCert = yes\n"
        "verifyChain = yes\n"
    )
    binary = shutil.which("stunnel4") or shutil.which("stunnel")
    proc = subprocess.Popen([binary, str(conf)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        _wait_port(port)
        yield "stunnel4"
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def python_tls_proxy(pki: Pki, port: int, target: int) -> Iterator[str]:
    """A TLS-terminating proxy on the stdlib (test scaffolding, when stunnel is missing)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
    context.verify_mode = ssl.CERT_REQUIRED
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    tasks: set[asyncio.Task] = set()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            broker_r, broker_w = await asyncio.open_connection(HOST, target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pipe(client_r, broker_w), pipe(broker_r, client_w))

    async def serve() -> asyncio.Server:
        return await asyncio.start_server(handle, HOST, port, ssl=context)

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(serve())
        tasks.add(server)  # type: ignore[arg-type]
        ready.set()
        loop.run_forever()
        server.close()
        loop.run_until_complete(server.wait_closed())

    thread = threading.Thread(target=run, name="tls-proxy", daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield "python ssl proxy"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@dataclass(frozen=True)
class TlsBroker:
    address: str  # the proxy: what clients bootstrap from
    proxy: str


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsBroker]:
    tmp = tmp_path_factory.mktemp("tls-broker")
    proxy_port = processes.free_port()
    with tansu(tmp, advertised_port=proxy_port) as broker_port:
        wanted = os.environ.get("ZYNC_TEST_TLS_PROXY", "stunnel")  # "python" forces ours
        if wanted != "python" and (shutil.which("stunnel4") or shutil.which("stunnel")):
            proxy = stunnel(tmp, pki, proxy_port, broker_port)
        else:
            proxy = python_tls_proxy(pki, proxy_port, broker_port)
        with proxy as name:
            yield TlsBroker(f"{HOST}:{proxy_port}", name)


def _tls_args(pki: Pki, tls_broker: TlsBroker, *, ca: Path | None = None, client: bool = True):
    args = ["-b", tls_broker.address, "--security-protocol", "SSL",
            "--tls-server-ca-cert-file", str(ca or pki.ca)]
    if client:
        args += ["--tls-client-cert-file", str(pki.client_cert),
                 "--tls-client-key-file", str(pki.client_key)]
    return args


# --------------------------------------------------------------------------- TLS


def test_mutual_tls_produce_and_consume(pki: Pki, tls_broker: TlsBroker) -> None:
    args = _tls_args(pki, tls_broker)
    produced = zync("produce", "-t", "secure", "--format", "json", "--key", "id", *args,
                    input='{"id": 1, "msg": "over TLS"}\n{"id": 2, "msg": "still"}\n')
    assert produced.exit_code == 0, produced.output
    assert "produced 2 records to secure as json" in produced.stdout
    consumed = zync("consume", "-t", "secure", "--from-beginning", "--max", "2", *args)
    assert consumed.exit_code == 0, consumed.output
    got = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert [(r["key"], r["value"]["msg"]) for r in got] == [(1, "over TLS"), (2, "still")]
    info = zync("info", "-t", "secure", "--json", *args)
    assert info.exit_code == 0, info.output
    assert json.loads(info.stdout)["partitions"][0]["partition"] == 0


def test_tls_settings_from_the_profile_file(pki: Pki, tls_broker: TlsBroker) -> None:
    home = Path(os.environ["ZYNC_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "kafka.json").write_text(json.dumps({
        "bootstrap_servers": tls_broker.address,
        "security_protocol": "SSL",
        "tls_server_ca_cert_file": str(pki.ca),
        "tls_client_cert_file": str(pki.client_cert),
        "tls_client_key_file": str(pki.client_key),
    }))
    produced = zync("produce", "-t", "secure-file", "--format", "json", input='{"a": 1}\n')
    assert produced.exit_code == 0, produced.output


def _one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_a_wrong_ca_is_one_clear_line(pki: Pki, tls_broker: TlsBroker) -> None:
    started = time.monotonic()
    result = zync("info", "-t", "secure", "--timeout", "3",
                  *_tls_args(pki, tls_broker, ca=pki.other_ca))
    line = _one_line_error(result)
    assert time.monotonic() - started < 8
    assert line.startswith(f"error: cannot reach Kafka at {tls_broker.address} (SSL): ")
    assert "certificate verify failed" in line
    assert "Check the security settings" in line


def test_without_a_client_certificate_the_proxy_refuses(pki: Pki, tls_broker: TlsBroker) -> None:
    result = zync("info", "-t", "secure", "--timeout", "3",
                  *_tls_args(pki, tls_broker, client=False))
    line = _one_line_error(result)
    assert line.startswith(f"error: cannot reach Kafka at {tls_broker.address} (SSL): ")
    assert "certificate required" in line  # the proxy's TLS alert, as librdkafka saw it


# --------------------------------------------------------------------------- SASL


def test_sasl_settings_reach_librdkafka(tmp_path: Path, pki: Pki) -> None:
    profile = load_kafka_profile(
        {"bootstrap_servers": "k1:9093,k2:9093", "security_protocol": "sasl_ssl",
         "sasl_mechanisms": "SCRAM-SHA-512", "sasl_username": "alice",
         "sasl_password": "s3cret-pw", "tls_server_ca_cert_file": str(pki.ca)},
        env={}, home=tmp_path,
    )
    config = client_config(profile)
    assert {k: config[k] for k in ("bootstrap.servers", "security.protocol", "sasl.mechanisms",
                                   "sasl.username", "sasl.password", "ssl.ca.location")} == {
        "bootstrap.servers": "k1:9093,k2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "s3cret-pw",
        "ssl.ca.location": str(pki.ca),
    }
    assert "s3cret-pw" not in repr(profile)
    plain = load_kafka_profile(
        {"bootstrap_servers": "k:9092", "security_protocol": "SASL_PLAINTEXT",
         "sasl_username": "bob", "sasl_password": "pw"}, env={}, home=tmp_path)
    assert client_config(plain)["sasl.mechanisms"] == "PLAIN"


def test_sasl_against_a_plaintext_listener_fails_in_one_line(broker) -> None:
    secret = "sasl-Pa55word-never-shown"
    started = time.monotonic()
    result = zync("info", "-t", "anything", "-b", broker.address, "--timeout", "3",
                  "--security-protocol", "SASL_PLAINTEXT", "--sasl-username", "alice",
                  "--sasl-password", secret)
    line = _one_line_error(result)
    assert time.monotonic() - started < 8
    assert line.startswith(f"error: cannot reach Kafka at {broker.address} (SASL_PLAINTEXT): ")
    assert "SASL" in line
    assert "Check the security settings" in line
    assert secret not in result.output


def test_scram_against_an_authenticating_tansu_is_refused_in_one_line(tmp_path: Path) -> None:
    secret = "scram-Pa55word-never-shown"
    with tansu(tmp_path, authentication=True) as port:
        env = dict(os.environ, ZYNC_KAFKA_SASL_PASSWORD=secret)
        done = subprocess.run(
            [sys.executable, "-m", "zync_tui.commands.kafka", "info", "-t", "x",
             "-b", f"{HOST}:{port}", "--timeout", "3", "--security-protocol", "SASL_PLAINTEXT",
             "--sasl-mechanisms", "SCRAM-SHA-512", "--sasl-username", "alice"],
            capture_output=True, text=True, env=env, timeout=60,
        )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "SASL SCRAM authentication failed" in lines[0]
    assert "unknown-user" in lines[0]
    assert secret not in done.stdout + done.stderr
