"""Compiled Gaussian filtering along one axis for short kernels (CPU, float64).

``gaussian_filter2d`` applies SciPy's separable Gaussian as dense n x n operator
matrices, which suits wide kernels and GPUs. When the kernel is short next to the
image (elastic transform at sigma 2.44 with truncate 3: 15 taps on 224 px), a direct
correlation is several times cheaper. It adds the terms in SciPy's order for symmetric
kernels: centre tap first, then each mirrored pair ``(x[i - t] + x[i + t]) * w[t]`` from
the outermost pair inwards.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def filter_rows(x: np.ndarray, idx: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
    """Along axis 1 of B x H x W: ``idx`` (H + 2r) maps padded rows to source rows, ``w`` = taps 0..r."""
    nb, nh, nw = x.shape
    r = w.shape[0] - 1
    w0 = w[0]
    for b in range(nb):
        xb = x[b]
        for i in range(nh):
            o = out[b, i]
            xc = xb[idx[i + r]]
            for j in range(nw):
                o[j] = xc[j] * w0
            for t in range(r, 0, -1):
                xl = xb[idx[i + r - t]]
                xh = xb[idx[i + r + t]]
                wt = w[t]
                for j in range(nw):
                    o[j] += (xl[j] + xh[j]) * wt


@numba.njit(cache=True, nogil=True)
def filter_cols(x: np.ndarray, idx: np.ndarray, w: np.ndarray, out: np.ndarray) -> None:
    """Along axis 2 of B x H x W: ``idx`` (W + 2r) maps padded columns to source columns."""
    nb, nh, nw = x.shape
    r = w.shape[0] - 1
    line = np.empty(nw + 2 * r, dtype=np.float64)
    w0 = w[0]
    for b in range(nb):
        for i in range(nh):
            xi = x[b, i]
            o = out[b, i]
            for k in range(nw + 2 * r):
                line[k] = xi[idx[k]]
            for j in range(nw):
                o[j] = line[j + r] * w0
            for t in range(r, 0, -1):
                wt = w[t]
                lo = line[r - t : r - t + nw]
                hi = line[r + t : r + t + nw]
                for j in range(nw):
                    o[j] += (lo[j] + hi[j]) * wt


def symmetric_tap_groups(k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Non-zero taps of an odd square kernel grouped by weight under the mirror symmetries it has.

    Returns (weights, counts, dy, dx): group g has ``counts[g]`` (1, 2 or 4) offsets in
    ``dy/dx[4g : 4g + counts[g]]`` (relative to the top-left of the window) that share ``weights[g]``.
    """
    kk = np.asarray(k, dtype=np.float64)
    n = kk.shape[0]
    sym_r = bool(np.array_equal(kk, kk[::-1]))
    sym_c = bool(np.array_equal(kk, kk[:, ::-1]))
    seen = np.zeros(kk.shape, dtype=bool)
    weights: list[float] = []
    counts: list[int] = []
    dys: list[int] = []
    dxs: list[int] = []
    for i in range(n):
        for j in range(n):
            if seen[i, j] or kk[i, j] == 0.0:
                continue
            orbit = {(i, j)}
            if sym_r:
                orbit.add((n - 1 - i, j))
            if sym_c:
                orbit |= {(a, n - 1 - b) for a, b in orbit}
            members = sorted(orbit)
            for a, b in members:
                seen[a, b] = True
            weights.append(kk[i, j])
            counts.append(len(members))
            pad = members + [members[0]] * (4 - len(members))
            dys.extend(a for a, _ in pad)
            dxs.extend(b for _, b in pad)
    return (np.array(weights), np.array(counts, dtype=np.int64), np.array(dys, dtype=np.int64), np.array(dxs, dtype=np.int64))


@numba.njit(cache=True, nogil=True)
def pad_planes(x: np.ndarray, ridx: np.ndarray, cidx: np.ndarray) -> np.ndarray:
    """Planes P x H x W padded through index tables (``extend_index`` of -r .. n + r - 1)."""
    npl = x.shape[0]
    xp = np.empty((npl, ridx.shape[0], cidx.shape[0]), dtype=x.dtype)
    for p in range(npl):
        for a in range(ridx.shape[0]):
            src = x[p, ridx[a]]
            dst = xp[p, a]
            for b in range(cidx.shape[0]):
                dst[b] = src[cidx[b]]
    return xp


@numba.njit(cache=True, nogil=True)
def correlate_taps(
    xp: np.ndarray, weights: np.ndarray, counts: np.ndarray, dy: np.ndarray, dx: np.ndarray, out: np.ndarray
) -> None:
    """Direct 2-D correlation of padded planes xp (P x (H + 2r) x (W + 2r)) into out (P x H x W).

    Rows are taken as slices starting at index 0, so the inner loops vectorise.
    """
    npl, nh, nw = out.shape
    for p in range(npl):
        for i in range(nh):
            o = out[p, i]
            o[:] = 0.0
            for g in range(weights.shape[0]):
                wt = weights[g]
                c = counts[g]
                b = 4 * g
                r0 = xp[p, i + dy[b]][dx[b] : dx[b] + nw]
                if c == 4:
                    r1 = xp[p, i + dy[b + 1]][dx[b + 1] : dx[b + 1] + nw]
                    r2 = xp[p, i + dy[b + 2]][dx[b + 2] : dx[b + 2] + nw]
                    r3 = xp[p, i + dy[b + 3]][dx[b + 3] : dx[b + 3] + nw]
                    for j in range(nw):
                        o[j] += ((r0[j] + r1[j]) + (r2[j] + r3[j])) * wt
                elif c == 2:
                    r1 = xp[p, i + dy[b + 1]][dx[b + 1] : dx[b + 1] + nw]
                    for j in range(nw):
                        o[j] += (r0[j] + r1[j]) * wt
                else:
                    for j in range(nw):
                        o[j] += r0[j] * wt


