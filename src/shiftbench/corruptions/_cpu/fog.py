"""Compiled fog: the diamond-square plasma map from raw generator words, and the blend.

:func:`plasma_map` performs the float64 operations of
:func:`~shiftbench.corruptions.weather.plasma_fractal` in the same order, on uniforms
``-w + 2w * u`` made from 32-bit words (``u = (word + 0.5) * 2**-32``, the halves of the
generator's 64-bit output, low half first): the map of ``plasma_fractal`` fed those uniforms
(tested), without NumPy's per-octave temporaries and the generator's per-value calls. Each
octave works on dense arrays (its corners, centres and the two kinds of diamond points) that are
interleaved into the next octave's corners, so no loop strides over the map. The window handed
to the blend is stored as float32 (the haze needs no more).
"""

from __future__ import annotations

import numba
import numpy as np

from ...rng.simd import wide_vectors

_TO_UNIT = 1.0 / 4294967296.0  # 2**-32


@numba.njit(cache=True, nogil=True, inline="always")
def _noise(w: np.uint32, wibble: float, lo: float, span: float) -> float:
    """``wibble * uniform(-wibble, wibble)`` from one 32-bit word."""
    return wibble * (lo + span * ((float(w) + 0.5) * _TO_UNIT))


@numba.njit(cache=True, nogil=True)
def _octave(
    e: np.ndarray,
    words: np.ndarray,
    p: int,
    wibble: float,
    lo: float,
    span: float,
    c: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    f: np.ndarray,
) -> int:
    """One octave of the diamond-square steps on the torus, as dense arrays: the m x m lattice
    corners ``e`` give the square centres ``c``, the diamond points ``a`` on the corner rows
    (between corners ``[i, j]`` and ``[i, j + 1]``) and ``b`` on the centre rows (between corners
    ``[i, j]`` and ``[i + 1, j]``), each in draw order; ``f`` (2m x 2m) receives the four
    interleaved, the next octave's corners. Returns the next word.

    The lattice is stored densely instead of with the octave's stride, so every loop is over
    contiguous memory (the neighbours that wrap round the torus are done apart)."""
    wide_vectors()
    m = e.shape[0]
    for i in range(m):  # ((e[i, j] + e[i+1, j]) + (e[i, j+1] + e[i+1, j+1])) / 4 + noise
        e0, e1, ci = e[i], e[i + 1 if i + 1 < m else 0], c[i]
        w = words[p + i * m : p + i * m + m]
        for j in range(m - 1):
            ci[j] = ((e0[j] + e1[j]) + (e0[j + 1] + e1[j + 1])) / 4 + _noise(w[j], wibble, lo, span)
        ci[m - 1] = ((e0[m - 1] + e1[m - 1]) + (e0[0] + e1[0])) / 4 + _noise(w[m - 1], wibble, lo, span)
    p += m * m
    for i in range(m):  # ((c[i, j] + c[i-1, j]) + (e[i, j] + e[i, j+1])) / 4 + noise
        c0, cm, e0, ai = c[i], c[i - 1 if i > 0 else m - 1], e[i], a[i]
        w = words[p + i * m : p + i * m + m]
        for j in range(m - 1):
            ai[j] = ((c0[j] + cm[j]) + (e0[j] + e0[j + 1])) / 4 + _noise(w[j], wibble, lo, span)
        ai[m - 1] = ((c0[m - 1] + cm[m - 1]) + (e0[m - 1] + e0[0])) / 4 + _noise(w[m - 1], wibble, lo, span)
    p += m * m
    for i in range(m):  # ((c[i, j] + c[i, j-1]) + (e[i, j] + e[i+1, j])) / 4 + noise
        c0, e0, e1, bi = c[i], e[i], e[i + 1 if i + 1 < m else 0], b[i]
        w = words[p + i * m : p + i * m + m]
        bi[0] = ((c0[0] + c0[m - 1]) + (e0[0] + e1[0])) / 4 + _noise(w[0], wibble, lo, span)
        c1 = c0[: m - 1]  # c[i, j - 1] for j >= 1
        for j in range(1, m):
            bi[j] = ((c0[j] + c1[j - 1]) + (e0[j] + e1[j])) / 4 + _noise(w[j], wibble, lo, span)
    p += m * m
    for i in range(m):
        even, odd = f[2 * i], f[2 * i + 1]
        e0, ai, bi, ci = e[i], a[i], b[i], c[i]
        for j in range(m):
            even[2 * j] = e0[j]
            even[2 * j + 1] = ai[j]
            odd[2 * j] = bi[j]
            odd[2 * j + 1] = ci[j]
    return p


