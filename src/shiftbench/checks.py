"""Small validation helpers shared by the public entry points."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InvalidArgumentError, InvalidSeverityError
from .registry import close_matches

suggest = close_matches
"""Close matches for a mistyped name (:func:`shiftbench.registry.close_matches`: substring matches first, then fuzzy
ones)."""


def check_severity(severity: Any, argument: str = "severity", low: int = 1, high: int = 5) -> int:
    """Return severity as int after checking it is an integer in [low, high]."""
    if isinstance(severity, bool) or not isinstance(severity, (int,)) and not (
        hasattr(severity, "__index__") and not isinstance(severity, float)
    ):
        raise InvalidSeverityError(argument, severity, f"an integer in {low}..{high}")
    try:
        s = int(severity.__index__())  # an array of one element has __index__ only when it is 0-dimensional
    except (TypeError, ValueError, RuntimeError):
        raise InvalidSeverityError(argument, severity, f"an integer in {low}..{high}") from None
    if not low <= s <= high:
        raise InvalidSeverityError(argument, severity, f"an integer in {low}..{high}")
    return s


def check_seed(seed: Any, argument: str = "seed") -> int:
    """Return seed as int after checking it is an integer in 0..2**64-1.

    The generators take 64 bits of the seed: larger seeds would alias smaller ones.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**64:
        raise InvalidArgumentError(argument, seed, "an integer in 0..2**64-1")
    return int(seed)
