"""Turnkey's backend: the process that owns sessions and runs every turn."""

__version__ = "0.1.0"
