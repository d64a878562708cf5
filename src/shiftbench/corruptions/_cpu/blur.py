"""Compiled CPU kernels of the blur corruptions (:mod:`..blur`): SciPy's Gaussian, glass blur, zoom blur.

* :func:`gauss_planes` / :func:`gaussian_blur_kernel`: ``scipy.ndimage.gaussian_filter`` (mode
  ``nearest``) as SciPy's ``correlate1d`` steps in SciPy's order, float64.
* :func:`shuffle_batch` / :func:`glass_kernel`: glass blur's sequential pixel-copy loop, and the whole
  corruption (Gaussian, 8-bit truncation, shuffle, Gaussian) image by image.
* :func:`zoom_kernel`: zoom blur's average of the image and its clipped zooms, float32.

Every kernel takes the images ``start..end-1`` of a batch (threads split a batch by images) and
releases the GIL.
"""

from __future__ import annotations

import numba
import numpy as np

from ...rng.pcg64 import draw_bounded, pcg_output, pcg_step
from .transpose import transpose4

__all__ = ["gauss_planes", "gaussian_blur_kernel", "shuffle_batch", "glass_kernel", "glass_kernel_for", "zoom_kernel"]


@numba.njit(cache=True, nogil=True, inline="always")
def _pair_axpy(dst, a, b, wj):
    for j in range(dst.shape[0]):
        dst[j] += (a[j] + b[j]) * wj


@numba.njit(cache=True, nogil=True, inline="always")
def _scale_into(dst, src, w0):
    for j in range(dst.shape[0]):
        dst[j] = src[j] * w0


@numba.njit(cache=True, nogil=True)
def _gauss_plane(src, w, tmp, line, dst):
    # scipy.ndimage.correlate1d (symmetric weights, mode 'nearest') along
    # axis 0 then axis 1: out = in*w0, then += (left_j + right_j) * w_j for j = r..1
    h, wd = src.shape
    r = w.shape[0] - 1
    for y in range(h):
        trow = tmp[y]
        _scale_into(trow, src[y], w[0])
        for j in range(r, 0, -1):
            _pair_axpy(trow, src[max(y - j, 0)], src[min(y + j, h - 1)], w[j])
    for y in range(h):
        trow = tmp[y]
        for j in range(r):
            line[j] = trow[0]
            line[r + wd + j] = trow[wd - 1]
        line[r : r + wd] = trow
        orow = dst[y]
        _scale_into(orow, line[r : r + wd], w[0])
        for j in range(r, 0, -1):
            _pair_axpy(orow, line[r - j : r - j + wd], line[r + j : r + j + wd], w[j])


@numba.njit(cache=True, nogil=True)
def gauss_planes(x, w, start, end, out):
    h, wd = x.shape[1], x.shape[2]
    tmp = np.empty((h, wd))
    line = np.empty(wd + 2 * (w.shape[0] - 1))
    for p in range(start, end):
        _gauss_plane(x[p], w, tmp, line, out[p])


@numba.njit(cache=True, nogil=True)
def gaussian_blur_kernel(x, w, start, end, out):
    nc, h, wd = x.shape[1], x.shape[2], x.shape[3]
    u = np.empty((h, wd))
    g = np.empty((h, wd))
    tmp = np.empty((h, wd))
    line = np.empty(wd + 2 * (w.shape[0] - 1))
    for b in range(start, end):
        for c in range(nc):
            u[:, :] = x[b, c]
            u /= 255.0
            _gauss_plane(u, w, tmp, line, g)
            o = out[b, c]
            for y in range(h):
                for i in range(wd):
                    o[y, i] = min(max(g[y, i], 0.0), 1.0) * 255.0


@numba.njit(cache=True, nogil=True)
def _shuffle(u, off, delta):
    # u: C x H x W; off: iters x n_h x n_w x 2 (dx, dy) in draw order
    nc, h, wd = u.shape
    iters, n_h, n_w = off.shape[0], off.shape[1], off.shape[2]
    for it in range(iters):
        for hi in range(n_h):
            row = h - delta - hi
            for wi in range(n_w):
                col = wd - delta - wi
                sy = row + off[it, hi, wi, 1]
                sx = col + off[it, hi, wi, 0]
                for c in range(nc):
                    u[c, row, col] = u[c, sy, sx]


