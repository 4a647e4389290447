"""librdkafka's errors in zync's words: each refusal names the setting to fix.

The error texts are those librdkafka 2.16 gave against Apache Kafka 4.1 (see
tests/integration/test_security.py, which gets them from a real broker).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from engine.kafka.refusals import refusal, rejected_file
from engine.settings.kafka import KafkaProfile, SaslMechanism, SecurityProtocol
from engine.settings.secret import Secret

PASSWORD = "never-shown-pw-1234"
CA, OTHER, CERT, KEY = Path("/x/ca.pem"), Path("/x/other.pem"), Path("/x/c.pem"), Path("/x/c.key")


def _sasl(protocol: SecurityProtocol, mechanism: SaslMechanism | None) -> KafkaProfile:
    return KafkaProfile(
        "127.0.0.1:9093",
        protocol,
        sasl_mechanisms=mechanism,
        sasl_username="alice",
        sasl_password=Secret(PASSWORD),
        tls_server_ca_cert_file=CA if protocol.uses_tls else None,
    )


SCRAM = _sasl(SecurityProtocol.SASL_SSL, SaslMechanism.SCRAM_SHA_512)
PLAIN = _sasl(SecurityProtocol.SASL_PLAINTEXT, None)
MTLS = KafkaProfile(
    "127.0.0.1:9094", SecurityProtocol.SSL, tls_client_cert_file=CERT,
    tls_client_key_file=KEY, tls_server_ca_cert_file=OTHER,
)  # fmt: skip
NO_CERT = KafkaProfile("127.0.0.1:9094", SecurityProtocol.SSL, tls_server_ca_cert_file=CA)

CASES = [
    (
        SCRAM,
        KafkaError._AUTHENTICATION,
        "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication failed "
        "during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 "
        "(after 317ms in state AUTH_REQ)",
        "the broker refused the SASL SCRAM-SHA-512 login of user 'alice' (Authentication failed "
        "during authentication due to invalid credentials): check sasl_password and "
        "sasl_username",
    ),
    (
        PLAIN,
        KafkaError._AUTHENTICATION,
        "sasl_plaintext://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication "
        "failed: Invalid username or password (after 302ms in state AUTH_REQ, 1 identical "
        "error(s) suppressed)",
        "the broker refused the SASL PLAIN login of user 'alice' (Authentication failed: Invalid "
        "username or password): check sasl_password and sasl_username",
    ),
    (
        _sasl(SecurityProtocol.SASL_PLAINTEXT, SaslMechanism.SCRAM_SHA_256),
        KafkaError._AUTHENTICATION,
        "sasl_plaintext://127.0.0.1:9093/bootstrap: SASL SCRAM-SHA-256 mechanism handshake "
        "failed: Broker: Unsupported SASL mechanism: broker's supported mechanisms: PLAIN "
        "(after 301ms in state AUTH_HANDSHAKE)",
        "the listener does not offer SASL mechanism SCRAM-SHA-256 (it offers PLAIN): set "
        "sasl_mechanisms to one of those",
    ),
    (
        PLAIN,
        KafkaError._AUTHENTICATION,
        "sasl_plaintext://127.0.0.1:9092/bootstrap: SASL PLAIN mechanism handshake failed: "
        "Broker: Request not valid in current SASL state: broker's supported mechanisms: "
        "(after 3ms in state AUTH_HANDSHAKE)",
        "the listener at bootstrap_servers takes no SASL login: check security_protocol "
        "(SASL_PLAINTEXT) and bootstrap_servers",
    ),
    (
        MTLS,
        KafkaError._SSL,
        "ssl://127.0.0.1:9094/bootstrap: SSL handshake failed: error:0A000086:SSL routines::"
        "certificate verify failed: broker certificate could not be verified, verify that "
        "ssl.ca.location is correctly configured or root CA certificates are installed "
        "(install ca-certificates package) (after 8ms in state SSL_HANDSHAKE)",
        "the broker's TLS certificate is not signed by the CA certificate(s) in /x/other.pem, "
        "or does not name the host in bootstrap_servers (certificate verify failed): set "
        "tls_server_ca_cert_file to the CA certificate that signed the brokers' certificates",
    ),
    (
        NO_CERT,
        KafkaError._TRANSPORT,
        "ssl://127.0.0.1:9094/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls "
        "alert bad certificate: SSL alert number 42 (after 0ms in state APIVERSION_QUERY)",
        "the broker requires a client certificate (mutual TLS) and refused the connection "
        "(Receive failed: ssl/tls alert bad certificate: SSL alert number 42): set "
        "tls_client_cert_file and tls_client_key_file",
    ),
    (
        MTLS,
        KafkaError._TRANSPORT,
        "ssl://127.0.0.1:9094/bootstrap: Receive failed: error:0A000418:SSL routines::tlsv1 "
        "alert unknown ca: SSL alert number 48 (after 0ms in state APIVERSION_QUERY)",
        "the broker did not accept the client certificate in /x/c.pem (Receive failed: tlsv1 "
        "alert unknown ca: SSL alert number 48): set tls_client_cert_file (and "
        "tls_client_key_file) to a certificate signed by a CA the broker trusts",
    ),
    (
        NO_CERT,
        KafkaError._TRANSPORT,
        "ssl://127.0.0.1:9092/bootstrap: SSL handshake failed: Disconnected: SSL connection "
        "closed by peer: connecting to a PLAINTEXT broker listener? (after 13ms in state "
        "SSL_HANDSHAKE)",
        "the TLS handshake failed (Disconnected: SSL connection closed by peer: connecting to a "
        "PLAINTEXT broker listener?): check security_protocol (SSL) against the listener at "
        "bootstrap_servers, and the tls_* settings",
    ),
]


@pytest.mark.parametrize(("profile", "code", "text", "expected"), CASES)
def test_a_refusal_names_the_setting(
    profile: KafkaProfile, code: int, text: str, expected: str
) -> None:
    assert refusal(KafkaError(code, text), profile) == expected
    assert PASSWORD not in expected


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
        (
            KafkaError._TRANSPORT,
            "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection "
            "refused (after 0ms in state CONNECT)",
        ),
        (
            KafkaError._TRANSPORT,
            "127.0.0.1:9094/bootstrap: Disconnected: connection closed by peer: receive 0 "
            "after POLLIN (after 1ms in state APIVERSION_QUERY)",
        ),
    ],
)
def test_what_a_retry_may_fix_is_no_refusal(code: int, text: str) -> None:
    assert refusal(KafkaError(code, text), PLAIN) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Failed to create producer: ssl.key.location failed: error:05800074:x509 "
            "certificate routines::key values mismatch",
            "the private key in tls_client_key_file (/x/c.key) does not belong to the "
            "certificate in tls_client_cert_file (/x/c.pem)",
        ),
        (
            "Failed to create consumer: ssl.certificate.location failed: error:0A080009:SSL "
            "routines::PEM lib",
            "tls_client_cert_file (/x/c.pem) cannot be used: PEM lib; it must be a PEM file",
        ),
        (
            "Failed to create admin client: ssl.ca.location failed: error:05800088:x509 "
            "certificate routines::no certificate or crl found",
            "tls_server_ca_cert_file (/x/other.pem) cannot be used: no certificate or crl "
            "found; it must be a PEM file",
        ),
    ],
)
def test_a_refused_file_is_named(text: str, expected: str) -> None:
    assert rejected_file(KafkaError(KafkaError._INVALID_ARG, text), MTLS) == expected


def test_other_construction_errors_are_not_about_files() -> None:
    error = KafkaError(KafkaError._INVALID_ARG, "Failed to create producer: No such configuration")
    assert rejected_file(error, MTLS) is None


def test_a_repeated_error_is_told_without_librdkafkas_count() -> None:
    """How many connection attempts fit in the wait changes from run to run; the one
    line a user reads does not."""
    from confluent_kafka import KafkaError

    from engine.kafka.clients import ErrorLog

    words = "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused"
    errors = ErrorLog()
    errors(KafkaError(KafkaError._TRANSPORT, f"{words} (after 0ms in state CONNECT)"))
    once = errors.reason(KafkaError(KafkaError._TRANSPORT))
    errors(KafkaError(KafkaError._TRANSPORT,
                      f"{words} (after 0ms in state CONNECT, 1 identical error(s) suppressed)"))
    assert errors.reason(KafkaError(KafkaError._TRANSPORT)) == once
    assert once == f"{words} (after 0ms in state CONNECT)"
