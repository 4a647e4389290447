"""Test certificates, made at test time with ``cryptography`` (never checked in).

:func:`make_pki` writes PEM files into a directory: a test CA, a server certificate for
127.0.0.1 and localhost signed by it, a client certificate signed by it (for mutual TLS),
and a second CA that signed nothing here (a client trusting it must refuse the server).
Keys are unencrypted PKCS#8 EC keys, readable by their owner only.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Pki:
    """The PEM files of the test's certificates."""

    ca: Path
    server_cert: Path
    server_key: Path
    #: the server's key then its certificate: a broker's ``ssl.keystore.location`` (PEM)
    server_keystore: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: str,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    usage: x509.ObjectIdentifier | None,
) -> x509.Certificate:
    """A CA certificate when ``usage`` is None, else a leaf for that extended usage."""
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=usage is None, path_length=None), critical=True)
    )
    if usage is None:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if usage == ExtendedKeyUsageOID.SERVER_AUTH:
        names: list[x509.GeneralName] = [
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address(HOST)),
        ]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, *, private: bool = False) -> Path:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


def make_pki(directory: Path) -> Pki:
    """Write the test certificates and keys into ``directory``."""
    ca_key, other_key, server_key, client_key = (_key() for _ in range(4))
    ca = _certificate("zync test CA", ca_key, "zync test CA", ca_key, usage=None)
    other = _certificate("some other CA", other_key, "some other CA", other_key, usage=None)
    server = _certificate(
        HOST, server_key, "zync test CA", ca_key, usage=ExtendedKeyUsageOID.SERVER_AUTH
    )
    client = _certificate(
        "zync-client", client_key, "zync test CA", ca_key, usage=ExtendedKeyUsageOID.CLIENT_AUTH
    )
    return Pki(
        ca=_write(directory / "ca.pem", _cert_pem(ca)),
        server_cert=_write(directory / "server.pem", _cert_pem(server)),
        server_key=_write(directory / "server.key", _key_pem(server_key), private=True),
        server_keystore=_write(
            directory / "server-keystore.pem",
            _key_pem(server_key) + _cert_pem(server),
            private=True,
        ),
        client_cert=_write(directory / "client.pem", _cert_pem(client)),
        client_key=_write(directory / "client.key", _key_pem(client_key), private=True),
        other_ca=_write(directory / "other-ca.pem", _cert_pem(other)),
    )
