"""The Spark types of a pool's topics, and where a pool keeps them.

Each topic a pool holds has a key type and a value type (the JSON of a Spark
``DataType``), which is how SQL sees typed structs over the JSON text of the rows. They
only grow: a new schema version is merged in (:func:`merge_topic_types`), never narrows.

A pool keeps them in **type files** beside its Delta log, under ``<pool>/_zync/types/``,
each named by the SHA-256 of its content and never changed once written:

* one file per distinct type (``<sha>.json``: the type's JSON);
* an *index* (``index-<sha>.json``: ``{"format": 1, "topics": {topic: {"key": sha,
  "value": sha}}}``);

and the table property ``zync.types`` names the current index. A change of types writes
the files it lacks, then commits the new index's name as a metadata-only Delta commit,
so the types are versioned with the table (a snapshot's property names the types of that
snapshot), and a reader never sees a name before its file. Delta's metadata stays a few
hundred bytes however many topics a pool holds and however wide their rows: a 60-column
Debezium topic's value type is ~10 kB of JSON, and 200 of them in table properties would
make every metadata commit and checkpoint ~5 MB (docs/design.md#where-a-pool-keeps-its-topics-types).
Vacuum (delta-rs' and delta-spark's) leaves ``_zync/`` alone: directories whose name
starts with ``_`` are not data.

The table's description says the pool's kind (:func:`pool_description`; delta-rs takes
no property it does not know when it creates a table, so the kind is not one). Pools made
before the type files kept their types in the description, which delta-rs caps at 4,000
characters — four small topics; :func:`read_meta` reads them there, and
:mod:`engine.lake.upgrade` moves them into files when such a pool is opened.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.sparktypes import merge_type_json

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from engine.lake.location import Location

#: The pool description's format that keeps types in files (an earlier zync's had none).
FORMAT = 2
#: The table property naming the index of a pool's type files.
TYPES_PROPERTY = "zync.types"
#: Where a pool's type files are, below the pool.
TYPES_DIR = "_zync/types"
INDEX_FORMAT = 1
#: Type files read or written at once (on object storage each is a small GET or PUT).
_FILES_AT_ONCE = 16


@dataclass(frozen=True)
class TopicTypes:
    """The Spark types (as DataType JSON) of a topic's keys and values in a pool."""

    key: str | None = None
    value: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"key": self.key, "value": self.value}


@dataclass
class PoolMeta:
    """A pool's kind and its topics' types, as of one snapshot."""

    kind: str
    types: dict[str, TopicTypes] = field(default_factory=dict)
    #: The name of the index the types were read from (None: no type recorded yet).
    index: str | None = None
    #: The types are in the table's description, where an earlier zync kept them.
    legacy: bool = False


def merge_topic_types(
    base: Mapping[str, TopicTypes], types: Mapping[str, TopicTypes]
) -> dict[str, TopicTypes]:
    """``base`` with ``types`` merged in, topic by topic (struct fields are merged)."""
    merged = dict(base)
    for topic, new in types.items():
        old = merged.get(topic, TopicTypes())
        merged[topic] = TopicTypes(
            key=merge_type_json(old.key, new.key),
            value=merge_type_json(old.value, new.value),
        )
    return merged


def pool_description(kind: str) -> str:
    """The description of a pool's table: its kind, and that its types are in files."""
    return json.dumps({"zync": {"kind": kind, "format": FORMAT}}, sort_keys=True)


