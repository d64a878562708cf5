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


# Fused CPU versions of the noise functionals. x, out: B x 3 x H x W float32 in
# 0..255; draws: B x H x W x 3. Each performs the float32 operations of the tensor
# path in noise.py in the same order (the tests check equality).


@numba.njit(cache=True, nogil=True)
def gaussian_kernel(x: np.ndarray, z: np.ndarray, c: np.float32, multiplicative: bool, out: np.ndarray) -> None:  # pragma: no cover - compiled
    nb, nc, nh, nw = x.shape
    k255 = np.float32(255.0)
    for n in range(nb):
        for ch in range(nc):
            for i in range(nh):
                for j in range(nw):
                    v = x[n, ch, i, j] / k255
                    t = c * z[n, i, j, ch]
                    if multiplicative:
                        t = v * t
                    v = v + t
                    if v < 0:
                        v = np.float32(0.0)
                    elif v > 1:
                        v = np.float32(1.0)
                    out[n, ch, i, j] = v * k255


@numba.njit(cache=True, nogil=True)
def impulse_kernel(x: np.ndarray, flipped: np.ndarray, salted: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    nb, nc, nh, nw = x.shape
    k255 = np.float32(255.0)
    for n in range(nb):
        for ch in range(nc):
            for i in range(nh):
                for j in range(nw):
                    if flipped[n, i, j, ch]:
                        out[n, ch, i, j] = k255 if salted[n, i, j, ch] else np.float32(0.0)
                    else:
                        v = x[n, ch, i, j] / k255
                        if v > 1:
                            v = np.float32(1.0)
                        out[n, ch, i, j] = v * k255
