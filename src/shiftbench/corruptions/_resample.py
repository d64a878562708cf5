"""Pillow's BOX resampling coefficients, shared by the tensor path (:func:`.digital.pillow_box_resize`)
and the compiled CPU passes (:mod:`._resample_cpu`)."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

__all__ = ["PRECISION_BITS", "box_coefficients"]

# Pillow (Resample.c) computes, per output position, the input span of a filter of
# support 0.5 * max(scale, 1) around the centre (i + 0.5) * scale, weights
# box((j - centre + 0.5) / max(scale, 1)) normalised to sum 1, then to fixed point
# with 22 fraction bits (rounded half away from zero). A pass adds 2^21 to the
# integer weighted sum and shifts right by 22, clipping to 0..255. The horizontal
# pass runs first, then the vertical pass on its 8-bit result.
PRECISION_BITS = 22


@lru_cache(maxsize=256)
def box_coefficients(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Input indices and fixed-point weights (out_size x taps) of Pillow's BOX filter."""
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = 0.5 * filterscale
    taps = int(math.ceil(support)) * 2 + 1
    idx = np.zeros((out_size, taps), dtype=np.int64)
    wts = np.zeros((out_size, taps), dtype=np.int64)
    for i in range(out_size):
        centre = (i + 0.5) * scale
        lo = max(int(centre - support + 0.5), 0)
        hi = min(int(centre + support + 0.5), in_size)
        # Pillow evaluates the filter at (j - centre + 0.5) * (1 / filterscale): a product with the
        # reciprocal, which rounds differently from a division at the box's edges
        ss = 1.0 / filterscale
        w = np.array([1.0 if -0.5 < (j + 0.5 - centre) * ss <= 0.5 else 0.0 for j in range(lo, hi)])
        if w.sum() != 0.0:
            w = w / w.sum()
        n = hi - lo
        idx[i, :n] = np.arange(lo, hi)
        idx[i, n:] = lo
        wts[i, :n] = np.floor(w * (1 << PRECISION_BITS) + 0.5).astype(np.int64)  # weights are >= 0
    return idx, wts
