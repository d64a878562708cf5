"""CLI commands of the corruption engine: ``list``, ``corrupt``, ``generate``."""

from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    """Attach the engine's commands to the root group."""
