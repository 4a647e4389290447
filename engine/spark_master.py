"""Where a session's executors run: a Spark master URL understood (``local[N]``, a
``spark://`` cluster of one or more hosts) and reached before a session is started on
it, so that a wrong master is one line, not a minute of the JVM retrying."""

from __future__ import annotations

import re
import socket

from engine.errors import ZyncError


class SparkMasterError(ZyncError):
    """The Spark master URL is malformed or no master answers at it."""


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_SPARK_URL = re.compile(r"^spark://(?P<hosts>[^/]+?)/?$")


def cluster_hosts(master: str) -> list[tuple[str, int]] | None:
    """The (host, port) pairs of a ``spark://`` master URL (several for a standby
    master: ``spark://h1:7077,h2:7077``); None for any other kind of master.

    Raises :class:`SparkMasterError` for a ``spark://`` URL without host or port.
    """
    match = _SPARK_URL.match(master.strip())
    if not match:
        if master.strip().startswith("spark://"):
            raise SparkMasterError(f"Spark master {master!r}: expected spark://HOST:PORT")
        return None
    hosts = []
    for part in match.group("hosts").split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise SparkMasterError(f"Spark master {master!r}: expected spark://HOST:PORT")
        hosts.append((host, int(port)))
    return hosts


def is_local_master(master: str) -> bool:
    """True for ``local``/``local[N]``/``local-cluster[...]`` and for ``spark://``
    masters on the loopback interface: the driver can then bind to 127.0.0.1."""
    if master.startswith("local"):
        return True
    try:
        hosts = cluster_hosts(master)
    except SparkMasterError:
        return False
    return bool(hosts) and all(host in LOOPBACK_HOSTS for host, _ in hosts or ())


def check_master(master: str, timeout: float = 5.0) -> None:
    """For a ``spark://`` master, check that one of its hosts accepts a connection;
    raises :class:`SparkMasterError` (one line) when none does. Other masters pass."""
    hosts = cluster_hosts(master)
    if not hosts:
        return
    reasons = []
    for host, port in hosts:
        try:
            with socket.create_connection((host.strip("[]"), port), timeout=timeout):
                return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    raise SparkMasterError(
        f"cannot reach the Spark master {master} ({'; '.join(reasons)}): start it, or choose "
        "another with --spark-master, $ZYNC_SPARK_MASTER or spark.json"
    )


def executors_in_driver(master: str) -> bool:
    """True for ``local``/``local[N]``/``local[N,F]``/``local[*]``: the executors are
    threads of the driver's JVM (not ``local-cluster[...]``, whose executors are JVMs of
    their own)."""
    return master == "local" or master.startswith("local[")
