"""Who may read and who may control a process through its API.

* The Unix socket: everything, for the socket's owner (and root) — its mode 0600 and its
  private directory are the guard, and the server checks each peer's user too
  (:func:`engine.serve.sockets.peer_uid`): another user gets 403.
* TCP: control (``POST``) needs the bearer token; reads need it too unless the process
  was started with ``--http-public-read`` (so Prometheus and probes scrape without it).
  The token is ``$ZYNC_CONTROL_TOKEN`` or the contents of ``--control-token-file``.
  Missing or wrong: 401 (logged; nothing changes).
"""

from __future__ import annotations

import hmac
import logging
import os
import stat
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ZyncError

log = logging.getLogger("engine.serve")

TOKEN_ENV = "ZYNC_CONTROL_TOKEN"
#: The shortest token accepted (a token guessed is control of the pipeline).
MIN_TOKEN = 16


class TokenError(ZyncError):
    """The control token cannot be read or is too weak; the message says why."""


def load_token(file: Path | None = None) -> str | None:
    """The control token: the contents of ``file`` when given, else ``$ZYNC_CONTROL_TOKEN``
    (None: neither). A file others may read is used with a warning."""
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8").strip()
            mode = file.stat().st_mode
        except OSError as exc:
            raise TokenError(f"cannot read the control token file {file}: {exc.strerror or exc}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            warnings.warn(
                f"{file} can be read by other users: `chmod 600 {file}`", stacklevel=2
            )
        source = str(file)
    else:
        text = os.environ.get(TOKEN_ENV, "").strip()
        source = f"${TOKEN_ENV}"
        if not text:
            return None
    if len(text) < MIN_TOKEN:
        raise TokenError(
            f"the control token in {source} is too short ({len(text)} characters, at least "
            f"{MIN_TOKEN}): e.g. `openssl rand -hex 24`"
        )
    return text


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: its HTTP status and one line."""

    status: int
    message: str


class Guard:
    """Decides each request: ``token`` (None: no control over TCP), ``public_read``."""

    def __init__(self, token: str | None, *, public_read: bool = False) -> None:
        self.token = token
        self.public_read = public_read
        self._uid = os.getuid()
        self._logged = 0.0
        self._quiet = 0

    def check(
        self, *, unix: bool, peer_uid: int | None, control: bool, authorization: str | None
    ) -> Refusal | None:
        """None when the request may go on, else why not."""
        if unix:
            if peer_uid is not None and peer_uid not in (self._uid, 0):
                return self._refuse(
                    403, f"the socket serves its owner only (uid {self._uid}), not uid {peer_uid}"
                )
            return None
        if not control and self.public_read:
            return None
        if self.token is None:
            what = "control" if control else "reading"
            return self._refuse(
                403,
                f"{what} over TCP needs a token: start the process with ${TOKEN_ENV} or "
                "--control-token-file",
            )
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self.token.encode()
        ):
            reason = "missing" if not authorization else "wrong"
            return self._refuse(401, f"{reason} bearer token (Authorization: Bearer TOKEN)")
        return None

    def _refuse(self, status: int, message: str) -> Refusal:
        """A refusal, logged — at most once a second, with the count of those not logged."""
        now = time.monotonic()
        if now - self._logged >= 1.0:
            more = f" (and {self._quiet} more refused)" if self._quiet else ""
            log.warning("API request refused (%d): %s%s", status, message, more)
            self._logged, self._quiet = now, 0
        else:
            self._quiet += 1
        return Refusal(status, message)