@numba.njit(cache=True, nogil=True, fastmath={"nnan", "ninf", "nsz"})
def _extremes(flat: np.ndarray) -> tuple[float, float]:
    """Minimum and maximum of the finite map as one vectorised reduction (the flags let the
    compiler reorder it). The extremes are values of the map, whatever the order, except for
    which zero a tie of -0.0 and 0.0 yields: :func:`plasma_map` settles that case with
    :func:`_ordered_extremes`."""
    lo = flat[0]
    hi = flat[0]
    for i in range(flat.shape[0]):
        v = flat[i]
        lo = min(lo, v)
        hi = max(hi, v)
    return lo, hi


@numba.njit(cache=True, nogil=True)
def _ordered_extremes(grid: np.ndarray) -> tuple[float, float]:
    """Minimum and maximum column by column, then across the columns: a fixed order, which fixes
    the sign of a zero extreme."""
    n = grid.shape[0]
    lo = grid[0].copy()
    hi = grid[0].copy()
    for i in range(1, n):
        r = grid[i]
        for j in range(n):
            v = r[j]
            lo[j] = v if v < lo[j] else lo[j]
            hi[j] = v if v > hi[j] else hi[j]
    return lo.min(), hi.max()


@numba.njit(cache=True, nogil=True)
def plasma_map(words: np.ndarray, n: int, wibbledecay: float, height: int, width: int) -> np.ndarray:
    """The normalised n x n plasma map's top-left ``height x width`` window (float32).

    ``words`` holds the n * n - 1 32-bit words the octaves consume, in draw order."""
    wide_vectors()
    half = n // 2
    bufs = np.empty((3, half * half), dtype=np.float64)  # an octave's centres and diamond points
    grids = np.empty((2, n * n), dtype=np.float64)  # the corners, octave after octave
    e = grids[0, :1].reshape(1, 1)
    e[0, 0] = 0.0
    wibble = 100.0
    p = 0
    k = 0
    while e.shape[0] < n:
        m = e.shape[0]
        lo = -wibble
        span = wibble - lo
        k = 1 - k
        f = grids[k, : 4 * m * m].reshape(2 * m, 2 * m)
        # contiguous m x m views (a slice of an n/2 x n/2 array would compile to strided loops)
        c, da, db = bufs[0, : m * m].reshape(m, m), bufs[1, : m * m].reshape(m, m), bufs[2, : m * m].reshape(m, m)
        p = _octave(e, words, p, wibble, lo, span, c, da, db, f)
        e = f
        wibble /= wibbledecay
    # (grid - min) / max(grid - min), and max(grid - min) is max(grid) - min, the subtraction
    # being monotonic
    grid = e
    mn, mx = _extremes(grid.reshape(-1))
    if mn == 0.0 or mx == 0.0:  # a zero extreme: its sign as the ordered scan picks it
        mn, mx = _ordered_extremes(grid)
    den = mx - mn
    out = np.empty((height, width), dtype=np.float32)
    for i in range(height):
        g = grid[i]
        o = out[i]
        for j in range(width):
            o[j] = np.float32((g[j] - mn) / den)
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _fog_value(xv: float, pv: float, c0: float, peak: float, den: float) -> float:
    """One value of the blend, with the tensor path's float64 operations in its order."""
    v = xv / 255.0 + c0 * pv
    v = v * peak
    v = v / den
    return min(max(v, 0.0), 1.0) * 255.0


