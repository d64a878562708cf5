"""Compiled conversion of float results (0..255) to 8-bit levels on the CPU."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def truncate_to_uint8(y: np.ndarray, out: np.ndarray) -> None:
    """``out = uint8(clip(y, 0, 255))`` with truncation (the reference's ``np.uint8`` of a clipped
    float image), in one pass; ``y`` and ``out`` are C-contiguous arrays of one shape."""
    a = y.reshape(-1)
    o = out.reshape(-1)
    lo = a.dtype.type(0.0)
    hi = a.dtype.type(255.0)
    for i in range(a.shape[0]):
        v = a[i]
        if not v > lo:  # also NaN
            v = lo
        elif v > hi:
            v = hi
        o[i] = np.uint8(v)