@numba.njit(cache=True, nogil=True)
def shuffle_batch(u, off, delta, start, end):
    for b in range(start, end):
        _shuffle(u[b], off[b], delta)


@numba.njit(cache=True, nogil=True)
def _shuffle_packed(q, off, delta):
    # _shuffle on H x W pixels whose channels are packed into one word each: one copy per pixel
    h, wd = q.shape
    iters, n_h, n_w = off.shape[0], off.shape[1], off.shape[2]
    flat = q.reshape(h * wd)
    for it in range(iters):
        for hi in range(n_h):
            row = h - delta - hi
            orow = off[it, hi]
            for wi in range(n_w):
                dst = row * wd + wd - delta - wi
                # unsigned indices (every source lies inside the image): no negative-index wraparound
                flat[np.uint64(dst)] = flat[np.uint64(dst + np.int64(orow[wi, 1]) * wd + orow[wi, 0])]


@numba.njit(cache=True, nogil=True, inline="always")
def _gauss_row(src, y, w, line, out, k):
    # row y of _gauss_plane(src) into out, from src alone: the axis-0 pass of row y into the middle of
    # line, its edges replicated r times on each side, then the axis-1 pass of line. k: the radius
    # where known when compiled (each output summed in a register over its unrolled taps, r..1 after
    # the centre as SciPy adds them: the same operations in the same order, so the same values, and the
    # loop over the row vectorises around the taps), 0: any radius
    # (r = w.shape[0] - 1, tap by tap over the row as in _gauss_plane)
    h, wd = src.shape
    r = k if k > 0 else w.shape[0] - 1
    w0 = w[0]
    mid = line[r : r + wd]
    if k > 0:
        c = src[y]
        for i in range(wd):
            acc = c[i] * w0
            for j in range(k, 0, -1):
                acc += (src[max(y - j, 0), i] + src[min(y + j, h - 1), i]) * w[j]
            mid[i] = acc
    else:
        _scale_into(mid, src[y], w0)
        for j in range(r, 0, -1):
            _pair_axpy(mid, src[max(y - j, 0)], src[min(y + j, h - 1)], w[j])
    for j in range(r):
        line[j] = mid[0]
        line[r + wd + j] = mid[wd - 1]
    if k > 0:
        for i in range(wd):
            acc = line[k + i] * w0
            for j in range(k, 0, -1):
                acc += (line[k - j + i] + line[k + j + i]) * w[j]
            out[i] = acc
    else:
        _scale_into(out, mid, w0)
        for j in range(r, 0, -1):
            _pair_axpy(out, line[r - j : r - j + wd], line[r + j : r + j + wd], w[j])


@numba.njit(cache=True, nogil=True, inline="always")
def _shuffle_words(q, delta, iters, lanes, jump, wb):
    # _shuffle_drawn where 2 d is a power of two 2**bits: Lemire's method then rejects no draw, so
    # each pixel takes one word of the stream, (dx, dy) = the top bits of its low and high halves,
    # minus d. The four lanes run in the loop, word by word as the pixels use them, so that the
    # stream's multiplications overlap the copies.
    h, wd = q.shape
    n_h, n_w = h - 2 * delta, wd - 2 * delta
    bits = 0
    while (1 << bits) < 2 * delta:
        bits += 1
    sx = np.uint64(32 - bits)
    sy = np.uint64(64 - bits)
    low = np.uint64(0xFFFFFFFF)
    m_hi, m_lo, i_hi, i_lo = jump[0], jump[1], jump[2], jump[3]
    flat = q.reshape(h * wd)
    back = np.uint64(delta * wd + delta)  # (dy, dx) = (-d, -d) as a flat offset
    slot = 4
    for _ in range(iters):
        for hi in range(n_h):
            row = h - delta - hi
            for wi in range(n_w):
                if slot == 4:
                    for k in range(4):
                        wb[k] = pcg_output(lanes[k, 0], lanes[k, 1])
                        lanes[k, 0], lanes[k, 1] = pcg_step(lanes[k, 0], lanes[k, 1], m_hi, m_lo, i_hi, i_lo)
                    slot = 0
                word = wb[slot]
                slot += 1
                dst = np.uint64(row * wd + wd - delta - wi)
                # unsigned indices: every source lies inside the image
                flat[dst] = flat[dst + (word >> sy) * np.uint64(wd) + ((word & low) >> sx) - back]


