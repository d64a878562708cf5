"""Progress reporting for long commands (a rich bar on a terminal, plain lines in logs): :func:`progress_for`."""

from __future__ import annotations

from ._progress import LineProgress, RichProgress, progress_for

__all__ = ["progress_for", "RichProgress", "LineProgress"]
