"""Whether commits to an ``s3://`` lake are safe, found out once per lake.

A Delta commit is "write ``_delta_log/<version>.json`` only if no one wrote it yet". On a
local file system delta-rs gets that from an atomic rename; on S3 it sends the log entry
with ``If-None-Match: *`` (S3 conditional writes, delta-rs 1.x's default), and the store
must refuse the second writer of a version with ``412 Precondition Failed``. A store
that ignores the header would let two writers both "win" the same version, silently
losing one commit — and every exactly-once guarantee with it.

So before the first write to an S3 lake, :class:`CommitGuard` probes the store: it
writes a probe object under ``<lake>/_zync/`` twice with ``If-None-Match: *`` and
expects the second write refused. The answer is kept for the process. A store that does
not refuse is refused in turn: :class:`UnsafeLakeError`, one line naming the setting
that overrides it (``AWS_S3_ALLOW_UNSAFE_RENAME=true``, delta-rs' own name for "I have one
writer"). delta-spark's DynamoDB log store is not offered: delta-rs 1.6 removed its
implementation (it now only logs that it is unsupported), so a zync commit could not
honour the lock table.

The probe's first request also tells an unreachable endpoint, a missing bucket and
refused credentials apart, each as a one-line :class:`LakeAccessError` — far sooner than
delta-rs' own retries would.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import ZyncError
from engine.settings.home import env_value, environ

if TYPE_CHECKING:
    from engine.lake.location import Location

UNSAFE_OVERRIDE = "AWS_S3_ALLOW_UNSAFE_RENAME"
_ACCESS_CODES = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken",
     "InvalidToken", "403", "UnrecognizedClientException", "AuthorizationHeaderMalformed"}
)
_REFUSED = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})


class LakeAccessError(ZyncError):
    """The lake's store cannot be reached or refuses us; one line says which and why."""


class UnsafeLakeError(ZyncError):
    """Writing to the lake would not be safe against concurrent writers; one line."""


@dataclass(frozen=True)
class Probe:
    """What the store answered: readable, and whether it refuses a second conditional put
    (``conditional``: True/False; None when we may not write at all, ``reason`` says)."""

    conditional: bool | None
    reason: str = ""


_lock = threading.Lock()
_probes: dict[tuple[str, str, str], Probe] = {}


def _code(exc: Any) -> str:
    response = getattr(exc, "response", None) or {}
    error = response.get("Error", {})
    code = str(error.get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code or str(status or "")


def access_error(location: Location, exc: BaseException) -> LakeAccessError:
    """A one-line :class:`LakeAccessError` for what boto3 raised reaching ``location``."""
    # deferred: botocore is only needed for an s3:// lake
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )
    from botocore.exceptions import ConnectTimeoutError as BotoConnectTimeout

    settings = location.settings
    where = settings.where()
    if isinstance(exc, EndpointConnectionError | BotoConnectTimeout | ReadTimeoutError):
        return LakeAccessError(
            f"cannot reach the S3 endpoint {where} for the lake {location.uri}: "
            f"{type(exc).__name__}; check AWS_ENDPOINT_URL ({settings.origin})"
        )
    if isinstance(exc, NoCredentialsError):
        return missing_credentials(location)
    if isinstance(exc, ClientError):
        code = _code(exc)
        if code in ("NoSuchBucket", "404"):
            return LakeAccessError(
                f"the lake {location.uri}: no bucket {location.bucket!r} at {where}; create it "
                "or fix the lake's URL"
            )
        if code in _ACCESS_CODES:
            return LakeAccessError(
                f"the lake {location.uri}: {where} refused the credentials ({code}); check "
                f"AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE ({settings.origin})"
            )
        return LakeAccessError(f"the lake {location.uri} at {where}: {code or exc}")
    return LakeAccessError(f"the lake {location.uri} at {where}: {type(exc).__name__}: {exc}")


def missing_credentials(location: Location) -> LakeAccessError:
    return LakeAccessError(
        f"no AWS credentials for the lake {location.uri}: set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), in the environment or in "
        "~/.zync/storage.json"
    )


class CommitGuard:
    """The commit safety of one lake location (an S3 prefix; a local lake is always safe)."""

    def __init__(self, location: Location) -> None:
        self.location = location

    def check_access(self) -> Probe | None:
        """Reach the store once (cached per endpoint, bucket and prefix); None for a local
        lake. Raises :class:`LakeAccessError`."""
        if self.location.is_local:
            return None
        settings = self.location.settings
        key = (settings.where(), self.location.bucket, self.location.key)
        with _lock:
            if key in _probes:
                return _probes[key]
        if not settings.has_credentials:
            raise missing_credentials(self.location)
        probe = self._probe()
        with _lock:
            _probes[key] = probe
        return probe

    def require_safe_commits(self, env: Any = None) -> None:
        """Raise :class:`UnsafeLakeError` unless concurrent commits are safe here."""
        probe = self.check_access()
        if probe is None or probe.conditional:
            return
        if probe.conditional is None:
            raise LakeAccessError(f"cannot write to the lake {self.location.uri}: {probe.reason}")
        override = env_value(environ(env), UNSAFE_OVERRIDE)
        if override is not None and override.strip().lower() in ("1", "true", "yes", "on"):
            return
        dynamo = ""
        if (env_value(environ(env), "AWS_S3_LOCKING_PROVIDER") or "").lower() == "dynamodb":
            dynamo = " (AWS_S3_LOCKING_PROVIDER=dynamodb is not honoured: delta-rs 1.6 dropped it)"
        raise UnsafeLakeError(
            f"refusing to write to the lake {self.location.uri}: {probe.reason}, so two "
            "writers could both commit the same Delta version; use a store with S3 "
            f"conditional writes, or set {UNSAFE_OVERRIDE}=true if one process alone "
            f"ever writes this lake{dynamo}"
        )

    def _probe(self) -> Probe:
        # deferred: botocore is only needed for an s3:// lake
        from botocore.exceptions import BotoCoreError, ClientError

        location = self.location
        s3 = location.settings.client("s3")
        prefix = f"{location.key}/" if location.key else ""
        try:
            s3.list_objects_v2(Bucket=location.bucket, Prefix=prefix, MaxKeys=1)
        except (BotoCoreError, ClientError) as exc:
            raise access_error(location, exc) from None
        probe_key = f"{prefix}_zync/commit-probe-{uuid.uuid4().hex}"
        try:
            s3.put_object(Bucket=location.bucket, Key=probe_key, Body=b"1", IfNoneMatch="*")
        except ClientError as exc:
            code = _code(exc)
            if code in _ACCESS_CODES:
                return Probe(None, f"no write access ({code})")
            return Probe(False, f"the store does not take conditional writes ({code})")
        except BotoCoreError as exc:
            raise access_error(location, exc) from None
        try:
            s3.put_object(Bucket=location.bucket, Key=probe_key, Body=b"2", IfNoneMatch="*")
            found = Probe(False, "the store ignores conditional writes (If-None-Match)")
        except ClientError as exc:
            code = _code(exc)
            found = (
                Probe(True)
                if code in _REFUSED
                else Probe(False, f"the store answered a conditional write with {code}")
            )
        except BotoCoreError as exc:
            raise access_error(location, exc) from None
        with contextlib.suppress(BotoCoreError, ClientError):  # a leftover probe is harmless
            s3.delete_object(Bucket=location.bucket, Key=probe_key)
        return found


def forget_probes() -> None:
    """Forget every probe result (tests start stores anew)."""
    with _lock:
        _probes.clear()
