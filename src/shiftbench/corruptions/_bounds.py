"""Bounds checks at the boundary of the compiled kernels that index by draws.

:func:`shiftbench.corrupt` validates replayed draws in full before any kernel runs; these checks
guard the registered ``apply`` functions themselves (callable directly through the registry), so
that no draw can make a compiled kernel read or write outside its arrays.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError


def require_shape(key: str, got: Any, want: tuple[int, ...]) -> None:
    """Raise unless the draw ``key`` has exactly the shape ``want``."""
    shape = tuple(int(s) for s in got)
    if shape != tuple(want):
        raise InvalidArgumentError(f"draws[{key!r}]", f"shape {shape}", f"shape {tuple(want)} (the images' size)")


def require_within(key: str, value: int, low: int, high: int) -> None:
    """Raise unless ``low <= value <= high`` (an index or offset a kernel reads at)."""
    if not low <= int(value) <= high:
        raise InvalidArgumentError(f"draws[{key!r}]", int(value), f"an integer in {low}..{high}")
