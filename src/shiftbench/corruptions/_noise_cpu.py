"""Compiled per-pixel loops for the noise samplers (one pass instead of several array ops)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def alias_lookup(u: np.ndarray, levels: np.ndarray, prob: np.ndarray, alias: np.ndarray, k: int) -> np.ndarray:  # pragma: no cover - compiled
    """Walker alias sampling: one uniform in [0, 1) per value picks column j = floor(u k) of
    its level's row and keeps j when the fraction u k - j is below prob, else takes the alias."""
    flat_u = u.ravel()
    flat_l = levels.ravel()
    out = np.empty(flat_u.size, dtype=np.float32)
    for i in range(flat_u.size):
        v = flat_u[i] * k
        j = int(v)
        idx = int(flat_l[i]) * k + j
        if v - j < prob[idx]:
            out[i] = j
        else:
            out[i] = alias[idx]
    return out.reshape(u.shape)
