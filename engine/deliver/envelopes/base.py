"""The envelope interface: how the staged rows of a topic become Kafka messages.

An envelope (one module in this package) decides where reading starts again after a
restart, which schemas it registers, how a pass reads the staged rows and cuts them in
transactions, how the messages of a transaction are built and how they are produced with
their position headers. What every envelope shares (the codecs and their types, the
transactions of a pass, contiguity) is here; the loop (:mod:`engine.deliver.loop`)
composes an envelope with the rest.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from engine.deliver.encode import PartCodec
from engine.deliver.errors import DeliveryError, TypeMismatch
from engine.deliver.rows import Batch, Rows
from engine.kafka.typemap.from_spark import avro_name

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType

    from engine.deliver.ledger import Ledger
    from engine.deliver.output_shaper import Shaper
    from engine.deliver.positions import Headers, PoolIdentity, Position
    from engine.deliver.record_types import RecordTypes
    from engine.deliver.staging_reader import StagingReader
    from engine.deliver.status_board import StatusBoard
    from engine.deliver.transactions import Transactions
    from engine.kafka.codecs.formats import Format
    from engine.kafka.registry_client import RegistrySchemas
    from engine.settings.registry import RegistryProfile

#: Produces the messages of some rows in one transaction and reports it:
#: ``send(rows, batch, started)`` (``started``: ``time.monotonic()`` when building began).
Send = Callable[[Rows, Batch, float], None]


@dataclass
class Parts:
    """What an envelope works with during one run of a delivery."""

    topic: str
    identity: PoolIdentity
    format: Format
    batch_records: int
    registry: RegistryProfile | None
    ledger: Ledger
    reader: StagingReader
    shaper: Shaper
    types: RecordTypes
    board: StatusBoard


class Envelope(ABC):
    """One way of delivering a topic's records; subclasses name themselves (``name``, the
    ``--envelope`` value) and are found by :func:`engine.deliver.envelopes.envelope_named`
    through their module's ``ENVELOPE``."""

    name: ClassVar[str]
    #: The formats this envelope writes (None: every format).
    formats: ClassVar[tuple[Format, ...] | None] = None
    #: Records read back after a partition's last position header are ours, counted
    #: one by one (jdbc anchors); see :class:`~engine.deliver.ledger.Ledger`.
    counts_after: ClassVar[bool] = False

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.next_offset = 0  # first pool offset not read yet
        self.key_codec: PartCodec | None = None
        self.value_codec: PartCodec | None = None
        self._schemas: RegistrySchemas | None = None
        #: the pool's identity headers, carried by every positioned message
        self.identity: Headers = parts.identity.headers()

    @classmethod
    def check_format(cls, fmt: Format) -> None:
        """ValueError when this envelope cannot be written in ``fmt``."""
        if cls.formats is not None and fmt not in cls.formats:
            names = " or ".join(f.value for f in cls.formats)
            raise ValueError(f"the {cls.name} envelope is written in {names} only, not {fmt.value}")

    # -- what each envelope decides -----------------------------------------------------

    @abstractmethod
    def resume(self, found: Mapping[int, Position | None]) -> None:
        """Where reading starts again, from the positions read back from the topic (the
        ledger has taken them already)."""

    @abstractmethod
    def register(self, key_type: DataType | None, value_type: DataType | None) -> None:
        """Register what the format needs once :attr:`key_codec` and :attr:`value_codec`
        are built for these types (schemas, message prefixes)."""

    @abstractmethod
    def deliver(self, since: int, version: int, stop: threading.Event, send: Send) -> bool:
        """Deliver the records committed after version ``since`` (-1: read the snapshot)
        up to ``version``, one transaction at a time through ``send``; False when
        ``stop`` cut the pass short."""

    @abstractmethod
    def build(self, rows: Rows) -> Batch:
        """The messages of ``rows`` not delivered yet."""

    @abstractmethod
    def write(self, batch: Batch, out: Transactions) -> None:
        """Produce the messages of ``batch`` (in the open transaction) with their
        position headers."""

    def images(self) -> Iterable[str]:
        """Values staged before the rows being built that the types must cover too."""
        return ()

    def stamp(self, rows: Rows) -> tuple[int | None, int | None]:
        """The staging time (and its lower bound) that delivering ``rows`` closes, which
        the committed position keeps (time-based envelopes; others: None)."""
        return None, None

    # -- shared -------------------------------------------------------------------------

    def codecs(self) -> tuple[PartCodec, PartCodec]:
        assert self.key_codec is not None
        assert self.value_codec is not None
        return self.key_codec, self.value_codec

    def check_types(self) -> None:
        """(Re)build the codecs when the types of the topic's records changed."""
        types = self.parts.types.changed()
        if types is not None:
            self.build_codecs(*types)

    def build_codecs(self, key_type: DataType | None, value_type: DataType | None) -> None:
        base = avro_name(self.parts.topic)
        self.key_codec = PartCodec(self.parts.format, key_type, f"{base}_key")
        self.value_codec = PartCodec(self.parts.format, value_type, f"{base}_value")
        self.register(key_type, value_type)

    def schemas(self) -> RegistrySchemas:
        if self._schemas is None:
            from engine.kafka.registry_client import RegistrySchemas  # deferred: confluent_kafka

            assert self.parts.registry is not None
            self._schemas = RegistrySchemas(self.parts.registry)
        return self._schemas

    def make_batch(self, rows: Rows) -> Batch:
        """The messages of ``rows``; fields the recorded type lacks are typed from the
        staged JSON (once) instead of being lost."""
        try:
            return self.build(rows)
        except TypeMismatch:
            if self.parts.shaper.sql is not None or not self._widen(rows):
                raise
            return self.build(rows)

    def _widen(self, rows: Rows) -> bool:
        added = self.parts.types.widen(rows, self.images())
        if added is None:
            return False
        self.parts.board.emit(
            "types",
            f"{self.parts.topic}: staged records hold field(s) the pool's recorded type lacks "
            f"({', '.join(added) or 'nested'}); typed from the staged JSON",
        )
        self.check_types()
        return True

    def take_rows(self, table: pa.Table, *, with_times: bool = False) -> Rows:
        """Rows of ``table`` (shaped, in offset order), checked contiguous with what was
        read before; :attr:`next_offset` moves past them."""
        rows = Rows.from_arrow(self.parts.shaper.shape(table), with_times=with_times)
        self._check_contiguous(rows)
        if len(rows):
            self.next_offset = rows.offsets[-1] + 1
        return rows

    def _check_contiguous(self, rows: Rows) -> None:
        if not len(rows) or self.parts.shaper.sql is not None:
            return
        first, last = rows.offsets[0], rows.offsets[-1]
        if first != self.next_offset or last - first + 1 != len(rows):
            raise DeliveryError(
                f"pool {self.parts.reader.pool.name!r}, topic {self.parts.topic!r}: pool "
                f"offsets are not contiguous (expected {self.next_offset}, found {len(rows)} "
                f"records {first}..{last}); was the staging pool changed by something other "
                "than the ETL?"
            )

    def slices(self, rows: Rows, sizes: Iterator[int] | None = None) -> Iterator[Rows]:
        """``rows`` in transactions of at most ``batch_records`` (staged offset noted),
        or of the ``sizes`` given."""
        if not len(rows):
            return
        batch_records = self.parts.batch_records
        staged = rows.offsets[-1]
        board = self.parts.board
        current = board.get().staged_offset
        board.set(
            staged_offset=staged if current is None else max(current, staged),
            state="catching-up" if len(rows) > batch_records else "delivering",
        )
        start = 0
        while start < len(rows):
            size = batch_records if sizes is None else next(sizes)
            yield rows.slice(start, start + size)
            start += size
