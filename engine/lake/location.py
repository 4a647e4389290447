"""Where a lake or a pool is: a local directory or an ``s3://bucket/prefix`` URL.

A :class:`Location` names a place the same way for every reader: :attr:`Location.uri` for
delta-rs (a path, or ``s3://``), :attr:`Location.spark_uri` for Spark (``file:///``, or
``s3a://`` — Hadoop's S3 file system), and :meth:`Location.filesystem` for pyarrow (a
file system and a path in it). An S3 location carries its
:class:`~engine.settings.storage.StorageSettings`, so whoever opens a pool gets the
credentials and endpoint without asking for them again.

:func:`parse_location` refuses what is almost a URL (``s3:/x``, ``s4://x``, ``s3://``
without a bucket) with one line, rather than making a local directory named ``s3:``.
:func:`resolve_lake` is the lake of a command: ``--lake``, else ``$ZYNC_LAKE``, else the
``lake`` of ``storage.json``, else ``<zync home>/lake``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from engine.settings.errors import ConfigError
from engine.settings.home import environ, zync_home
from engine.settings.storage import StorageSettings, configured_lake, load_storage_settings

if TYPE_CHECKING:
    import pyarrow.fs

S3 = "s3"
LOCAL = "file"
_URLISH = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?P<rest>/.*)?$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_S3_SCHEMES = frozenset({"s3", "s3a"})
_LATER = frozenset({"gs", "gcs", "abfs", "abfss", "az", "adl", "wasb", "wasbs", "hdfs"})


@dataclass(frozen=True)
class Location:
    """A local directory (``scheme`` ``file``, ``key`` an absolute path) or an S3 prefix
    (``bucket`` and ``key``, the key without leading or trailing ``/``)."""

    scheme: str
    key: str
    bucket: str = ""
    storage: StorageSettings | None = field(default=None, compare=False, repr=False)

    # -- naming -------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return self.scheme == LOCAL

    @property
    def path(self) -> Path:
        """The local directory (a local location only)."""
        if not self.is_local:
            raise ValueError(f"{self} is not a local directory")
        return Path(self.key)

    @property
    def name(self) -> str:
        return PurePosixPath(self.key).name or self.bucket

    def join(self, *parts: str) -> Location:
        """The location ``parts`` below this one."""
        clean = [p.strip("/") for p in parts if p.strip("/")]
        if self.is_local:
            return Location(LOCAL, str(Path(self.key, *clean)))
        key = "/".join([self.key, *clean] if self.key else clean)
        return Location(S3, key, self.bucket, self.storage)

    @property
    def uri(self) -> str:
        """How delta-rs names it: a path, or ``s3://bucket/key``."""
        if self.is_local:
            return self.key
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"

    @property
    def spark_uri(self) -> str:
        """How Spark names it: ``file:///...``, or ``s3a://bucket/key``."""
        if self.is_local:
            return Path(self.key).resolve().as_uri()
        return f"s3a://{self.bucket}/{self.key}" if self.key else f"s3a://{self.bucket}"

    def __str__(self) -> str:
        return self.uri

    # -- access ---------------------------------------------------------------------------

    @property
    def settings(self) -> StorageSettings:
        """The S3 settings of an S3 location (loaded from the environment if none came)."""
        return self.storage if self.storage is not None else load_storage_settings()

    def storage_options(self) -> dict[str, str] | None:
        """delta-rs ``storage_options`` (None for a local directory)."""
        return None if self.is_local else self.settings.delta_options()

    def filesystem(self) -> tuple[pyarrow.fs.FileSystem, str]:
        """A pyarrow file system and this location's path in it."""
        import pyarrow.fs  # deferred: loaded on use

        if self.is_local:
            return pyarrow.fs.LocalFileSystem(), self.key
        return self.settings.arrow_filesystem(), f"{self.bucket}/{self.key}".rstrip("/")

    def arrow_paths(self, uris: list[str]) -> tuple[pyarrow.fs.FileSystem, list[str]]:
        """File URIs delta-rs gave (``s3://b/k`` or paths) as paths of one pyarrow file
        system, for ``pyarrow.dataset.dataset(paths, filesystem=fs)``."""
        fs, _ = self.filesystem()
        if self.is_local:
            return fs, [u.removeprefix("file://") for u in uris]
        return fs, [u.split("://", 1)[1] if "://" in u else u for u in uris]

    def exists(self) -> bool:
        """True when something is there (a directory, or any object under the prefix)."""
        import pyarrow.fs  # deferred: loaded on use

        fs, path = self.filesystem()
        if self.is_local:
            return bool(fs.get_file_info(path).type != pyarrow.fs.FileType.NotFound)
        found = fs.get_file_info(pyarrow.fs.FileSelector(path, allow_not_found=True))
        return bool(found)

    def child_names(self) -> list[str]:
        """Names of the directories (prefixes) right below this location."""
        import pyarrow.fs  # deferred: loaded on use

        fs, path = self.filesystem()
        selector = pyarrow.fs.FileSelector(path, allow_not_found=True, recursive=False)
        return sorted(
            PurePosixPath(info.path).name
            for info in fs.get_file_info(selector)
            if info.type == pyarrow.fs.FileType.Directory
        )

    def make_dirs(self) -> None:
        """Create the directory (nothing to do on S3, where prefixes need no creating)."""
        if self.is_local:
            Path(self.key).mkdir(parents=True, exist_ok=True)

    def remove_tree(self) -> None:
        """Delete everything at and below this location."""
        fs, path = self.filesystem()
        fs.delete_dir(path)


