"""Compiled per-pixel blends for frost and contrast (CPU; 8-bit levels or float64 in, float64
arithmetic in the reference's order; the output array's dtype decides between float64 values
and truncated uint8 levels)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def blend_crop(x: np.ndarray, tex: np.ndarray, top: int, left: int, c0: float, c1: float, out: np.ndarray) -> None:
    """One image (3 x H x W): ``clip(c0 * x + c1 * tex[:, top:top + H, left:left + W], 0, 255)``."""
    nc, nh, nw = x.shape
    for ch in range(nc):
        for i in range(nh):
            xr = x[ch, i]
            tr = tex[ch, top + i, left : left + nw]
            o = out[ch, i]
            for j in range(nw):
                v = c0 * np.float64(xr[j]) + c1 * np.float64(tr[j])
                o[j] = min(max(v, 0.0), 255.0)


@numba.njit(cache=True, nogil=True)
def contrast_kernel(x: np.ndarray, means: np.ndarray, c: float, out: np.ndarray) -> None:
    """``clip((x / 255 - m) * c + m, 0, 1) * 255`` with ``means`` (B x C) the channel means of x / 255."""
    nb, nc, nh, nw = x.shape
    for n in range(nb):
        for ch in range(nc):
            m = means[n, ch]
            for i in range(nh):
                r = x[n, ch, i]
                o = out[n, ch, i]
                for j in range(nw):
                    v = (np.float64(r[j]) / 255.0 - m) * c + m
                    o[j] = min(max(v, 0.0), 1.0) * 255.0