@numba.njit(cache=True, nogil=True, inline="always")
def _shuffle_drawn(q, delta, iters, lanes, jump, words, at, row_off):
    # _shuffle_packed on the offsets the sampler would draw, drawn from the stream of (lanes, jump)
    # as (dx, dy) pairs in the sampler's order: as the pixels use them where 2 d is a power of two
    # (_shuffle_words), else a row at a time
    h, wd = q.shape
    n_h, n_w = max(0, h - 2 * delta), max(0, wd - 2 * delta)
    if n_h == 0 or n_w == 0:
        return
    if delta & (delta - 1) == 0:
        _shuffle_words(q, delta, iters, lanes, jump, words)
        return
    at[0] = 0
    at[1] = 0
    rng = np.uint32(2 * delta - 1)  # randint(-d, d): -d..d-1
    low = np.int64(-delta)
    pairs = row_off[: 2 * n_w]
    flat = q.reshape(h * wd)
    for _ in range(iters):
        for hi in range(n_h):
            row = h - delta - hi
            draw_bounded(words, at, lanes, jump, rng, low, pairs)
            for wi in range(n_w):
                dst = row * wd + wd - delta - wi
                # unsigned indices (every source lies inside the image): no negative-index wraparound
                flat[np.uint64(dst)] = flat[np.uint64(dst + np.int64(pairs[2 * wi + 1]) * wd + pairs[2 * wi])]


@numba.njit(cache=True, nogil=True, inline="always")
def _glass_body(x, w, off, delta, iters, lanes, jump, start, end, out, k):
    # the offsets: off[b] where off holds images (sampled draws), else drawn from the stream lanes[b], jump[b]
    nc, h, wd = x.shape[1], x.shape[2], x.shape[3]
    u = np.empty((h, wd))
    g = np.empty(wd)
    line = np.empty(wd + 2 * (w.shape[0] - 1))
    # the 8-bit levels after the first blur, the channels of a pixel packed into one word, so
    # that each of the shuffle's sequential copies moves one word
    q = np.empty((h, wd), dtype=np.uint32)
    words = np.empty(wd + 64, dtype=np.uint64)
    at = np.zeros(2, dtype=np.int64)
    row_off = np.empty(2 * wd, dtype=np.int8)
    for b in range(start, end):
        for c in range(nc):
            xc = x[b, c]
            for y in range(h):  # x / 255 in float64 (explicit loops: numba's slice assignment is slower)
                xy = xc[y]
                uy = u[y]
                for i in range(wd):
                    uy[i] = np.float64(xy[i]) / 255.0
            sh = np.uint32(8 * c)
            for y in range(h):
                _gauss_row(u, y, w, line, g, k)
                qy = q[y]
                if c == 0:
                    for i in range(wd):
                        qy[i] = np.uint32(min(max(np.trunc(g[i] * 255.0), 0.0), 255.0))  # np.uint8(...)
                else:
                    for i in range(wd):
                        qy[i] |= np.uint32(min(max(np.trunc(g[i] * 255.0), 0.0), 255.0)) << sh
        if off.shape[0] > 0:
            _shuffle_packed(q, off[b], delta)
        else:
            _shuffle_drawn(q, delta, iters, lanes[b], jump[b], words, at, row_off)
        for c in range(nc):
            sh = np.uint32(8 * c)
            for y in range(h):
                qy = q[y]
                uy = u[y]
                for i in range(wd):
                    uy[i] = np.float64((qy[i] >> sh) & np.uint32(255)) / 255.0
            o = out[b, c]
            for y in range(h):
                _gauss_row(u, y, w, line, g, k)
                oy = o[y]
                for i in range(wd):
                    oy[i] = min(max(g[i], 0.0), 1.0) * 255.0


