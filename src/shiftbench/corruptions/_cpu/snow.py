"""Snow's compiled CPU kernel: the tensor path's steps (:func:`..weather.snow`) in one pass per image.

The snow layer's clipped zoom, threshold and 8-bit storage, its motion blur
(:func:`.motion.motion_blur_planes`), the brightened image and the two flake layers (one rotated by
180 degrees), in the tensor path's precisions.
"""

from __future__ import annotations

import numba
import numpy as np

from .motion import motion_blur_planes

__all__ = ["snow_kernel"]


@numba.njit(cache=True, nogil=True)
def snow_kernel(x, layer, zr, zc, thresh, k, dxs, dys, c6, start, end, out):
    # The tensor path's steps for images start..end-1, in its precisions: x (B x 3 x H x W float32
    # levels), layer (B x H x W float64 draws), zr / zc (i0, i1, t) tables of the clipped zoom's rows
    # and columns, k / dxs / dys the motion blur's taps; out: float64 values or uint8 levels.
    nc, h, w = x.shape[1], x.shape[2], x.shape[3]
    ri0, ri1, rt = zr
    ci0, ci1, ct = zc
    zrow = np.empty((h, w))
    q = np.empty((1, 1, h, w))
    fl = np.empty((1, 1, h, w))
    lo = ci0[0]
    hi = ci1[w - 1] + 1
    x32 = np.empty((nc, w), dtype=np.float32)
    s255 = np.float32(255.0)
    g_r = np.float64(np.float32(0.299))
    g_g = np.float64(np.float32(0.587))
    g_b = np.float64(np.float32(0.114))
    k15 = np.float32(1.5)
    k05 = np.float32(0.5)
    keep = np.float32(c6)
    wash = np.float32(1.0 - c6)
    for b in range(start, end):
        lb = layer[b]
        for y in range(h):  # clipped zoom: rows, then columns, a + (b - a) t in float64
            ra = lb[ri0[y]]
            rb = lb[ri1[y]]
            t = rt[y]
            zy = zrow[y]
            for j in range(lo, hi):
                zy[j] = ra[j] + (rb[j] - ra[j]) * t
        for y in range(h):
            zy = zrow[y]
            qy = q[0, 0, y]
            for i in range(w):
                a = zy[ci0[i]]
                v = a + (zy[ci1[i]] - a) * ct[i]
                if v < thresh:
                    v = 0.0
                qy[i] = np.floor(min(max(v, 0.0), 1.0) * 255.0)  # the 8-bit gray layer
        motion_blur_planes(q, k, dxs[b : b + 1], dys[b : b + 1], 0, 1, fl)
        f = fl[0, 0]
        xb = x[b]
        ob = out[b]
        for y in range(h):
            fy = f[y]
            fz = f[h - 1 - y]
            for ch in range(nc):
                xr = xb[ch, y]
                for i in range(w):
                    x32[ch, i] = np.float32(xr[i]) / s255
            for i in range(w):
                t = np.float32(np.float64(x32[1, i]) * g_g)  # cv2's RGB -> gray, one rounding per fma
                t = np.float32(np.float64(x32[0, i]) * g_r + np.float64(t))
                gray = np.float32(np.float64(x32[2, i]) * g_b + np.float64(t))
                bright = gray * k15
                bright = bright + k05
                flake = fy[i] / 255.0
                flip = fz[w - 1 - i] / 255.0
                for ch in range(nc):
                    v32 = x32[ch, i]
                    m = max(v32, bright) * wash
                    v = np.float64(v32 * keep + m)
                    v += flake
                    v += flip
                    ob[ch, y, i] = min(max(v, 0.0), 1.0) * 255.0
