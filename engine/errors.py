"""The base of every error zync reports to a user as one line."""


class ZyncError(Exception):
    """An error whose message says, in one line, what went wrong and what to do."""
