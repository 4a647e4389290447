"""The Delta ``txn`` versions of a pool's snapshots (positions, seqnos, cursors), read
from the log once per snapshot.

delta-rs' ``DeltaTable.transaction_version`` reads every commit file since the last
checkpoint each time it is asked: up to ``CHECKPOINT_EVERY`` objects on S3, for every
position a loop looks up and twice for the seqno of each commit. A snapshot's txns
never change (one version of one table is one snapshot), so each is asked once; and
after a pool's own commit, the next snapshot's are the ones before it plus those the
commit wrote, without reading the log again.
"""

from __future__ import annotations

from collections.abc import Mapping

from deltalake import DeltaTable


class TxnVersions:
    """What is known of one table's snapshot: the txn versions asked of it so far."""

    def __init__(self) -> None:
        self._known: dict[str, int | None] = {}
        self._version = -1

    def get(self, table: DeltaTable, app_id: str) -> int | None:
        """The version stored for ``app_id`` in ``table``'s loaded snapshot."""
        version = table.version()
        if version != self._version:
            self._known, self._version = {}, version
        if app_id not in self._known:
            self._known[app_id] = table.transaction_version(app_id)
        return self._known[app_id]

    def committed(self, planned_on: int, now: int, txns: Mapping[str, int]) -> None:
        """A commit made on snapshot ``planned_on`` wrote ``txns``, and the table is now
        loaded at ``now``: when that is the commit alone, what was known carries over."""
        if self._version == planned_on and now == planned_on + 1:
            self._known, self._version = {**self._known, **txns}, now