@numba.njit(cache=True, nogil=True)
def pad_plane_f32(x: np.ndarray, ridx: np.ndarray, cidx: np.ndarray, dst: np.ndarray) -> None:
    """One plane (H x W, any real dtype) as float32 into ``dst``, padded through index tables
    (``extend_index`` of -r .. n + r - 1): the interior of each row is a contiguous copy."""
    nw = x.shape[1]
    r = (cidx.shape[0] - nw) // 2
    for a in range(ridx.shape[0]):
        src = x[ridx[a]]
        d = dst[a]
        for b in range(nw):
            d[r + b] = np.float32(src[b])
        for b in range(r):
            d[b] = np.float32(src[cidx[b]])
            d[r + nw + b] = np.float32(src[cidx[r + nw + b]])


@numba.njit(cache=True, nogil=True)
def clip_scale(y: np.ndarray, hi: float, scale: float) -> None:
    """In place: ``y = clip(y, 0, hi) * scale``."""
    f = y.reshape(-1)
    h = f.dtype.type(hi)
    sc = f.dtype.type(scale)
    z = f.dtype.type(0.0)
    for i in range(f.shape[0]):
        f[i] = min(max(f[i], z), h) * sc


# Dense filtering with a centrosymmetric operator A (A[n-1-i, n-1-j] == A[i, j], as every Gaussian of a symmetric
# boundary mode is): with m = n // 2 and k = n - m, the half sums s = x[:m] + x[::-1][:m] (and the middle sample
# of an odd side) meet the k x k matrix P, the half differences d = x[:m] - x[::-1][:m] the m x m matrix M, and
# y[i] = (P s)[i] + (M d)[i], y[n-1-i] = (P s)[i] - (M d)[i] (y[m] = (P s)[m] for odd n): the products of A x
# with half the multiplications. The matrices come from :func:`symmetric_halves`; the products run as torch
# matrix products between the folds below (``corruptions._ops``).


def symmetric_halves(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P, M) of a centrosymmetric n x n matrix A (see above); P is k x k (k = n - n // 2), M is m x m."""
    n = a.shape[0]
    m = n // 2
    k = n - m
    refl = a[:m, n - m :][:, ::-1]  # A[i, n-1-j] for i, j < m
    p = np.empty((k, k))
    p[:m, :m] = (a[:m, :m] + refl) * 0.5
    if k > m:  # the middle sample of an odd side: its column and row enter P whole
        p[:m, m] = a[:m, m]
        p[m, :m] = a[m, :m]
        p[m, m] = a[m, m]
    return p, np.ascontiguousarray((a[:m, :m] - refl) * 0.5)


@numba.njit(cache=True, nogil=True, inline="always")
def _sum_diff(a, b, total, diff):
    """``total = a + b`` and ``diff = a - b``, element by element (1-D)."""
    for j in range(a.shape[0]):
        total[j] = a[j] + b[j]
        diff[j] = a[j] - b[j]


@numba.njit(cache=True, nogil=True)
def fold_rows(x, s, d):
    """Half sums ``s`` (k x W) and differences ``d`` (m x W) of the rows of one plane x (H x W)."""
    n, m = x.shape[0], d.shape[0]
    for i in range(m):
        _sum_diff(x[i], x[n - 1 - i], s[i], d[i])
    if s.shape[0] > m:
        s[m, :] = x[m]


@numba.njit(cache=True, nogil=True)
def unfold_rows_fold_cols(p, q, t, s, d):
    """The rows of ``t`` (H x W) from the products p = P s and q = M d, then the half sums ``s`` (H x k)
    and differences ``d`` (H x m) of its columns."""
    n, m = t.shape[0], q.shape[0]
    for i in range(m):
        _sum_diff(p[i], q[i], t[i], t[n - 1 - i])
    if p.shape[0] > m:
        t[m, :] = p[m]
    n, m = t.shape[1], d.shape[1]
    for i in range(t.shape[0]):
        ti, si, di = t[i], s[i], d[i]
        for j in range(m):
            a_, b_ = ti[j], ti[n - 1 - j]
            si[j] = a_ + b_
            di[j] = a_ - b_
        if s.shape[1] > m:
            si[m] = ti[m]


@numba.njit(cache=True, nogil=True)
def unfold_cols(p, q, y):
    """The columns of ``y`` (H x W) from the products p = s P^T (H x k) and q = d M^T (H x m)."""
    n, m = y.shape[1], q.shape[1]
    for i in range(y.shape[0]):
        yi, pi, qi = y[i], p[i], q[i]
        for j in range(m):
            yi[j] = pi[j] + qi[j]
            yi[n - 1 - j] = pi[j] - qi[j]
        if p.shape[1] > m:
            yi[m] = pi[m]
