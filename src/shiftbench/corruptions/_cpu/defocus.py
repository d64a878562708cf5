"""Defocus blur on the CPU without a per-tap sum: the disk, the small Gaussian, and a few border taps.

The reference kernel is ``K = GaussianBlur(D)``: a normalised binary disk ``D`` smoothed by a
3 x 3 or 5 x 5 Gaussian ``g (x) g`` with OpenCV's ``REFLECT_101`` border *on the kernel array*.
Away from the array's border that is the full convolution ``D * (g (x) g)``; where the disk
reaches the border (radius 8 on the -8..8 grid, radius >= 9 on its own grid) the reflected and
cut-off mass leaves a difference ``C = K - D * (g (x) g)`` on a thin frame of taps. So

    correlate(x, K) = correlate(correlate(x, D), g (x) g) + correlate(x, C)

and ``correlate(x, D)`` is a sum of box sums: the disk's column ``dx`` is a run of half-height
``w(dx)``, so per output row one vertical pass builds the box sums of every half-height and a
horizontal pass adds the 2R + 1 shifted columns. Work per pixel: ~4R adds, 2 x ksize
multiply-adds and the frame taps (none for radius <= 6 at 224; 48 and 160 taps at radius 8
and 10, run as a few symmetric 1-D strips), instead of the kernel's (2R + 3)^2 taps.

Precision: on 8-bit levels the box sums are integers, exact in float32; the Gaussian runs in
float64 and the frame in float32. What the decomposition leaves out (the float32 rounding of the
reference's taps, frame taps below 1e-8) is added as one centre tap of the same total, so flat
regions come out as ``level * sum(K)``, and bounds the error elsewhere (~1e-6 of a level). That
matters only where the reference's own result sits on an 8-bit truncation boundary, e.g. on
symmetric neighbourhoods, where ``sum(K_i * v_i)`` equals ``v * sum(K)`` up to the rounding of
individual taps: every result within four times that bound of a level boundary is recomputed
exactly, tap by tap in float64 with the reference's taps (~0.01 % of the pixels on photos).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numba
import numpy as np

from ...rng.simd import wide_vectors
from .gauss import pad_plane_f32

_FRAME_TAP_MIN = 1e-8
"""Frame taps smaller than this are dropped (their total stays below 3e-8, i.e. 1e-5 of a level)."""


class DiskPlan(NamedTuple):
    pad: int  # reflect padding of the image: grid radius + Gaussian half-width
    grid: int  # kernel grid radius (8, or the disk radius when larger)
    half: int  # Gaussian half-width (1 or 2)
    widths: np.ndarray  # distinct half-heights of the disk's columns, ascending
    width_slot: np.ndarray  # per column dx = -grid..grid: index into widths, -1 when empty
    g: np.ndarray  # Gaussian taps (float32, 2 * half + 1)
    dval: float  # the disk's value 1/N (float32, as the reference normalises it)
    frame: tuple[np.ndarray, ...]  # C as 1-D strips (:func:`frame_strips`)
    taps: tuple[np.ndarray, np.ndarray, np.ndarray]  # the reference kernel's non-zero taps: weight, dy, dx
    margin: float  # bound on the fast path's error, in levels (x 4): closer results are recomputed


def frame_strips(frame: np.ndarray) -> tuple[np.ndarray, ...]:
    """A frame that is symmetric under both mirrors and the transposition, as 1-D strips.

    Tap (dy, dx) (offsets from the centre) belongs to the column strip ``|dx|`` when
    ``|dx| >= |dy|``, else to the row strip ``|dy|``; by symmetry a strip is a symmetric 1-D
    profile used at +offset and -offset, so a column strip is one vertical filter per row shared
    by both sides, and a row strip one horizontal filter of the sum of its two rows.
    Returns (centre weight (1,), column offsets, column half-lengths, column weights (n x L),
    row offsets, row half-lengths, row weights (n x L)); weights float32, index 0 the middle tap.
    """
    side = frame.shape[0]
    c0 = (side - 1) // 2
    cols, rows = [], []
    for off in range(1, c0 + 1):
        col = frame[c0 : c0 + off + 1, c0 + off]  # dy = 0..off of column +off
        if np.any(col != 0):
            cols.append((off, col))
        row = frame[c0 + off, c0 : c0 + off]  # dx = 0..off-1 of row +off
        if np.any(row != 0):
            rows.append((off, row))

    def pack(strips: list[tuple[int, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        width = max([len(np.flatnonzero(v)) and int(np.flatnonzero(v).max()) + 1 for _, v in strips] + [1])
        offs = np.array([o for o, _ in strips], dtype=np.int64)
        lens = np.zeros(len(strips), dtype=np.int64)
        w = np.zeros((len(strips), width), dtype=np.float32)
        for i, (_, v) in enumerate(strips):
            m = int(np.flatnonzero(v).max())
            lens[i] = m
            w[i, : m + 1] = v[: m + 1]
        return offs, lens, w

    return (np.array([frame[c0, c0]], dtype=np.float32), *pack(cols), *pack(rows))


def strips_frame(strips: tuple[np.ndarray, ...], side: int) -> np.ndarray:
    """The frame that :func:`frame_strips` describes (for checks)."""
    centre, coff, clen, cw, roff, rlen, rw = strips
    c0 = (side - 1) // 2
    f = np.zeros((side, side))
    f[c0, c0] = centre[0]
    for off, m, w in zip(coff, clen, cw):
        for d in range(-int(m), int(m) + 1):
            f[c0 + d, c0 + off] = f[c0 + d, c0 - off] = w[abs(d)]
    for off, m, w in zip(roff, rlen, rw):
        for d in range(-int(m), int(m) + 1):
            f[c0 + off, c0 + d] = f[c0 - off, c0 + d] = w[abs(d)]
    return f


@lru_cache(maxsize=64)
def disk_plan(radius: float, alias_blur: float, kernel_bytes: bytes, kernel_side: int) -> DiskPlan | None:
    """The decomposition of the reference kernel (given as float32 bytes); None when the disk's
    columns are not single symmetric runs (then the caller correlates tap by tap)."""
    import cv2
    from scipy.signal import convolve2d

    k = np.frombuffer(kernel_bytes, dtype=np.float32).reshape(kernel_side, kernel_side).astype(np.float64)
    grid = (kernel_side - 1) // 2
    half = 1 if radius <= 8 else 2
    axis = np.arange(-grid, grid + 1)
    xx, yy = np.meshgrid(axis, axis)
    mask = (xx**2 + yy**2) <= radius**2
    n_on = int(mask.sum())
    if n_on == 0:
        return None
    dval = float(np.float32(1.0) / np.float32(n_on))
    col_half = np.full(kernel_side, -1, dtype=np.int64)
    for c in range(kernel_side):
        rows = np.flatnonzero(mask[:, c]) - grid
        if rows.size == 0:
            continue
        w = int(rows.max())
        if int(rows.min()) != -w or rows.size != 2 * w + 1:
            return None
        col_half[c] = w
    widths = np.unique(col_half[col_half >= 0])
    width_slot = np.array([int(np.searchsorted(widths, w)) if w >= 0 else -1 for w in col_half], dtype=np.int64)
    g = cv2.getGaussianKernel(2 * half + 1, alias_blur, cv2.CV_32F).astype(np.float32).ravel()
    g64 = g.astype(np.float64)
    full = convolve2d(mask * dval, np.outer(g64, g64))  # side + 2 * half
    ext = np.zeros_like(full)
    ext[half : half + kernel_side, half : half + kernel_side] = k
    frame = ext - full
    # the reference's taps are mirror- and transpose-symmetric up to float32 rounding; the frame
    # is taken symmetric, step by step so that mirrored entries are bit-identical
    frame = frame + frame[::-1]
    frame = frame + frame[:, ::-1]
    frame = (frame + frame.T) / 8
    frame[np.abs(frame) <= _FRAME_TAP_MIN] = 0.0
    frame = frame.astype(np.float32).astype(np.float64)
    # what the fast path leaves out (the taps' float32 rounding, dropped frame taps): its total
    # goes to the centre tap, so flat regions come out as level * sum(K); the rest bounds the error
    centre = grid + half
    frame[centre, centre] = float(np.float32(frame[centre, centre] + (ext - full - frame).sum()))
    missing = ext - full - frame
    bound = 255.0 * (np.abs(missing).sum() + 1e-6 * np.abs(frame).sum() + 1e-14 * kernel_side**2)
    strips = frame_strips(frame)
    if not np.array_equal(strips_frame(strips, frame.shape[0]), frame):
        return None  # not symmetric as built (cannot happen for the reference kernels)
    ty, tx = np.nonzero(k)
    return DiskPlan(
        pad=grid + half,
        grid=grid,
        half=half,
        widths=widths.astype(np.int64),
        width_slot=width_slot,
        g=g,
        dval=dval,
        frame=strips,
        taps=(k[ty, tx].astype(np.float64), (ty + half).astype(np.int64), (tx + half).astype(np.int64)),
        margin=4.0 * bound,
    )


_BAND = 8
"""Rows computed together by :func:`disk_correlate` (flat loops of 8 x the padded width)."""


@numba.njit(cache=True, nogil=True)
def _frame_band(flat, base, wp, pad, nb, wc, coff, clen, cw, roff, rlen, rw, line, fr):
    """The frame's correlation for ``nb`` rows of the padded plane ``flat`` (row stride ``wp``)
    starting at flat index ``base`` (column 0 of the first row): ``fr[r * wp + x]`` for x < W.
    The taps of a strip are summed up to four pairs a pass."""
    wide_vectors()
    n = nb * wp
    m = n - 2 * pad  # fr entries needed: up to the last row's column W - 1
    c = flat[base + pad : base + pad + m]
    for i in range(m):
        fr[i] = c[i] * wc
    for q in range(coff.shape[0]):
        _strip(flat, base, wp, cw[q], clen[q], n, line)
        off = coff[q]
        a = line[pad + off : pad + off + m]
        b = line[pad - off : pad - off + m]
        for i in range(m):
            fr[i] += a[i] + b[i]
    for q in range(roff.shape[0]):
        off = roff[q]
        up = flat[base - off * wp : base - off * wp + n]
        dn = flat[base + off * wp : base + off * wp + n]
        for i in range(n):
            line[i] = up[i] + dn[i]
        _strip(line, pad, 1, rw[q], rlen[q], m, fr, True)


@numba.njit(cache=True, nogil=True, inline="always")
def _strip(src, base, step, w, k, n, dst, accumulate=False):
    """``dst[i] (+)= sum_d w[|d|] * src[base + i + d * step]`` for d = -k..k and i < n (symmetric
    taps), the pairs summed up to four a pass."""
    mid = src[base : base + n]
    w0 = w[0]
    if accumulate:
        for i in range(n):
            dst[i] += mid[i] * w0
    else:
        for i in range(n):
            dst[i] = mid[i] * w0
    d = 1
    while d + 3 <= k:
        a1 = src[base - d * step : base - d * step + n]
        a2 = src[base - (d + 1) * step : base - (d + 1) * step + n]
        a3 = src[base - (d + 2) * step : base - (d + 2) * step + n]
        a4 = src[base - (d + 3) * step : base - (d + 3) * step + n]
        b1 = src[base + d * step : base + d * step + n]
        b2 = src[base + (d + 1) * step : base + (d + 1) * step + n]
        b3 = src[base + (d + 2) * step : base + (d + 2) * step + n]
        b4 = src[base + (d + 3) * step : base + (d + 3) * step + n]
        w1, w2, w3, w4 = w[d], w[d + 1], w[d + 2], w[d + 3]
        for i in range(n):
            dst[i] += ((a1[i] + b1[i]) * w1 + (a2[i] + b2[i]) * w2) + ((a3[i] + b3[i]) * w3 + (a4[i] + b4[i]) * w4)
        d += 4
    if d + 1 <= k:
        a1 = src[base - d * step : base - d * step + n]
        a2 = src[base - (d + 1) * step : base - (d + 1) * step + n]
        b1 = src[base + d * step : base + d * step + n]
        b2 = src[base + (d + 1) * step : base + (d + 1) * step + n]
        w1, w2 = w[d], w[d + 1]
        for i in range(n):
            dst[i] += (a1[i] + b1[i]) * w1 + (a2[i] + b2[i]) * w2
        d += 2
    if d <= k:
        a1 = src[base - d * step : base - d * step + n]
        b1 = src[base + d * step : base + d * step + n]
        w1 = w[d]
        for i in range(n):
            dst[i] += (a1[i] + b1[i]) * w1


@numba.njit(cache=True, nogil=True, inline="always")
def _column_pair(vbox, width_slot, c, grid, ew):
    """The box sums of the disk's columns dx = -(grid - c) and +(grid - c) (the same run) for a row
    of disk sums ``ew`` wide."""
    k = width_slot[c]
    return vbox[k, c : c + ew], vbox[k, 2 * grid - c : 2 * grid - c + ew]


@numba.njit(cache=True, nogil=True, inline="always")
def _disk_row(vbox, width_slot, cols, grid, ew, row):
    """One row of disk sums: the centre column's box sums plus the column pairs of each ``c`` in
    ``cols`` (:func:`_column_pair`), four pairs a pass. The sums are whole numbers below 2**24
    (8-bit levels), so any order of the additions gives them exactly."""
    vb = vbox[width_slot[grid], grid : grid + ew]
    n = cols.shape[0]
    q = 0
    if n >= 4:  # the first pass also takes the centre column
        a1, b1 = _column_pair(vbox, width_slot, cols[0], grid, ew)
        a2, b2 = _column_pair(vbox, width_slot, cols[1], grid, ew)
        a3, b3 = _column_pair(vbox, width_slot, cols[2], grid, ew)
        a4, b4 = _column_pair(vbox, width_slot, cols[3], grid, ew)
        for x in range(ew):
            row[x] = vb[x] + (((a1[x] + b1[x]) + (a2[x] + b2[x])) + ((a3[x] + b3[x]) + (a4[x] + b4[x])))
        q = 4
    else:
        for x in range(ew):
            row[x] = vb[x]
    while q + 3 < n:
        a1, b1 = _column_pair(vbox, width_slot, cols[q], grid, ew)
        a2, b2 = _column_pair(vbox, width_slot, cols[q + 1], grid, ew)
        a3, b3 = _column_pair(vbox, width_slot, cols[q + 2], grid, ew)
        a4, b4 = _column_pair(vbox, width_slot, cols[q + 3], grid, ew)
        for x in range(ew):
            row[x] += ((a1[x] + b1[x]) + (a2[x] + b2[x])) + ((a3[x] + b3[x]) + (a4[x] + b4[x]))
        q += 4
    while q < n:
        a1, b1 = _column_pair(vbox, width_slot, cols[q], grid, ew)
        for x in range(ew):
            row[x] += a1[x] + b1[x]
        q += 1


@numba.njit(cache=True, nogil=True)
def disk_correlate(
    planes: np.ndarray,
    ridx: np.ndarray,
    cidx: np.ndarray,
    grid: int,
    half: int,
    widths: np.ndarray,
    width_slot: np.ndarray,
    g: np.ndarray,
    dval: float,
    fcentre: np.ndarray,
    coff: np.ndarray,
    clen: np.ndarray,
    cw: np.ndarray,
    roff: np.ndarray,
    rlen: np.ndarray,
    rw: np.ndarray,
    tw: np.ndarray,
    tdy: np.ndarray,
    tdx: np.ndarray,
    margin: float,
    integer: bool,
    out: np.ndarray,
) -> int:
    """Correlate planes (P x H x W levels) with the decomposed kernel, each padded in turn through
    the REFLECT_101 index tables ``ridx``/``cidx`` (pad = grid + half) into one float32 buffer that
    stays in cache; ``out`` (P x H x W float64, or uint8 for the truncated levels)
    receives the reference's ``clip(correlate(x / 255, K), 0, 1) * 255``. ``integer``: the levels are
    whole numbers (8-bit input), so box sums can slide from row to row exactly. Returns the number
    of values recomputed exactly.

    Inner loops index slices from 0 so that they vectorise (an offset index costs a wrap-around
    check per element)."""
    wide_vectors()
    npl, nh, nw = out.shape
    pad = grid + half
    wp = nw + 2 * pad  # padded width
    ew = nw + 2 * half  # width of the disk-sum rows (the Gaussian needs `half` more on each side)
    eh = nh + 2 * half
    nwid = widths.shape[0]
    vbox = np.empty((nwid, wp), dtype=np.float32)
    dsum = np.empty((eh, ew), dtype=np.float32)
    tmp = np.empty(ew, dtype=np.float64)
    row64 = np.empty(nw, dtype=np.float64)
    band = _BAND
    frb = np.empty(band * wp, dtype=np.float32)  # the frame's sums for a band of rows (row stride wp)
    lineb = np.empty(band * wp, dtype=np.float32)
    ng = g.shape[0]
    g64 = np.empty(ng, dtype=np.float64)
    for s in range(ng):
        g64[s] = np.float64(g[s])
    inv = 1.0 / 255.0
    repaired = 0
    plane = np.empty((ridx.shape[0], cidx.shape[0]), dtype=np.float32)
    flat = plane.reshape(-1)
    cols = np.nonzero(width_slot[:grid] >= 0)[0]  # the disk's columns left of the centre (dx = c - grid)
    for p in range(npl):
        pad_plane_f32(planes[p], ridx, cidx, plane)
        # 1. disk sums (exact for integer levels) on the (H + 2 half) x (W + 2 half) region:
        #    vertical box sums of each half-height, then the disk's columns side by side
        for y in range(eh):
            yc = y + grid  # centre row in padded coordinates
            if integer and y > 0:
                # slide each box down one row: exact, the sums being integers below 2**24
                for k in range(nwid):
                    dst = vbox[k]
                    add = plane[yc + widths[k]]
                    sub = plane[yc - 1 - widths[k]]
                    for x in range(wp):
                        dst[x] += add[x] - sub[x]
            else:
                done = 0
                for k in range(nwid):
                    dst = vbox[k]
                    src = plane[yc] if k == 0 else vbox[k - 1]
                    for x in range(wp):
                        dst[x] = src[x]
                    for d in range(done + 1, widths[k] + 1):
                        up = plane[yc - d]
                        dn = plane[yc + d]
                        for x in range(wp):
                            dst[x] += up[x] + dn[x]
                    done = widths[k]
            row = dsum[y]
            if integer:
                _disk_row(vbox, width_slot, cols, grid, ew, row)
                continue
            k = width_slot[grid]
            vb = vbox[k, grid : grid + ew]
            for x in range(ew):
                row[x] = vb[x]
            for c in cols:  # one pass per pair: float levels are not whole numbers, the order stays
                va, vc = _column_pair(vbox, width_slot, c, grid, ew)
                for x in range(ew):
                    row[x] += va[x] + vc[x]
        for y0 in range(0, nh, band):
            nb = min(band, nh - y0)
            # 2. the frame, a band of rows at a time (flat loops over the band: long, contiguous,
            #    without per-row remainders): its centre tap, column strips (one vertical filter,
            #    used at +-offset) and row strips (one horizontal filter of the sum of the rows
            #    at +-offset)
            _frame_band(flat, (y0 + pad) * wp, wp, pad, nb, fcentre[0], coff, clen, cw, roff, rlen, rw, lineb, frb)
            for y in range(y0, y0 + nb):
                # 3. the Gaussian: vertical (with the disk value), then horizontal; symmetric pairs
                c0 = dsum[y + half]
                w0 = g64[half] * dval
                for x in range(ew):
                    tmp[x] = c0[x] * w0
                for s in range(1, half + 1):
                    a = dsum[y + half - s]
                    b = dsum[y + half + s]
                    ws = g64[half + s] * dval
                    for x in range(ew):
                        tmp[x] += (np.float64(a[x]) + np.float64(b[x])) * ws
                o = row64
                mid = tmp[half : half + nw]
                w0 = g64[half]
                for x in range(nw):
                    o[x] = mid[x] * w0
                for s in range(1, half + 1):
                    lo = tmp[half - s : half - s + nw]
                    hi = tmp[half + s : half + s + nw]
                    ws = g64[half + s]
                    for x in range(nw):
                        o[x] += (lo[x] + hi[x]) * ws
                fr = frb[(y - y0) * wp : (y - y0) * wp + nw]
                dst = out[p, y]
                # 4. to the reference's scale, counting values next to a level boundary
                near = np.int32(0)
                for x in range(nw):
                    v = min(max((o[x] + np.float64(fr[x])) * inv, 0.0), 1.0) * 255.0
                    lv = np.int32(v)  # 0 <= v <= 255: truncation is floor, and vectorises
                    frac = v - np.float64(lv)
                    near += np.int32((frac < margin) | (frac > 1.0 - margin))
                    o[x] = v
                    dst[x] = v  # truncates where ``out`` holds levels
                if near > 0:
                    # 5. those values exactly: the reference's taps on x / 255 in float64
                    for x in range(nw):
                        v = o[x]
                        frac = v - np.float64(np.int32(v))
                        if (frac < margin or frac > 1.0 - margin) and 0.0 < v < 255.0:
                            t = 0.0
                            for i in range(tw.shape[0]):
                                t += tw[i] * (np.float64(plane[y + tdy[i], x + tdx[i]]) / 255.0)
                            dst[x] = min(max(t, 0.0), 1.0) * 255.0
                            repaired += 1
    return repaired