def read_meta(table: DeltaTable, files: TypeFiles, known: PoolMeta | None = None) -> PoolMeta | None:
    """The kind and types of the snapshot ``table`` is at (None: not a zync pool).

    The types are those the ``zync.types`` property names; a pool an earlier zync made
    has none, and its description holds them (``{"zync": {"kind": ..., "types": {topic:
    {"key", "value"}}}}``): :attr:`PoolMeta.legacy`. ``known`` (the meta of an earlier
    snapshot) saves reading an index that did not change."""
    metadata = table.metadata()
    try:
        zync = json.loads(metadata.description or "")["zync"]
        kind = zync["kind"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(kind, str):
        return None
    index = metadata.configuration.get(TYPES_PROPERTY)
    if index:
        if known is not None and known.index == index:
            return PoolMeta(kind, known.types, index)
        return PoolMeta(kind, files.load(index), index)
    legacy = zync.get("types")
    if isinstance(legacy, dict) and legacy:
        try:
            types = {
                topic: TopicTypes(key=t.get("key"), value=t.get("value"))
                for topic, t in legacy.items()
            }
        except AttributeError:
            return None
        return PoolMeta(kind, types, legacy=True)
    return PoolMeta(kind)


class TypeFiles:
    """One pool's type files. Content never changes, so what was read is kept: opening a
    pool reads its index and the types it has not seen, a refresh only a new index.

    :meth:`of` gives every pool object of one pool in a process the same instance: a
    process delivering 400 outputs of one staging pool opens it 400 times, and each
    opening used to read the 400 topics' types again (a third of its start)."""

    _shared: dict[str, TypeFiles] = {}
    _shared_lock = threading.Lock()

    def __init__(self, pool: Location) -> None:
        self.where = pool.join(TYPES_DIR)
        self._lock = threading.Lock()
        self._loading = threading.Lock()  # one reader of a new index; the others wait
        self._texts: dict[str, str] = {}
        self._indexes: dict[str, dict[str, TopicTypes]] = {}

    @classmethod
    def of(cls, pool: Location) -> TypeFiles:
        """The process's type files of the pool at ``pool``: a name is the digest of its
        content, so what one pool object read is right for every other."""
        key = f"{pool.scheme}:{pool.uri}"
        with cls._shared_lock:
            found = cls._shared.get(key)
            if found is None:
                found = cls._shared[key] = cls(pool)
            return found

    def load(self, index: str) -> dict[str, TopicTypes]:
        """The types an index names (raises ``OSError`` when a file cannot be read)."""
        with self._lock:
            known = self._indexes.get(index)
        if known is not None:
            return dict(known)
        with self._loading:
            with self._lock:
                known = self._indexes.get(index)
            if known is not None:
                return dict(known)
            return self._load(index)

    def _load(self, index: str) -> dict[str, TopicTypes]:
        data = json.loads(self._read(f"{index}.json"))
        if data.get("format") != INDEX_FORMAT:
            raise ValueError(f"type index {index} has format {data.get('format')!r}")
        refs = data["topics"]
        wanted = {r for t in refs.values() for r in (t.get("key"), t.get("value")) if r}
        self._fetch(wanted)
        with self._lock:
            types = {
                topic: TopicTypes(
                    key=self._texts[t["key"]] if t.get("key") else None,
                    value=self._texts[t["value"]] if t.get("value") else None,
                )
                for topic, t in refs.items()
            }
            self._indexes[index] = types
        return dict(types)

    def save(self, types: Mapping[str, TopicTypes]) -> str:
        """Write the files ``types`` needs that are not there yet; returns the index's
        name (for :data:`TYPES_PROPERTY`)."""
        refs: dict[str, dict[str, str | None]] = {}
        new: dict[str, str] = {}
        for topic, t in sorted(types.items()):
            refs[topic] = {}
            for part, text in (("key", t.key), ("value", t.value)):
                ref = _digest(text) if text else None
                refs[topic][part] = ref
                if ref and text:
                    new[ref] = text
        body = json.dumps({"format": INDEX_FORMAT, "topics": refs}, sort_keys=True)
        index = "index-" + _digest(body)
        with self._lock:
            if index in self._indexes:
                return index
            missing = {ref: text for ref, text in new.items() if ref not in self._texts}
        self._write({**{f"{ref}.json": text for ref, text in missing.items()}, f"{index}.json": body})
        with self._lock:
            self._texts.update(missing)
            self._indexes[index] = dict(types)
        return index

    # -- files ----------------------------------------------------------------------------

    def _fetch(self, refs: set[str]) -> None:
        with self._lock:
            todo = sorted(refs - self._texts.keys())
        if not todo:
            return
        if len(todo) == 1 or self.where.is_local:
            texts = [self._read(f"{ref}.json") for ref in todo]
        else:
            with ThreadPoolExecutor(min(_FILES_AT_ONCE, len(todo))) as pool:
                texts = list(pool.map(lambda ref: self._read(f"{ref}.json"), todo))
        with self._lock:
            self._texts.update(zip(todo, texts, strict=True))

    def _read(self, name: str) -> str:
        fs, base = self.where.filesystem()
        with fs.open_input_stream(f"{base}/{name}") as stream:
            return bytes(stream.read()).decode()

    def _write(self, files: Mapping[str, str]) -> None:
        """Write each file whole: locally into a temporary name then renamed, so a
        reader (or a writer that died half-way) never leaves a partial file; an S3 PUT
        is whole by itself. Rewriting a file that exists writes the same bytes. Several
        at once: a pool's first commit over hundreds of topics writes hundreds of files
        (one S3 PUT after the other took seconds)."""
        fs, base = self.where.filesystem()
        if self.where.is_local:
            self.where.make_dirs()

        def write(name: str, text: str) -> None:
            path = f"{base}/{name}"
            if self.where.is_local:
                temporary = f"{base}/.{name}.{os.getpid()}-{threading.get_ident()}.tmp"
                with fs.open_output_stream(temporary) as stream:
                    stream.write(text.encode())
                fs.move(temporary, path)
            else:
                with fs.open_output_stream(path) as stream:
                    stream.write(text.encode())

        if len(files) < 4:
            for name, text in files.items():
                write(name, text)
            return
        with ThreadPoolExecutor(min(_FILES_AT_ONCE, len(files))) as pool:
            for future in [pool.submit(write, name, text) for name, text in files.items()]:
                future.result()  # the first failure, raised here


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
