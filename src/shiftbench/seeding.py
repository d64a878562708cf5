"""Deprecated: the per-image random streams live in :mod:`shiftbench.rng.seeding`.

``shiftbench.seeding`` was their home before the random-number code became the package
:mod:`shiftbench.rng`. This module forwards every name to :mod:`shiftbench.rng.seeding` (the same
objects) and warns once, on import, with a :class:`DeprecationWarning`; it will be removed in a
later release. Import ``shiftbench.rng.seeding`` instead.
"""

from __future__ import annotations

import warnings

from .rng import seeding as current

warnings.warn(
    "shiftbench.seeding is deprecated and will be removed: import shiftbench.rng.seeding instead",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = list(getattr(current, "__all__", ()))


def __getattr__(name: str) -> object:
    return getattr(current, name)


def __dir__() -> list[str]:
    return sorted(set(dir(current)))
