"""Modal screens: help, a record's envelope, dead letters."""
