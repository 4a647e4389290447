"""What librdkafka or the broker refused, in words that name the zync setting to fix.

librdkafka writes its errors for its own keys (``ssl.ca.location``, ...); a user of zync
knows the keys of ``kafka.json`` (``tls_server_ca_cert_file``, ...). Two kinds of refusal
are recognised here, both final (no retry helps):

* :func:`refusal`: the broker refused the connection, as the client's error callback
  reports it: a SASL login (``sasl_password`` / ``sasl_username``), a SASL mechanism the
  listener does not offer (``sasl_mechanisms``), a broker certificate the client cannot
  verify (``tls_server_ca_cert_file``), a TLS alert from the broker about the client's
  certificate, missing or untrusted (``tls_client_cert_file``), any other failed TLS
  handshake (``security_protocol``);
* :func:`rejected_file`: librdkafka refused to build a client from a certificate or key
  file (not PEM, a key that does not fit its certificate).

Anything else (nothing listening, a broker still starting) is None: the caller retries
until its timeout. No message here holds a password.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from confluent_kafka import KafkaError

from engine.settings.kafka import KafkaProfile, SaslMechanism

#: ``sasl_ssl://127.0.0.1:9093/bootstrap: `` (or ``127.0.0.1:9092/1: ``) before the reason
_BROKER_PREFIX: Final = re.compile(r"^(?:\w+://)?[^\s/]+/[^\s:]+: ")
#: librdkafka's note that it repeated a message, inside the message's closing parenthesis
_REPEATS: Final = r", \d+ identical error\(s\) suppressed"
_REPEAT_NOTE: Final = re.compile(_REPEATS + r"(?=\))")
#: ``(after 317ms in state AUTH_REQ)`` (with ``, N identical error(s) suppressed``) after it
_STATE_SUFFIX: Final = re.compile(r"\s*\(after \d+ms in state \w+(?:" + _REPEATS + r")?\)\s*$")
#: OpenSSL's prefix of a reason, e.g. ``error:0A000086:SSL routines::``
_OPENSSL_CODE: Final = re.compile(r"error:[0-9A-Fa-f]+:[\w ]+ routines:[^:]*:")
#: "broker's supported mechanisms: PLAIN,SCRAM-SHA-512" (empty: no SASL at that listener)
_OFFERED: Final = re.compile(r"supported mechanisms:\s*([\w\-, ]*)")
#: the files a client is built from: librdkafka's key -> zync's
_FILE_KEYS: Final = {
    "ssl.certificate.location": "tls_client_cert_file",
    "ssl.key.location": "tls_client_key_file",
    "ssl.ca.location": "tls_server_ca_cert_file",
}
_FILE_FAILED: Final = re.compile(r"(ssl\.[a-z.]+) failed: (.*)$")


def without_repeat_count(text: str) -> str:
    """``text`` without librdkafka's count of the times it repeated it: how many
    connection attempts fit in a wait says nothing to a user."""
    return _REPEAT_NOTE.sub("", text)


def _reason_text(error: KafkaError) -> str:
    """librdkafka's reason without the broker's address before it, the connection state
    after it and OpenSSL's error codes."""
    text = _BROKER_PREFIX.sub("", str(error.str()))
    return _OPENSSL_CODE.sub("", _STATE_SUFFIX.sub("", text))


def refusal(error: KafkaError, profile: KafkaProfile) -> str | None:
    """What the broker refused and the setting to fix, in one sentence; None when
    ``error`` is not a refusal (it may go away on retry)."""
    text = _reason_text(error)
    for matches, explain in _RULES:
        if matches(error.code(), text):
            return explain(text, profile)
    return None


