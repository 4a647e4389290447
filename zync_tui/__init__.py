"""Every user-facing surface of zync: the typer CLI and the Textual console."""
