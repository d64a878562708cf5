"""Compiled per-pixel loops for the noise samplers (one pass instead of several array ops)."""

from __future__ import annotations

import numba
import numpy as np

from ...rng.simd import wide_vectors

# Fused CPU versions of the noise functionals. x: B x 3 x H x W float32 values or uint8
# levels in 0..255, out: float32 values or uint8 levels (the float32 result truncated);
# draws: B x H x W x 3. Each performs the float32 operations of the tensor path in
# noise.py in the same order (the tests check equality). The loops run over one image
# row at a time, channel by channel, so the image and output rows are read and written
# contiguously and the row of draws (3 x W values) stays in L1.


@numba.njit(cache=True, nogil=True)
def gaussian_kernel(x: np.ndarray, z: np.ndarray, c: np.float32, multiplicative: bool, out: np.ndarray) -> None:
    wide_vectors()
    nb, nc, nh, nw = x.shape
    k255 = np.float32(255.0)
    zero = np.float32(0.0)
    one = np.float32(1.0)
    for n in range(nb):
        for i in range(nh):
            zi = z[n, i]
            for ch in range(nc):
                xr = x[n, ch, i]
                o = out[n, ch, i]
                for j in range(nw):
                    v = np.float32(xr[j]) / k255
                    t = c * zi[j, ch]
                    if multiplicative:
                        t = v * t
                    v = v + t
                    o[j] = min(max(v, zero), one) * k255


@numba.njit(cache=True, nogil=True)
def impulse_kernel(x: np.ndarray, flipped: np.ndarray, salted: np.ndarray, out: np.ndarray) -> None:
    wide_vectors()
    # the three channels in one loop: each mask row is read once, as bytes (a select per value
    # vectorises; a branch on random masks would not)
    nb, _, nh, nw = x.shape
    k255 = np.float32(255.0)
    one = np.float32(1.0)
    for n in range(nb):
        for i in range(nh):
            fi = flipped[n, i].view(np.uint8)
            si = salted[n, i].view(np.uint8)
            x0, x1, x2 = x[n, 0, i], x[n, 1, i], x[n, 2, i]
            o0, o1, o2 = out[n, 0, i], out[n, 1, i], out[n, 2, i]
            for j in range(nw):
                o0[j] = (k255 * si[j, 0]) if fi[j, 0] else min(np.float32(x0[j]) / k255, one) * k255
                o1[j] = (k255 * si[j, 1]) if fi[j, 1] else min(np.float32(x1[j]) / k255, one) * k255
                o2[j] = (k255 * si[j, 2]) if fi[j, 2] else min(np.float32(x2[j]) / k255, one) * k255


_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53: a PCG64 double is (word >> 11) * 2**-53


@numba.njit(cache=True, nogil=True)
def shot_kernel(raw: np.ndarray, levels: np.ndarray, prob: np.ndarray, alias: np.ndarray, k: int, c: np.float32, out: np.ndarray) -> None:
    """Shot noise of one image drawn and applied in one pass: the counts of
    :meth:`~shiftbench.rng.seeding.FastDraws.poisson_levels` (Walker alias sampling, one raw word per
    value in H x W x 3 order, as :func:`shiftbench.rng.discrete.alias_lookup`), then the tensor
    path's ``clip(count / c, 0, 1) * 255`` in float32. levels: 3 x H x W uint8; out: 3 x H x W
    float32 values or uint8 levels (truncated)."""
    nc, nh, nw = levels.shape
    k255 = np.float32(255.0)
    zero = np.float32(0.0)
    one = np.float32(1.0)
    for i in range(nh):
        for j in range(nw):
            base = (i * nw + j) * nc
            for ch in range(nc):
                v = float(raw[base + ch] >> np.uint64(11)) * _TO_UNIT * k
                col = int(v)
                idx = int(levels[ch, i, j]) * k + col
                if v - col < prob[idx]:
                    cnt = np.float32(col)
                else:
                    cnt = np.float32(alias[idx])
                out[ch, i, j] = min(max(cnt / c, zero), one) * k255


@numba.njit(cache=True, nogil=True)
def shot_counts_kernel(counts: np.ndarray, c: np.float32, out: np.ndarray) -> None:
    """The tensor path of shot noise on drawn counts (B x H x W x 3 float32) into out (B x 3 x H x W)."""
    nb, nh, nw, nc = counts.shape
    k255 = np.float32(255.0)
    zero = np.float32(0.0)
    one = np.float32(1.0)
    for n in range(nb):
        for i in range(nh):
            for j in range(nw):
                for ch in range(nc):
                    out[n, ch, i, j] = min(max(counts[n, i, j, ch] / c, zero), one) * k255
