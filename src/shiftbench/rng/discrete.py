"""Compiled discrete draws from raw generator words: salt-and-pepper masks and Walker alias sampling."""

from __future__ import annotations

import numba
import numpy as np

from .simd import wide_vectors

__all__ = ["alias_lookup", "salt_pepper_masks"]

_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53: a PCG64 double is (word >> 11) * 2**-53


@numba.njit(cache=True, nogil=True)
def alias_lookup(raw: np.ndarray, levels: np.ndarray, prob: np.ndarray, alias: np.ndarray, k: int) -> np.ndarray:
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
def salt_pepper_masks(words: np.ndarray, n: int, threshold: int) -> tuple[np.ndarray, np.ndarray]:
    """From the first n 32-bit ``words``: flipped = (low 31 bits) < threshold, salted = top bit set."""
    wide_vectors()
    flipped = np.empty(n, dtype=np.bool_)
    salted = np.empty(n, dtype=np.bool_)
    t = np.uint32(threshold) if threshold < 2**31 else np.uint32(2**31)
    for i in range(n):
        wd = words[i]
        flipped[i] = (wd & np.uint32(0x7FFFFFFF)) < t
        salted[i] = (wd >> np.uint32(31)) != 0
    return flipped, salted