@numba.njit(cache=True, nogil=True)
def fog_blend(x: np.ndarray, plasma: np.ndarray, c0: float, out: np.ndarray) -> None:
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
def fog_levels(x: np.ndarray, plasma: np.ndarray, c0: float, out: np.ndarray) -> None:
    """The truncated levels of :func:`fog_blend` without its two divisions per value.

    Divisions are what limit the float64 loop. Here each value is ``x a + p b`` with
    ``a = scale / 255`` and ``b = c0 scale`` (``scale = 255 peak / (peak + c0)``); every quantity is
    non-negative, so this differs from the exactly divided value by a few units in the last place
    (~1e-13 of a level), and its integer part is the exact one unless it lies within ``_NEAR`` of a
    level boundary. Rows with such values (a few per million values) recompute them afterwards with
    the divisions, in the float64 path's order. The three channels of a pixel share its plasma
    product."""
    wide_vectors()
    nb, nc, nh, nw = x.shape
    for n in range(nb):
        peak = np.float64(_peak(x[n])) / 255.0
        den = peak + c0
        scale = peak * (1.0 / den) * 255.0
        a, b = scale / 255.0, c0 * scale
        pl = plasma[n]
        if nc != 3:
            for ch in range(nc):
                for i in range(nh):
                    if _levels_row(x[n, ch, i], pl[i], a, b, out[n, ch, i]):
                        _exact_row(x[n, ch, i], pl[i], a, b, c0, peak, den, out[n, ch, i])
            continue
        for i in range(nh):
            x0, x1, x2, pr = x[n, 0, i], x[n, 1, i], x[n, 2, i], pl[i]
            o0, o1, o2 = out[n, 0, i], out[n, 1, i], out[n, 2, i]
            hits = False
            for j in range(nw):
                pb = np.float64(pr[j]) * b
                t0, t1, t2 = np.float64(x0[j]) * a + pb, np.float64(x1[j]) * a + pb, np.float64(x2[j]) * a + pb
                k0, k1, k2 = np.floor(t0), np.floor(t1), np.floor(t2)
                hits |= _near(t0, k0) | _near(t1, k1) | _near(t2, k2)
                o0[j] = np.uint8(max(min(k0, 255.0), 0.0))
                o1[j] = np.uint8(max(min(k1, 255.0), 0.0))
                o2[j] = np.uint8(max(min(k2, 255.0), 0.0))
            if hits:
                for ch in range(3):
                    _exact_row(x[n, ch, i], pr, a, b, c0, peak, den, out[n, ch, i])


@numba.njit(cache=True, nogil=True, inline="always")
def _near(t: float, k: float) -> bool:
    """``t`` (whose floor is ``k``) within ``_NEAR`` of a level boundary, below the top level
    (values past 255 + ``_NEAR`` clip to 255 whatever their rounding)."""
    f = t - k
    return ((f < _NEAR) | (f > 1.0 - _NEAR)) & (t < 255.0 + _NEAR)


@numba.njit(cache=True, nogil=True)
def _levels_row(xr: np.ndarray, pr: np.ndarray, a: float, b: float, o: np.ndarray) -> bool:
    """One row of :func:`fog_levels`' levels; True when a value lies near a level boundary."""
    hits = False
    for j in range(xr.shape[0]):
        t = np.float64(xr[j]) * a + np.float64(pr[j]) * b
        k = np.floor(t)
        hits |= _near(t, k)
        o[j] = np.uint8(max(min(k, 255.0), 0.0))
    return hits


@numba.njit(cache=True, nogil=True)
def _exact_row(xr: np.ndarray, pr: np.ndarray, a: float, b: float, c0: float, peak: float, den: float, o: np.ndarray) -> None:
    """The values of one row near a level boundary again, with :func:`fog_blend`'s divisions."""
    for j in range(xr.shape[0]):
        t = np.float64(xr[j]) * a + np.float64(pr[j]) * b
        if _near(t, np.floor(t)):
            o[j] = np.uint8(_fog_value(np.float64(xr[j]), np.float64(pr[j]), c0, peak, den))


@numba.njit(cache=True, nogil=True)
def _peak(img: np.ndarray) -> float:
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
