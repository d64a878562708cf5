"""Random numbers of the corruption engine: per-image streams and the compiled generators behind them.

* :mod:`.seeding`: every draw derives from ``(seed, image key, corruption, severity)``
  (:func:`derive_generator`, :func:`image_key`), read through a :class:`Draws` source:
  :class:`FastDraws` (compiled) or :class:`LegacyDraws` (the reference implementation's order).
* :mod:`.pcg64`, :mod:`.ziggurat`: NumPy's PCG64 words and ziggurat normals, compiled.
* :mod:`.xxh64`: XXH64, the image key's hash.
* :mod:`.simd`: LLVM intrinsics the compiled kernels share (wide vectors, high multiplies).

This package is the lowest layer of the engine: it imports nothing from the rest of shiftbench
except :mod:`shiftbench.errors`.
"""

from __future__ import annotations

from . import seeding
from .seeding import Draws, FastDraws, LegacyDraws, derive_generator, image_key, key_to_int, name_key

__all__ = ["seeding", "Draws", "FastDraws", "LegacyDraws", "derive_generator", "image_key", "key_to_int", "name_key"]
