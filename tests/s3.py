"""An S3 API server for the tests: moto's server (S3 and DynamoDB over HTTP) on 127.0.0.1.

:func:`start_moto` starts it as a child process on a free port, waits until it answers
HTTP (a condition, never a fixed sleep) and returns a :class:`MotoServer` that knows how
to stop it by its PID. :meth:`MotoServer.new_lake` makes a fresh bucket and returns the
``s3://`` URL of a lake in it; :meth:`MotoServer.env` gives the AWS settings that reach it.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ACCESS_KEY = "zync-test-access"
SECRET_KEY = "zync-test-secret-do-not-print"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, timeout: float, process: subprocess.Popen[bytes] | None = None) -> None:
    """Until ``url`` answers HTTP (any status), or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # it answered
        except OSError as exc:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"the server at {url} exited with {process.returncode}") from exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer from {url} within {timeout}s") from exc
            time.sleep(0.05)


@dataclass
class MotoServer:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    buckets: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The AWS settings that reach this server (as a user would export them)."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self, service: str = "s3"):
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def new_lake(self, prefix: str = "lake") -> str:
        """A fresh bucket; the ``s3://`` URL of a lake under ``prefix`` in it."""
        bucket = f"zync-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=bucket)
        self.buckets.append(bucket)
        return f"s3://{bucket}/{prefix}"

    def keys(self, url: str) -> list[str]:
        """Every object key under an ``s3://bucket/prefix`` URL."""
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        found: list[str] = []
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            found.extend(item["Key"] for item in page.get("Contents", []))
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def start_moto(tmp_dir: Path, timeout: float = 60.0, *, check_keys: bool = False) -> MotoServer:
    """moto's server (S3, DynamoDB) on a free port of 127.0.0.1, answering. With
    ``check_keys`` it refuses requests signed with keys it does not know (moto's IAM
    authentication, from the first request on)."""
    port = free_port()
    log = tmp_dir / "moto.log"
    env = dict(os.environ)
    if check_keys:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    server = MotoServer(process, port, log)
    atexit.register(server.stop)  # a safety net if the fixture's teardown never runs
    try:
        wait_http(f"{server.endpoint}/moto-api/", timeout, process)
    except BaseException:
        server.stop()
        raise
    return server
