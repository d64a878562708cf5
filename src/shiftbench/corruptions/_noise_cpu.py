"""Compiled per-pixel loops for the noise samplers (one pass instead of several array ops)."""

from __future__ import annotations

import numba
import numpy as np


_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53: a PCG64 double is (word >> 11) * 2**-53


@numba.njit(cache=True, nogil=True)
def alias_lookup(raw: np.ndarray, levels: np.ndarray, prob: np.ndarray, alias: np.ndarray, k: int) -> np.ndarray:  # pragma: no cover - compiled
    """Walker alias sampling: one uniform u in [0, 1) per value (from a raw 64-bit word, as
    ``Generator.random`` makes it) picks column j = floor(u k) of its level's row and keeps j
    when the fraction u k - j is below prob, else takes the alias. Returns a flat float32 array."""
    flat_l = levels.ravel()
    out = np.empty(raw.size, dtype=np.float32)
    for i in range(raw.size):
        v = float(raw[i] >> np.uint64(11)) * _TO_UNIT * k
        j = int(v)
        idx = int(flat_l[i]) * k + j
        if v - j < prob[idx]:
            out[i] = j
        else:
            out[i] = alias[idx]
    return out


@numba.njit(cache=True, nogil=True)
def unit_at_most(raw: np.ndarray, p: float) -> np.ndarray:  # pragma: no cover - compiled
    """Boolean mask u <= p for the uniforms u = (word >> 11) * 2**-53 of raw 64-bit words."""
    out = np.empty(raw.size, dtype=np.bool_)
    for i in range(raw.size):
        out[i] = float(raw[i] >> np.uint64(11)) * _TO_UNIT <= p
    return out


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