@numba.njit(cache=True, nogil=True)
def glass_kernel(x, w, off, delta, iters, lanes, jump, start, end, out):
    """Glass blur of images start..end-1 (any radius; more than four channels: plane by plane, sampled
    offsets only). The offsets: ``off`` (images x iters x (H-2d) x (W-2d) x 2, the sampler's draws) or,
    where ``off`` holds no image, drawn here from the stream of each image (``lanes[b]``, ``jump[b]``:
    :func:`~shiftbench.rng.pcg64.word_lanes`) exactly as the sampler draws them."""
    if x.shape[1] > 4:
        _glass_kernel_planes(x, w, off, delta, start, end, out)
        return
    _glass_body(x, w, off, delta, iters, lanes, jump, start, end, out, 0)


@numba.njit(cache=True, nogil=True)
def _glass_kernel_3(x, w, off, delta, iters, lanes, jump, start, end, out):
    _glass_body(x, w, off, delta, iters, lanes, jump, start, end, out, 3)


@numba.njit(cache=True, nogil=True)
def _glass_kernel_4(x, w, off, delta, iters, lanes, jump, start, end, out):
    _glass_body(x, w, off, delta, iters, lanes, jump, start, end, out, 4)


@numba.njit(cache=True, nogil=True)
def _glass_kernel_5(x, w, off, delta, iters, lanes, jump, start, end, out):
    _glass_body(x, w, off, delta, iters, lanes, jump, start, end, out, 5)


@numba.njit(cache=True, nogil=True)
def _glass_kernel_6(x, w, off, delta, iters, lanes, jump, start, end, out):
    _glass_body(x, w, off, delta, iters, lanes, jump, start, end, out, 6)


_GLASS_BY_RADIUS = {3: _glass_kernel_3, 4: _glass_kernel_4, 5: _glass_kernel_5, 6: _glass_kernel_6}


def glass_kernel_for(radius: int, channels: int):
    """The glass kernel for a Gaussian of ``radius`` (ImageNet-C's sigmas 0.7 to 1.5: radii 3 to 6) on
    images of ``channels`` channels: one compiled for that radius where there is one, else the general one."""
    if channels <= 4 and radius in _GLASS_BY_RADIUS:
        return _GLASS_BY_RADIUS[radius]
    return glass_kernel


@numba.njit(cache=True, nogil=True)
def _glass_kernel_planes(x, w, off, delta, start, end, out):
    # glass_kernel for images of more than four channels: the shuffle copies the value of each plane
    nc, h, wd = x.shape[1], x.shape[2], x.shape[3]
    u = np.empty((h, wd))
    g = np.empty((h, wd))
    tmp = np.empty((h, wd))
    line = np.empty(wd + 2 * (w.shape[0] - 1))
    q = np.empty((nc, h, wd))
    for b in range(start, end):
        for c in range(nc):
            u[:, :] = x[b, c]
            u /= 255.0
            _gauss_plane(u, w, tmp, line, g)
            qc = q[c]
            for y in range(h):
                for i in range(wd):
                    qc[y, i] = min(max(np.trunc(g[y, i] * 255.0), 0.0), 255.0)  # np.uint8(...)
        _shuffle(q, off[b], delta)
        for c in range(nc):
            u[:, :] = q[c]
            u /= 255.0
            _gauss_plane(u, w, tmp, line, g)
            o = out[b, c]
            for y in range(h):
                for i in range(wd):
                    o[y, i] = min(max(g[y, i], 0.0), 1.0) * 255.0


_ZOOM_ROWS = 32  # output rows per block of the compiled zoom blur (a multiple of 4)


@numba.njit(cache=True, nogil=True, inline="always")
def _lerp_row32(dst, a, b, t):
    # a + (b - a) t in float64 of float32 values
    for j in range(dst.shape[0]):
        aj = np.float64(a[j])
        dst[j] = aj + (np.float64(b[j]) - aj) * t


@numba.njit(cache=True, nogil=True, inline="always")
def _lerp_acc32(dst, a, b, t):
    for j in range(dst.shape[0]):
        dst[j] += np.float32(a[j] + (b[j] - a[j]) * t)


