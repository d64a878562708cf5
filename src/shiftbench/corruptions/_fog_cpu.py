"""Compiled fog: the diamond-square plasma map from raw generator words, and the blend.

:func:`plasma_map` performs the float64 operations of
:func:`~shiftbench.corruptions.weather.plasma_fractal` in the same order, with the
uniforms that ``Generator.uniform(-w, w, size)`` would return (``-w + 2w * u``, one
64-bit word per value, ``u = (word >> 11) * 2**-53``), so the maps are bit-identical
(tested); it only saves NumPy's per-octave temporaries and the generator's per-value calls.
"""

from __future__ import annotations

import numba
import numpy as np

_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53


@numba.njit(cache=True, nogil=True)
def plasma_map(raw: np.ndarray, n: int, wibbledecay: float, height: int, width: int) -> np.ndarray:  # pragma: no cover - compiled
    """The normalised n x n plasma map's top-left ``height x width`` window (float64).

    ``raw`` holds the 3 * (n * n - 1) / 3 = n * n - 1 words the octaves consume, in draw order."""
    grid = np.empty((n, n), dtype=np.float64)
    grid[0, 0] = 0.0
    step = n
    wibble = 100.0
    p = 0
    while step >= 2:
        half = step // 2
        cells = n // step
        lo = -wibble
        span = wibble - lo
        # square centres: ((c[i, j] + c[i+1, j]) + (c[i, j+1] + c[i+1, j+1])) / 4 + noise, on the torus
        for i in range(cells):
            i1 = i + 1 if i + 1 < cells else 0
            for j in range(cells):
                j1 = j + 1 if j + 1 < cells else 0
                a = grid[i * step, j * step] + grid[i1 * step, j * step]
                b = grid[i * step, j1 * step] + grid[i1 * step, j1 * step]
                u = float(raw[p] >> np.uint64(11)) * _TO_UNIT
                p += 1
                grid[i * step + half, j * step + half] = (a + b) / 4 + wibble * (lo + span * u)
        # diamonds on the corner rows: (ce[i, j] + ce[i-1, j]) + (co[i, j] + co[i, j+1])
        for i in range(cells):
            im = i - 1 if i > 0 else cells - 1
            for j in range(cells):
                j1 = j + 1 if j + 1 < cells else 0
                a = grid[i * step + half, j * step + half] + grid[im * step + half, j * step + half]
                b = grid[i * step, j * step] + grid[i * step, j1 * step]
                u = float(raw[p] >> np.uint64(11)) * _TO_UNIT
                p += 1
                grid[i * step, j * step + half] = (a + b) / 4 + wibble * (lo + span * u)
        # diamonds on the centre rows: (ce[i, j] + ce[i, j-1]) + (co[i, j] + co[i+1, j])
        for i in range(cells):
            i1 = i + 1 if i + 1 < cells else 0
            for j in range(cells):
                jm = j - 1 if j > 0 else cells - 1
                a = grid[i * step + half, j * step + half] + grid[i * step + half, jm * step + half]
                b = grid[i * step, j * step] + grid[i1 * step, j * step]
                u = float(raw[p] >> np.uint64(11)) * _TO_UNIT
                p += 1
                grid[i * step + half, j * step] = (a + b) / 4 + wibble * (lo + span * u)
        step //= 2
        wibble /= wibbledecay
    mn = grid.min()
    for i in range(n):
        for j in range(n):
            grid[i, j] -= mn
    mx = grid.max()
    out = np.empty((height, width), dtype=np.float64)
    for i in range(height):
        for j in range(width):
            out[i, j] = grid[i, j] / mx
    return out


@numba.njit(cache=True, nogil=True)
def fog_blend(x: np.ndarray, plasma: np.ndarray, c0: float, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = clip((x / 255 + c0 * plasma) * peak / (peak + c0), 0, 1) * 255`` per image, with
    ``peak`` the image's maximum of ``x / 255``; x: B x 3 x H x W (uint8 levels or float64 values),
    plasma: B x H x W float64; out: float64, or uint8 for the truncated levels. The float64
    operations of the tensor path, in its order."""
    nb, nc, nh, nw = x.shape
    for n in range(nb):
        peak = np.float64(_peak(x[n])) / 255.0
        den = peak + c0
        pl = plasma[n]
        for ch in range(nc):
            for i in range(nh):
                xr = x[n, ch, i]
                pr = pl[i]
                o = out[n, ch, i]
                for j in range(nw):
                    v = np.float64(xr[j]) / 255.0 + c0 * pr[j]
                    v = v * peak
                    v = v / den
                    o[j] = min(max(v, 0.0), 1.0) * 255.0


@numba.njit(cache=True, nogil=True)
def _peak(img: np.ndarray) -> float:  # pragma: no cover - compiled
    """Largest value of one image (max(x) / 255 == max(x / 255): division is monotonic), with
    eight running maxima so that the reduction vectorises."""
    flat = img.reshape(-1)
    m = np.zeros(8, dtype=flat.dtype)
    n8 = flat.shape[0] // 8 * 8
    for i in range(0, n8, 8):
        for k in range(8):
            v = flat[i + k]
            if v > m[k]:
                m[k] = v
    best = m.max()
    for i in range(n8, flat.shape[0]):
        if flat[i] > best:
            best = flat[i]
    return float(best)
