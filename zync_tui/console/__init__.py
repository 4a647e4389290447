"""The Textual operations console."""
