"""One module per group of `zync` commands."""
