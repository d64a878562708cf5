"""Fused CPU kernel for elastic_transform's two resamplings.

One pass per pixel for each of: OpenCV's fixed-point ``warpAffine`` (1/32-pixel
coordinates, float32 weight products summed left to right, BORDER_REFLECT_101)
and SciPy's ``map_coordinates(order=1, mode='reflect')`` (half-sample folding,
float64 interpolation, float32 result), then ``clip(0, 1) * 255``. It performs
the operations of the tensor path in :mod:`.elastic` (:func:`~.elastic.warp_affine`
in "fixed" mode and :func:`~.elastic.map_coordinates_linear`) in the same
precision; the tests check that both paths agree.
"""

from __future__ import annotations

import math

import numba
import numpy as np

_INTER_BITS = 5
_INTER_TAB = 1 << _INTER_BITS
_SHIFT = 10 - _INTER_BITS  # AB_BITS - INTER_BITS


@numba.njit(cache=True, nogil=True, inline="always")
def _reflect101(i: int, n: int) -> int:  # pragma: no cover - compiled
    if n == 1:
        return 0
    if i < 0 or i >= n:
        p = 2 * n - 2
        i = i % p  # Python semantics: non-negative
        if i >= n:
            i = p - i
    return i


@numba.njit(cache=True, nogil=True, inline="always")
def _fold(c: float, n: int) -> float:  # pragma: no cover - compiled
    # SciPy's map_coordinates 'reflect' folding of an out-of-range coordinate
    if n <= 1:
        return 0.0
    if c >= 0.0 and c <= n - 1:
        return c
    sz2 = 2.0 * n
    if c < 0.0:
        if c < -sz2:
            c = sz2 * math.trunc(-c / sz2) + c
        if c < -n:
            return c + sz2
        return -c - 1.0
    c = c - sz2 * math.trunc(c / sz2)
    if c >= n:
        c = sz2 - c - 1.0
    return c


@numba.njit(cache=True, nogil=True)
def elastic_kernel(
    x: np.ndarray,
    adelta: np.ndarray,
    bdelta: np.ndarray,
    x0: np.ndarray,
    y0: np.ndarray,
    dx: np.ndarray,
    dy: np.ndarray,
    out: np.ndarray,
    start: int,
    end: int,
) -> None:  # pragma: no cover - compiled
    """Images start..end-1. x, out: B x C x H x W float32 (x in 0..1, out in 0..255);
    adelta, bdelta: B x W and x0, y0: B x H int64 fixed-point warp terms; dx, dy: B x H x W float32."""
    _, nc, nh, nw = x.shape
    warped = np.empty((nc, nh, nw), dtype=np.float32)
    inv_tab = np.float32(1.0 / _INTER_TAB)
    one = np.float32(1.0)
    for n in range(start, end):
        for i in range(nh):
            for j in range(nw):
                sx = (x0[n, i] + adelta[n, j]) >> _SHIFT
                sy = (y0[n, i] + bdelta[n, j]) >> _SHIFT
                ix = sx >> _INTER_BITS
                iy = sy >> _INTER_BITS
                tx = np.float32(sx & (_INTER_TAB - 1)) * inv_tab
                ty = np.float32(sy & (_INTER_TAB - 1)) * inv_tab
                ux = one - tx
                uy = one - ty
                w0 = uy * ux
                w1 = uy * tx
                w2 = ty * ux
                w3 = ty * tx
                r0 = _reflect101(iy, nh)
                r1 = _reflect101(iy + 1, nh)
                c0 = _reflect101(ix, nw)
                c1 = _reflect101(ix + 1, nw)
                for ch in range(nc):
                    v = x[n, ch, r0, c0] * w0
                    v += x[n, ch, r0, c1] * w1
                    v += x[n, ch, r1, c0] * w2
                    v += x[n, ch, r1, c1] * w3
                    warped[ch, i, j] = v
        for i in range(nh):
            for j in range(nw):
                r = _fold(i + np.float64(dy[n, i, j]), nh)
                c = _fold(j + np.float64(dx[n, i, j]), nw)
                fr = math.floor(r)
                fc = math.floor(c)
                ty64 = r - fr
                tx64 = c - fc
                i0 = min(max(int(fr), 0), nh - 1)
                i1 = min(max(int(fr) + 1, 0), nh - 1)
                j0 = min(max(int(fc), 0), nw - 1)
                j1 = min(max(int(fc) + 1, 0), nw - 1)
                a00 = (1.0 - ty64) * (1.0 - tx64)
                a01 = (1.0 - ty64) * tx64
                a10 = ty64 * (1.0 - tx64)
                a11 = ty64 * tx64
                for ch in range(nc):
                    v64 = (
                        a00 * np.float64(warped[ch, i0, j0])
                        + a01 * np.float64(warped[ch, i0, j1])
                        + a10 * np.float64(warped[ch, i1, j0])
                        + a11 * np.float64(warped[ch, i1, j1])
                    )
                    v = np.float32(v64)
                    if v < 0:
                        v = np.float32(0.0)
                    elif v > 1:
                        v = np.float32(1.0)
                    out[n, ch, i, j] = v * np.float32(255.0)
