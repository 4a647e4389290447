"""Images: the latest value staged for each key, which the envelopes that describe
changes (``differential``, ``materialize``, ``debezium``) compare each record with.

A key's image is the JSON text of its latest non-null value; a tombstone (a null value)
removes it. When delivery starts, the images of the keys staged before the first record
to deliver are read from the staging snapshot; then each batch's records move them on.
A batch works through :class:`ImageMoves`, applied to the images only once its messages
are built, so that building a batch again (its types widened) sees the same images.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.deliver.staging_reader import latest_images

if TYPE_CHECKING:
    from engine.deliver.envelopes.base import Parts


class Images:
    """The latest image of every key staged so far."""

    def __init__(self) -> None:
        self.latest: dict[str, str] = {}

    def load(self, parts: Parts, before: int) -> None:
        """The images of the keys staged below pool offset ``before`` (shaped as they are
        delivered)."""
        if before <= 0:
            self.latest = {}
            return
        staged = parts.reader.snapshot(below=before)
        self.latest = latest_images(parts.shaper.shape(staged))

    def values(self) -> Iterable[str]:
        return self.latest.values()

    def moves(self) -> ImageMoves:
        return ImageMoves(self)


class ImageMoves:
    """One batch's view of the images: reads through to them, keeps its own moves until
    :meth:`apply`."""

    def __init__(self, images: Images) -> None:
        self.images = images
        self.moved: dict[str, str | None] = {}

    def move(self, key: str | None, value: str | None) -> str | None:
        """The image of ``key`` before this record, which becomes ``value`` (None: the
        key has no image any more). A record without a key has no image."""
        if key is None:
            return None
        previous = self.moved[key] if key in self.moved else self.images.latest.get(key)
        self.moved[key] = value
        return previous

    def apply(self) -> None:
        latest = self.images.latest
        for key, value in self.moved.items():
            if value is None:
                latest.pop(key, None)
            else:
                latest[key] = value
        self.moved = {}
