"""The registry's compatibility levels: the global level and each subject's own.

:class:`CompatibilityLevels` reads, sets and removes the levels stored in the ``config``
table; a subject without a level of its own follows the global one (``BACKWARD`` until set).
"""

from __future__ import annotations

from engine.registry import queries
from engine.registry.compat import normalize_level
from engine.registry.database import Database
from engine.registry.errors import invalid_compatibility, subject_config_not_found
from engine.registry.queries import DEFAULT_COMPATIBILITY, GLOBAL


class CompatibilityLevels:
    """The compatibility levels over one registry database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def compatibility(self, subject: str | None = None) -> str | None:
        """The level set for a subject (None when it has none), or the global level."""
        with self.db.read() as conn:
            if subject is None:
                return queries.level(conn, GLOBAL) or DEFAULT_COMPATIBILITY
            return queries.level(conn, subject)

    def effective_compatibility(self, subject: str) -> str:
        """The subject's level, else the global one."""
        with self.db.read() as conn:
            return queries.effective_level(conn, subject)

    def set_compatibility(self, level: object, subject: str | None = None) -> str:
        """Set the global (or a subject's) level; 42203 when it is not a level."""
        try:
            normalized = normalize_level(level)
        except ValueError:
            raise invalid_compatibility(level) from None
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO config (scope, compatibility) VALUES (?, ?) "
                "ON CONFLICT (scope) DO UPDATE SET compatibility = excluded.compatibility",
                (GLOBAL if subject is None else subject, normalized),
            )
        return normalized

    def delete_compatibility(self, subject: str | None = None) -> str:
        """Remove a subject's level (or reset the global one); returns the removed level."""
        with self.db.write() as conn:
            scope = GLOBAL if subject is None else subject
            previous = queries.level(conn, scope)
            if previous is None:
                if subject is not None:
                    raise subject_config_not_found(subject)
                previous = DEFAULT_COMPATIBILITY
            conn.execute("DELETE FROM config WHERE scope = ?", (scope,))
            return previous