def rejected_file(error: KafkaError, profile: KafkaProfile) -> str | None:
    """Which certificate or key file librdkafka refused when building a client, and why;
    None when ``error`` is about something else."""
    found = _FILE_FAILED.search(_reason_text(error))
    if found is None or found.group(1) not in _FILE_KEYS:
        return None
    key, why = _FILE_KEYS[found.group(1)], found.group(2).strip()
    path = getattr(profile, key)
    if "key values mismatch" in why:
        return (
            f"the private key in tls_client_key_file ({path}) does not belong to the "
            f"certificate in tls_client_cert_file ({profile.tls_client_cert_file})"
        )
    return f"{key} ({path}) cannot be used: {why}; it must be a PEM file"


# --------------------------------------------------------------------------- SASL


def _is_sasl(code: int, text: str) -> bool:
    return code == KafkaError._AUTHENTICATION or text.startswith("SASL")


def _sasl(text: str, profile: KafkaProfile) -> str:
    mechanism = profile.sasl_mechanisms or SaslMechanism.PLAIN
    offered = _OFFERED.search(text)
    if offered and not offered.group(1).strip():
        return (
            f"the listener at bootstrap_servers takes no SASL login: check security_protocol "
            f"({profile.security_protocol}) and bootstrap_servers"
        )
    if offered:
        return (
            f"the listener does not offer SASL mechanism {mechanism} "
            f"(it offers {offered.group(1).strip()}): set sasl_mechanisms to one of those"
        )
    detail = text.removeprefix("SASL authentication error: ")
    detail = detail.removesuffix(f" with SASL mechanism {mechanism}")
    return (
        f"the broker refused the SASL {mechanism} login of user {profile.sasl_username!r} "
        f"({detail}): check sasl_password and sasl_username"
    )


# --------------------------------------------------------------------------- TLS


def _untrusted_server(code: int, text: str) -> bool:
    return "certificate verify failed" in text


def _server_ca(text: str, profile: KafkaProfile) -> str:
    ca = profile.tls_server_ca_cert_file
    trusted = f"the CA certificate(s) in {ca}" if ca else "the system's CA certificates"
    return (
        f"the broker's TLS certificate is not signed by {trusted}, or does not name the host "
        "in bootstrap_servers (certificate verify failed): set tls_server_ca_cert_file to "
        "the CA certificate that signed the brokers' certificates"
    )


def _client_certificate_alert(code: int, text: str) -> bool:
    """A TLS alert from the broker about our certificate ("bad certificate", "certificate
    required", "unknown ca", ...): a broker that requires mutual TLS sends one when the
    client sent no certificate or one it does not trust."""
    alert = re.search(r"alert ([\w ]+)", text)
    return alert is not None and ("certificate" in alert.group(1) or "unknown ca" in text)


def _client_cert(text: str, profile: KafkaProfile) -> str:
    cert = profile.tls_client_cert_file
    if cert is None:
        return (
            f"the broker requires a client certificate (mutual TLS) and refused the "
            f"connection ({text}): set tls_client_cert_file and tls_client_key_file"
        )
    return (
        f"the broker did not accept the client certificate in {cert} ({text}): set "
        "tls_client_cert_file (and tls_client_key_file) to a certificate signed by a CA "
        "the broker trusts"
    )


def _failed_handshake(code: int, text: str) -> bool:
    return code == KafkaError._SSL or "SSL handshake failed" in text


def _handshake(text: str, profile: KafkaProfile) -> str:
    detail = text.removeprefix("SSL handshake failed: ")
    return (
        f"the TLS handshake failed ({detail}): check security_protocol "
        f"({profile.security_protocol}) against the listener at bootstrap_servers, and the "
        "tls_* settings"
    )


_Matches = Callable[[int, str], bool]
_Explain = Callable[[str, KafkaProfile], str]

#: first match wins: a certificate the client cannot verify also fails the handshake
_RULES: Final[tuple[tuple[_Matches, _Explain], ...]] = (
    (_is_sasl, _sasl),
    (_untrusted_server, _server_ca),
    (_client_certificate_alert, _client_cert),
    (_failed_handshake, _handshake),
)