def parse_location(
    text: str | Path, storage: StorageSettings | None = None, *, origin: str = "the lake"
) -> Location:
    """A location from a path or URL. S3 locations get ``storage`` (default: loaded from
    the environment and ``storage.json``). Raises :class:`ConfigError` (one line) for a
    URL that is not a supported one."""
    if isinstance(text, Path):
        return Location(LOCAL, str(text.expanduser().absolute()))
    raw = text.strip()
    match = _URLISH.match(raw)
    if match is None or (len(match.group("scheme")) == 1 and raw[1:2] == ":"):
        if raw.lower().startswith(("s3:", "s3a:")):
            raise ConfigError(f"{origin} {raw!r}: did you mean s3://BUCKET/PREFIX?")
        return Location(LOCAL, str(Path(raw).expanduser().absolute()))
    scheme = match.group("scheme").lower()
    rest = match.group("rest") or ""
    if scheme == LOCAL:
        if not rest.startswith("//"):
            raise ConfigError(f"{origin} {raw!r}: expected file:///ABSOLUTE/PATH")
        return Location(LOCAL, str(Path(rest[2:] or "/").absolute()))
    if scheme in _LATER:
        raise ConfigError(f"{origin} {raw!r}: {scheme}:// lakes are not supported yet; use s3://")
    if scheme not in _S3_SCHEMES:
        raise ConfigError(
            f"{origin} {raw!r}: unknown scheme {scheme}:// (a lake is a local directory or "
            "s3://BUCKET/PREFIX)"
        )
    if not rest.startswith("//"):
        raise ConfigError(f"{origin} {raw!r}: did you mean s3://{rest.lstrip('/')}?")
    bucket, _, key = rest[2:].partition("/")
    if not bucket:
        raise ConfigError(f"{origin} {raw!r}: no bucket: expected s3://BUCKET/PREFIX")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise ConfigError(
            f"{origin} {raw!r}: {bucket!r} is not a valid bucket name (3-63 lower-case "
            "letters, digits, '.' and '-')"
        )
    key = "/".join(part for part in key.split("/") if part)
    settings = storage if storage is not None else load_storage_settings()
    # credentials and region a profile of ~/.aws gives, where the settings lack them
    return Location(S3, key, bucket, settings.with_profile_credentials())


def resolve_lake(
    lake: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Location:
    """The lake of a command: ``lake`` (``--lake``), else ``$ZYNC_LAKE``, else ``lake`` in
    ``storage.json``, else ``<zync home>/lake``. Not created here."""
    env = environ(env)
    storage = load_storage_settings(env, home)
    if lake is not None and str(lake) != "":
        return parse_location(lake, storage, origin="--lake")
    found = configured_lake(env, home)
    if found is not None:
        return parse_location(found[0], storage, origin=found[1])
    return Location(LOCAL, str((home or zync_home(env)) / "lake"))
