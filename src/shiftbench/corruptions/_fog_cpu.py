"""Compiled fog: the diamond-square plasma map from raw generator words, and the blend.

:func:`plasma_map` performs the float64 operations of
:func:`~shiftbench.corruptions.weather.plasma_fractal` in the same order, on uniforms
``-w + 2w * u`` made from 32-bit words (``u = (word + 0.5) * 2**-32``, the halves of the
generator's 64-bit output, low half first): the map of ``plasma_fractal`` fed those uniforms
(tested), without NumPy's per-octave temporaries and the generator's per-value calls. The
window handed to the blend is stored as float32 (the haze needs no more).
"""

from __future__ import annotations

import numba
import numpy as np

_TO_UNIT = 1.0 / 4294967296.0  # 2**-32


@numba.njit(cache=True, nogil=True)
def plasma_map(words: np.ndarray, n: int, wibbledecay: float, height: int, width: int) -> np.ndarray:  # pragma: no cover - compiled
    """The normalised n x n plasma map's top-left ``height x width`` window (float32).

    ``words`` holds the n * n - 1 32-bit words the octaves consume, in draw order."""
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
                u = (float(words[p]) + 0.5) * _TO_UNIT
                p += 1
                grid[i * step + half, j * step + half] = (a + b) / 4 + wibble * (lo + span * u)
        # diamonds on the corner rows: (ce[i, j] + ce[i-1, j]) + (co[i, j] + co[i, j+1])
        for i in range(cells):
            im = i - 1 if i > 0 else cells - 1
            for j in range(cells):
                j1 = j + 1 if j + 1 < cells else 0
                a = grid[i * step + half, j * step + half] + grid[im * step + half, j * step + half]
                b = grid[i * step, j * step] + grid[i * step, j1 * step]
                u = (float(words[p]) + 0.5) * _TO_UNIT
                p += 1
                grid[i * step, j * step + half] = (a + b) / 4 + wibble * (lo + span * u)
        # diamonds on the centre rows: (ce[i, j] + ce[i, j-1]) + (co[i, j] + co[i+1, j])
        for i in range(cells):
            i1 = i + 1 if i + 1 < cells else 0
            for j in range(cells):
                jm = j - 1 if j > 0 else cells - 1
                a = grid[i * step + half, j * step + half] + grid[i * step + half, jm * step + half]
                b = grid[i * step, j * step] + grid[i1 * step, j * step]
                u = (float(words[p]) + 0.5) * _TO_UNIT
                p += 1
                grid[i * step + half, j * step] = (a + b) / 4 + wibble * (lo + span * u)
        step //= 2
        wibble /= wibbledecay
    # (grid - min) / max(grid - min): one pass for both extremes (eight running pairs, so that it
    # vectorises), and max(grid - min) is max(grid) - min, the subtraction being monotonic
    flat = grid.reshape(-1)
    lo8 = np.full(8, np.inf)
    hi8 = np.full(8, -np.inf)
    for i in range(0, flat.shape[0] - 7, 8):
        for k in range(8):
            v = flat[i + k]
            lo8[k] = min(lo8[k], v)
            hi8[k] = max(hi8[k], v)
    mn = lo8.min()
    mx = hi8.max()
    for i in range(flat.shape[0] // 8 * 8, flat.shape[0]):
        mn = min(mn, flat[i])
        mx = max(mx, flat[i])
    den = mx - mn
    out = np.empty((height, width), dtype=np.float32)
    for i in range(height):
        g = grid[i]
        o = out[i]
        for j in range(width):
            o[j] = np.float32((g[j] - mn) / den)
    return out


@numba.njit(cache=True, nogil=True)
def fog_blend(x: np.ndarray, plasma: np.ndarray, c0: float, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = clip((x / 255 + c0 * plasma) * peak / (peak + c0), 0, 1) * 255`` per image, with
    ``peak`` the image's maximum of ``x / 255``; x: B x 3 x H x W (uint8 levels or float64 values),
    plasma: B x H x W (float32 or float64, widened); out: float64, or uint8 for the truncated levels. The float64
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
                    v = np.float64(xr[j]) / 255.0 + c0 * np.float64(pr[j])
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
