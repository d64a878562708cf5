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

from .._simd import wide_vectors

_TO_UNIT = 1.0 / 4294967296.0  # 2**-32


@numba.njit(cache=True, nogil=True, inline="always")
def _octave(grid: np.ndarray, words: np.ndarray, p: int, step: int, half: int, cells: int, wibble: float, lo: float, span: float) -> int:  # pragma: no cover - compiled
    """One octave of the diamond-square steps; returns the next word. Each loop's last column,
    where a neighbour wraps round the torus, is done apart, so the rest runs without branches."""
    # square centres: ((c[i, j] + c[i+1, j]) + (c[i, j+1] + c[i+1, j+1])) / 4 + noise
    for i in range(cells):
        r0 = grid[i * step]
        r1 = grid[(i + 1 if i + 1 < cells else 0) * step]
        rc = grid[i * step + half]
        for j in range(cells - 1):
            u = (float(words[p + j]) + 0.5) * _TO_UNIT
            rc[j * step + half] = ((r0[j * step] + r1[j * step]) + (r0[j * step + step] + r1[j * step + step])) / 4 + wibble * (lo + span * u)
        j = cells - 1
        u = (float(words[p + j]) + 0.5) * _TO_UNIT
        rc[j * step + half] = ((r0[j * step] + r1[j * step]) + (r0[0] + r1[0])) / 4 + wibble * (lo + span * u)
        p += cells
    # diamonds on the corner rows: (ce[i, j] + ce[i-1, j]) + (co[i, j] + co[i, j+1])
    for i in range(cells):
        c0 = grid[i * step + half]
        cm = grid[(i - 1 if i > 0 else cells - 1) * step + half]
        r0 = grid[i * step]
        for j in range(cells - 1):
            u = (float(words[p + j]) + 0.5) * _TO_UNIT
            r0[j * step + half] = ((c0[j * step + half] + cm[j * step + half]) + (r0[j * step] + r0[j * step + step])) / 4 + wibble * (lo + span * u)
        j = cells - 1
        u = (float(words[p + j]) + 0.5) * _TO_UNIT
        r0[j * step + half] = ((c0[j * step + half] + cm[j * step + half]) + (r0[j * step] + r0[0])) / 4 + wibble * (lo + span * u)
        p += cells
    # diamonds on the centre rows: (ce[i, j] + ce[i, j-1]) + (co[i, j] + co[i+1, j])
    for i in range(cells):
        c0 = grid[i * step + half]
        r0 = grid[i * step]
        r1 = grid[(i + 1 if i + 1 < cells else 0) * step]
        u = (float(words[p]) + 0.5) * _TO_UNIT
        c0[0] = ((c0[half] + c0[(cells - 1) * step + half]) + (r0[0] + r1[0])) / 4 + wibble * (lo + span * u)
        for j in range(1, cells):
            u = (float(words[p + j]) + 0.5) * _TO_UNIT
            c0[j * step] = ((c0[j * step + half] + c0[j * step - step + half]) + (r0[j * step] + r1[j * step])) / 4 + wibble * (lo + span * u)
        p += cells
    return p


@numba.njit(cache=True, nogil=True)
def plasma_map(words: np.ndarray, n: int, wibbledecay: float, height: int, width: int) -> np.ndarray:  # pragma: no cover - compiled
    """The normalised n x n plasma map's top-left ``height x width`` window (float32).

    ``words`` holds the n * n - 1 32-bit words the octaves consume, in draw order."""
    wide_vectors()
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
        if step == 2:  # the last octave, three quarters of the points: strides known when compiled
            p = _octave(grid, words, p, 2, 1, cells, wibble, lo, span)
        else:
            p = _octave(grid, words, p, step, half, cells, wibble, lo, span)
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


@numba.njit(cache=True, nogil=True, inline="always")
def _fog_value(xv: float, pv: float, c0: float, peak: float, den: float) -> float:  # pragma: no cover - compiled
    """One value of the blend, with the tensor path's float64 operations in its order."""
    v = xv / 255.0 + c0 * pv
    v = v * peak
    v = v / den
    return min(max(v, 0.0), 1.0) * 255.0


@numba.njit(cache=True, nogil=True)
def fog_blend(x: np.ndarray, plasma: np.ndarray, c0: float, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out = clip((x / 255 + c0 * plasma) * peak / (peak + c0), 0, 1) * 255`` per image, with
    ``peak`` the image's maximum of ``x / 255``; x: B x 3 x H x W (uint8 levels or float64 values),
    plasma: B x H x W (float32 or float64, widened); out: float64, or uint8 for the truncated levels. The float64
    operations of the tensor path, in its order."""
    wide_vectors()
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
                    o[j] = _fog_value(np.float64(xr[j]), np.float64(pr[j]), c0, peak, den)


_NEAR = 1e-6  # a result this close to an integer level is recomputed with the exact divisions


@numba.njit(cache=True, nogil=True)
def fog_levels(x: np.ndarray, plasma: np.ndarray, c0: float, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The truncated levels of :func:`fog_blend` without its two divisions per value.

    Divisions are what limit the float64 loop. Here they become multiplications by the
    reciprocals; every quantity is non-negative, so the product differs from the exactly divided
    value by a few units in the last place (~1e-13 of a level), and its integer part is the exact
    one unless it lies within ``_NEAR`` of a level boundary. Those values (a few per million) are
    recomputed afterwards with the divisions, in the float64 path's order."""
    wide_vectors()
    nb, nc, nh, nw = x.shape
    inv255 = 1.0 / 255.0
    near = np.zeros(nw, dtype=np.bool_)
    for n in range(nb):
        peak = np.float64(_peak(x[n])) / 255.0
        den = peak + c0
        scale = peak * (1.0 / den) * 255.0
        pl = plasma[n]
        for ch in range(nc):
            for i in range(nh):
                xr = x[n, ch, i]
                pr = pl[i]
                o = out[n, ch, i]
                hits = 0
                for j in range(nw):
                    t = (np.float64(xr[j]) * inv255 + c0 * np.float64(pr[j])) * scale
                    k = np.floor(t)
                    f = t - k
                    over = t >= 255.0 + _NEAR
                    bad = ((f < _NEAR) | (f > 1.0 - _NEAR)) & ~over
                    near[j] = bad
                    hits += bad
                    o[j] = np.uint8(255.0 if over else max(min(k, 255.0), 0.0))
                if hits:
                    for j in range(nw):
                        if near[j]:
                            o[j] = np.uint8(_fog_value(np.float64(xr[j]), np.float64(pr[j]), c0, peak, den))


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
