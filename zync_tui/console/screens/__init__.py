"""Modal screens: help, a full record, dead letters."""
