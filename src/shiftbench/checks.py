"""Argument checks shared by every package: did-you-mean suggestions, severity and seed validation.

The public home of the corruption engine's validation helpers, for the packages built on it.
"""

from __future__ import annotations

from ._validate import check_seed, check_severity, suggest

__all__ = ["suggest", "check_severity", "check_seed"]