@numba.njit(cache=True, nogil=True, inline="always")
def _transpose_block(src, si, dst, ni, nj):
    # dst[j, i] = src[si + i, j] for i < ni, j < nj (multiples of 4), in 4 x 4 tiles
    for j0 in range(0, nj, 4):
        for i0 in range(0, ni, 4):
            transpose4(src, si + i0, j0, dst, j0, i0)


@numba.njit(cache=True, nogil=True)
def zoom_kernel(x, levels_in, ri0, ri1, rt, ci0, ci1, ct, ident, start, end, out):
    # x: B x C x H x W 8-bit levels (levels_in) or float values (0..255); out: float32 values or uint8
    # levels (truncated). Per zoom z the rows are interpolated with (ri0, ri1, rt)[z] and the columns
    # with (ci0, ci1, ct)[z] as a + (b - a) t in float64; each zoomed value is rounded to float32 and
    # accumulated in float32 in the list order, as the reference does. The image is worked through in
    # blocks of _ZOOM_ROWS output rows held column-major (W x rows), so that the column pass
    # interpolates whole columns of the block with one weight; 4 x 4 transposes move the row-
    # interpolated block, the image block and the result between the layouts.
    nc, h, wd = x.shape[1], x.shape[2], x.shape[3]
    nz = ri0.shape[0]
    rows = _ZOOM_ROWS
    wp = -(-wd // 4) * 4  # widths padded to whole tiles; the padding is never written out
    x32 = np.zeros((-(-h // rows) * rows, wp), dtype=np.float32)  # x / 255 in float32, rows past the image zero
    row_blk = np.empty((rows, wp))
    t_blk = np.empty((wp, rows))
    x_blk = np.empty((wp, rows), dtype=np.float32)
    acc = np.empty((wp, rows), dtype=np.float32)
    res = np.empty((rows, wp), dtype=np.float32)
    src0 = np.empty(rows, dtype=np.int64)
    src1 = np.empty(rows, dtype=np.int64)
    wt = np.empty(rows)
    inv255 = 1.0 / 255.0  # float32(v * inv255) == float32(v / 255) for every level v (checked once, exhaustively)
    denom = np.float32(nz + 1)
    one = np.float32(1.0)
    zero = np.float32(0.0)
    scale = np.float32(255.0)
    for b in range(start, end):
        for c in range(nc):
            xc = x[b, c]
            for y in range(h):
                xy = xc[y]
                x32y = x32[y]
                if levels_in:
                    for i in range(wd):
                        x32y[i] = np.float32(np.float64(xy[i]) * inv255)
                else:
                    for i in range(wd):
                        x32y[i] = np.float32(np.float64(xy[i]) / 255.0)
            o = out[b, c]
            for y0 in range(0, h, rows):
                _transpose_block(x32, y0, x_blk, rows, wp)
                acc[:, :] = 0.0
                for z in range(nz):
                    if ident[z]:
                        for i in range(wd):
                            ai = acc[i]
                            xi = x_blk[i]
                            for r in range(rows):
                                ai[r] += xi[r]
                        continue
                    lo = ci0[z, 0]
                    n = ci1[z, wd - 1] + 1 - lo
                    for r in range(rows):  # rows past the image repeat its last row (never written out)
                        y = min(y0 + r, h - 1)
                        src0[r] = ri0[z, y]
                        src1[r] = ri1[z, y]
                        wt[r] = rt[z, y]
                    for r in range(rows):
                        _lerp_row32(row_blk[r, :n], x32[src0[r], lo : lo + n], x32[src1[r], lo : lo + n], wt[r])
                    _transpose_block(row_blk, 0, t_blk, rows, n + (-n) % 4)
                    for i in range(wd):
                        _lerp_acc32(acc[i], t_blk[ci0[z, i] - lo], t_blk[ci1[z, i] - lo], ct[z, i])
                for i in range(wp):
                    ai = acc[i]
                    xi = x_blk[i]
                    for r in range(rows):
                        ai[r] = min(max((xi[r] + ai[r]) / denom, zero), one) * scale
                _transpose_block(acc, 0, res, wp, rows)
                for r in range(min(rows, h - y0)):
                    oy = o[y0 + r]
                    ry = res[r]
                    for i in range(wd):
                        oy[i] = ry[i]
