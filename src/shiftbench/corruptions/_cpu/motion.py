"""ImageMagick's motion blur as a compiled CPU kernel (the arithmetic of :func:`..._geometry.motion_blur`).

:func:`motion_blur_planes` blurs B x C x H x W float64 levels with the taps and per-image offsets of
:func:`..._geometry.motion_blur_taps` (Q16 samples, edge replication, the 8-bit result the
reference's ImageMagick build writes); snow's kernel (:mod:`.snow`) blurs its layer with it.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["motion_blur_planes"]


@numba.njit(cache=True, nogil=True, inline="always")
def _axpy(dst, src, a):
    # dst += src * a on 1-D views (plain range indices vectorise)
    for j in range(dst.shape[0]):
        dst[j] += src[j] * a


@numba.njit(cache=True, nogil=True, inline="always")
def _add_const(dst, v):
    for j in range(dst.shape[0]):
        dst[j] += v


@numba.njit(cache=True, nogil=True)
def motion_blur_planes(x, k, dx, dy, start, end, out):
    # x, out: B x C x H x W float64; k: taps; dx, dy: B x taps. Images start..end-1.
    nc, h, w = x.shape[1], x.shape[2], x.shape[3]
    taps = k.shape[0]
    q = np.empty((h, w))
    acc = np.empty(w)
    for b in range(start, end):
        for c in range(nc):
            for y in range(h):
                for i in range(w):
                    q[y, i] = min(max(np.round(x[b, c, y, i]), 0.0), 255.0) * 257.0
            for y in range(h):
                acc[:] = 0.0
                for t in range(taps):
                    sy = min(max(y + dy[b, t], 0), h - 1)
                    row = q[sy]
                    kt = k[t]
                    ox = dx[b, t]
                    lo = min(max(-ox, 0), w)  # columns reading the left edge
                    hi = max(min(w - ox, w), lo)  # first column reading the right edge
                    if lo > 0:
                        _add_const(acc[:lo], row[0] * kt)
                    if hi > lo:
                        _axpy(acc[lo:hi], row[lo + ox : hi + ox], kt)
                    if hi < w:
                        _add_const(acc[hi:], row[w - 1] * kt)
                orow = out[b, c, y]
                for i in range(w):
                    v = np.floor(acc[i] + 0.5)
                    if v < 0.0:
                        v = 0.0
                    elif v > 65535.0:
                        v = 65535.0
                    orow[i] = np.floor(v / 257.0)
