"""Pillow's 8-bit BOX resampling as compiled passes over channel planes (CPU).

The arithmetic is that of :func:`~shiftbench.corruptions.digital.pillow_box_resize` (Pillow's
``Resample.c``: fixed-point weights with 22 fraction bits, ``(2**21 + sum) >> 22`` clipped to
0..255, the horizontal pass first, then the vertical pass on its 8-bit result), with each
pass's taps stored compactly (only non-zero weights). A pass whose taps are all single with
weight 1 (Pillow's BOX filter when enlarging) is a pure gather. Passes by a whole factor have
their own kernels, compiled per factor (checked against the tap tables before use).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numba
import numpy as np

from ...rng.simd import wide_vectors
from .._resample import PRECISION_BITS, box_coefficients
from .transpose import transpose_into


class Taps(NamedTuple):
    start: np.ndarray  # per output: first tap (uintp, length out + 1)
    source: np.ndarray  # input index per tap (uintp; not "index", which would hide tuple.index)
    weight: np.ndarray  # fixed-point weight per tap (int32)
    gather: bool  # every output has one tap of weight 1 << 22
    dense_index: np.ndarray  # out x K: the taps padded to a fixed count K (weight 0, index of tap 0)
    dense_weight: np.ndarray  # out x K (int32)


@lru_cache(maxsize=256)
def box_taps(in_size: int, out_size: int) -> Taps:
    idx, wts = box_coefficients(in_size, out_size)
    start = [0]
    index: list[int] = []
    weight: list[int] = []
    for i in range(out_size):
        for t in range(idx.shape[1]):
            if wts[i, t] != 0:
                index.append(int(idx[i, t]))
                weight.append(int(wts[i, t]))
        start.append(len(index))
    st = np.array(start, dtype=np.uintp)  # unsigned: indexing with them needs no wrap-around check
    wt = np.array(weight, dtype=np.int32)
    gather = bool(np.all(np.diff(st.astype(np.int64)) == 1) and np.all(wt == 1 << PRECISION_BITS))
    counts = np.diff(st.astype(np.int64))
    k = max(1, int(counts.max()))
    dense_index = np.zeros((out_size, k), dtype=np.uintp)
    dense_weight = np.zeros((out_size, k), dtype=np.int32)
    for i in range(out_size):
        a, n = int(st[i]), int(counts[i])
        dense_index[i, :] = index[a] if n else 0
        dense_index[i, :n] = index[a : a + n]
        dense_weight[i, :n] = weight[a : a + n]
    return Taps(st, np.array(index, dtype=np.uintp), wt, gather, dense_index, dense_weight)


@numba.njit(cache=True, nogil=True, inline="always")
def _level(acc):
    """A pass's fixed-point sum (the half already added) as Pillow's 8-bit level: shifted, clipped to 0..255."""
    v = acc >> PRECISION_BITS
    return 0 if v < 0 else (255 if v > 255 else v)


@numba.njit(cache=True, nogil=True)
def _rows_pass(src: np.ndarray, index: np.ndarray, weight: np.ndarray, gather: bool, dst: np.ndarray) -> None:
    """Along the last axis: planes P x H x Win (uint8) -> P x H x Wout. ``index``/``weight``: the
    dense out x K tables (every output takes K taps, padded with weight 0: no data-dependent
    branch per output)."""
    wide_vectors()
    npl, nh, _ = src.shape
    nout = dst.shape[2]
    k = index.shape[1]
    half = np.int32(1 << (PRECISION_BITS - 1))
    for p in range(npl):
        for y in range(nh):
            s = src[p, y]
            d = dst[p, y]
            if gather:
                for i in range(nout):
                    d[i] = s[index[i, 0]]
                continue
            for i in range(nout):
                acc = half
                for t in range(k):
                    acc += np.int32(s[index[i, t]]) * weight[i, t]
                d[i] = _level(acc)


@numba.njit(cache=True, nogil=True)
def _cols_pass(src: np.ndarray, start: np.ndarray, index: np.ndarray, weight: np.ndarray, gather: bool, dst: np.ndarray) -> None:
    """Along the middle axis: planes P x Hin x W (uint8) -> P x Hout x W, whole rows at a time."""
    wide_vectors()
    npl, _, nw = src.shape
    nout = dst.shape[1]
    acc = np.empty(nw, dtype=np.int32)
    half = np.int32(1 << (PRECISION_BITS - 1))
    for p in range(npl):
        for i in range(nout):
            d = dst[p, i]
            if gather:
                s = src[p, index[i]]
                for x in range(nw):
                    d[x] = s[x]
                continue
            for x in range(nw):
                acc[x] = half
            for t in range(start[i], start[i + 1]):
                s = src[p, index[t]]
                w = weight[t]
                for x in range(nw):
                    acc[x] += np.int32(s[x]) * w
            for x in range(nw):
                d[x] = _level(acc[x])


@numba.njit(cache=True, nogil=True, inline="always")
def _reduce_rows_k(src: np.ndarray, wts: np.ndarray, k: int, dst: np.ndarray) -> None:
    """Along the last axis by a whole factor ``k``: output i sums inputs k*i .. k*i + k - 1 with the
    weights ``wts`` (the same for every output). With ``k`` a compile-time constant the strided loads
    vectorise, so no transpose is needed."""
    wide_vectors()
    npl, nh, _ = src.shape
    nout = dst.shape[2]
    half = np.int32(1 << (PRECISION_BITS - 1))
    for p in range(npl):
        for y in range(nh):
            s = src[p, y]
            d = dst[p, y]
            for i in range(nout):
                acc = half
                for t in range(k):
                    acc += np.int32(s[k * i + t]) * wts[t]
                d[i] = _level(acc)


@numba.njit(cache=True, nogil=True)
def _reduce_rows_2(src: np.ndarray, wts: np.ndarray, dst: np.ndarray) -> None:
    _reduce_rows_k(src, wts, 2, dst)


@numba.njit(cache=True, nogil=True)
def _reduce_rows_3(src: np.ndarray, wts: np.ndarray, dst: np.ndarray) -> None:
    _reduce_rows_k(src, wts, 3, dst)


@numba.njit(cache=True, nogil=True)
def _reduce_rows_4(src: np.ndarray, wts: np.ndarray, dst: np.ndarray) -> None:
    _reduce_rows_k(src, wts, 4, dst)


_REDUCE_K = {2: _reduce_rows_2, 3: _reduce_rows_3, 4: _reduce_rows_4}


@numba.njit(cache=True, nogil=True, inline="always")
def _expand_rows_k(src: np.ndarray, k: int, dst: np.ndarray) -> None:
    """Along the last axis by a whole factor ``k``: output k*i + t is input i (enlarging BOX)."""
    wide_vectors()
    npl, nh, nin = src.shape
    for p in range(npl):
        for y in range(nh):
            s = src[p, y]
            d = dst[p, y]
            for i in range(nin):
                v = s[i]
                for t in range(k):
                    d[k * i + t] = v


@numba.njit(cache=True, nogil=True)
def _expand_rows_2(src: np.ndarray, dst: np.ndarray) -> None:
    _expand_rows_k(src, 2, dst)


@numba.njit(cache=True, nogil=True)
def _expand_rows_3(src: np.ndarray, dst: np.ndarray) -> None:
    _expand_rows_k(src, 3, dst)


@numba.njit(cache=True, nogil=True)
def _expand_rows_4(src: np.ndarray, dst: np.ndarray) -> None:
    _expand_rows_k(src, 4, dst)


_EXPAND_K = {2: _expand_rows_2, 3: _expand_rows_3, 4: _expand_rows_4}


@lru_cache(maxsize=256)
def _whole_expansion(in_size: int, out_size: int) -> int | None:
    """k when enlarging ``in_size`` to ``out_size`` = k * in_size makes output j a copy of input j // k."""
    k = out_size // in_size
    if k not in _EXPAND_K or k * in_size != out_size:
        return None
    t = box_taps(in_size, out_size)
    if not (t.gather and np.array_equal(t.dense_index[:, 0].astype(np.int64), np.arange(out_size) // k)):
        return None
    return k


@lru_cache(maxsize=256)
def _whole_factor(in_size: int, out_size: int) -> tuple[int, np.ndarray] | None:
    """(k, weights) when reducing ``in_size`` to ``out_size`` takes, for every output i, exactly the
    inputs k*i .. k*i + k - 1 with one set of weights (k = 2, 3 or 4), else None."""
    k = in_size // out_size
    if k not in _REDUCE_K or k * out_size != in_size:
        return None
    t = box_taps(in_size, out_size)
    starts = t.start.astype(np.int64)
    if not np.all(np.diff(starts) == k):
        return None
    idx = t.source.astype(np.int64).reshape(out_size, k)
    wts = t.weight.reshape(out_size, k)
    if not (np.array_equal(idx, k * np.arange(out_size)[:, None] + np.arange(k)[None, :]) and np.all(wts == wts[0])):
        return None
    return k, np.ascontiguousarray(wts[0])


def box_resize_planes(planes: np.ndarray, height: int, width: int, out: np.ndarray | None = None) -> np.ndarray:
    """``Image.resize((width, height), Image.Resampling.BOX)`` of 8-bit planes (P x H x W uint8), bit for bit;
    into ``out`` (P x height x width uint8) when given.

    A reducing horizontal pass runs as a vertical pass on the transposed planes (OpenCV's SIMD
    transpose): vertical passes process whole rows at once and vectorise, horizontal ones do not.
    Whole factors (2, 3, 4) need no transpose: a reduction reads inputs k*i .. k*i + k - 1 with a
    stride known when compiled, and an enlargement writes each value k times.
    """
    import cv2

    _, h, w = planes.shape
    y = planes
    if width != w:
        t = box_taps(w, width)
        whole = _whole_factor(w, width)
        if whole is not None:  # 2x, 3x or 4x smaller: a direct pass, no transposes
            wide = np.empty((y.shape[0], h, width), dtype=np.uint8)
            _REDUCE_K[whole[0]](y, whole[1], wide)
        elif t.gather:
            wide = np.empty((y.shape[0], h, width), dtype=np.uint8)
            grow = _whole_expansion(w, width)
            if grow is not None:  # 2x, 3x or 4x larger: each value written k times, no index table
                _EXPAND_K[grow](y, wide)
            else:
                _rows_pass(y, t.dense_index, t.dense_weight, True, wide)
        else:
            n = y.shape[0]
            tr = np.empty((n, w, h), dtype=np.uint8)
            for k in range(n):
                cv2.transpose(y[k], dst=tr[k])
            red = np.empty((n, width, h), dtype=np.uint8)
            _cols_pass(tr, t.start, t.source, t.weight, False, red)
            wide = np.empty((n, h, width), dtype=np.uint8)
            for k in range(n):
                cv2.transpose(red[k], dst=wide[k])
        y = wide
    if out is not None and out.shape != (y.shape[0], height, y.shape[2]):
        raise ValueError(f"out has shape {out.shape}, expected {(y.shape[0], height, y.shape[2])}")
    if height != h:
        t = box_taps(h, height)
        dst = out if out is not None else np.empty((y.shape[0], height, y.shape[2]), dtype=np.uint8)
        _cols_pass(y, t.start, t.source, t.weight, t.gather, dst)
        return dst
    if out is not None:
        out[...] = y
        return out
    return y


# --------------------------------------------------------------------------- pixelate in one pass per plane


class SpanTable(NamedTuple):
    """A reducing pass's taps for the fused pixelate kernel: per output, its taps (start, source index) and,
    where all its weights are equal (Pillow's BOX filter), that weight (else -1: weight per tap)."""

    start: np.ndarray  # intp, out + 1
    source: np.ndarray  # intp: input index per tap
    weight: np.ndarray  # int32 per tap
    common: np.ndarray  # int32 per output: the common weight, or -1


@lru_cache(maxsize=256)
def span_table(in_size: int, out_size: int) -> SpanTable:
    t = box_taps(in_size, out_size)
    start = t.start.astype(np.intp)
    common = np.full(out_size, -1, dtype=np.int32)
    for i in range(out_size):
        w = t.weight[start[i] : start[i + 1]]
        if len(w) and np.all(w == w[0]):
            common[i] = w[0]
    return SpanTable(start, t.source.astype(np.intp), t.weight, common)


@lru_cache(maxsize=256)
def gather_index(in_size: int, out_size: int) -> np.ndarray | None:
    """The source of each output of an enlarging BOX pass that copies one input per output, else None."""
    t = box_taps(in_size, out_size)
    if not t.gather:
        return None
    return np.ascontiguousarray(t.dense_index[:, 0].astype(np.intp))


@numba.njit(cache=True, nogil=True, inline="always")
def _reduce_along_rows(src, start, index, weight, common, dst, acc):
    """dst[i] = Pillow's level of the taps of output i over whole rows of src (Hin x N -> Hout x N).
    Outputs whose taps share one weight add the levels first and multiply once (the same integer)."""
    n = src.shape[1]
    half = np.int32(1 << (PRECISION_BITS - 1))
    for i in range(dst.shape[0]):
        a, e = start[i], start[i + 1]
        d = dst[i]
        cw = common[i]
        if cw >= 0:
            s = src[index[a]]
            if e - a == 1:  # the products and sums in int32 (numba would widen them to int64 lanes)
                for x in range(n):
                    d[x] = _level(np.int32(np.int32(s[x]) * cw + half))
                continue
            s1 = src[index[a + 1]]
            if e - a == 2:
                for x in range(n):
                    d[x] = _level(np.int32((np.int32(s[x]) + np.int32(s1[x])) * cw + half))
                continue
            for x in range(n):
                acc[x] = np.int32(s[x]) + np.int32(s1[x])
            for t in range(a + 2, e):
                s = src[index[t]]
                for x in range(n):
                    acc[x] += np.int32(s[x])
            for x in range(n):
                d[x] = _level(np.int32(acc[x] * cw + half))
            continue
        for x in range(n):
            acc[x] = half
        for t in range(a, e):
            s = src[index[t]]
            w = weight[t]
            for x in range(n):
                acc[x] += np.int32(np.int32(s[x]) * w)
        for x in range(n):
            d[x] = _level(acc[x])


@numba.njit(cache=True, nogil=True, inline="always")
def _reduce_by_k(src, cw, k, dst):
    """Along each row by a whole factor ``k`` known when compiled, every output weighing its k inputs
    by ``cw``: dst[y, i] = level((src[y, k i] + ... + src[y, k i + k - 1]) * cw + half), in int32."""
    half = np.int32(1 << (PRECISION_BITS - 1))
    n = dst.shape[1]
    for y in range(dst.shape[0]):
        s = src[y]
        d = dst[y]
        for i in range(n):
            acc = np.int32(s[k * i])
            for t in range(1, k):
                acc = np.int32(acc + np.int32(s[k * i + t]))
            d[i] = _level(np.int32(acc * cw + half))


@numba.njit(cache=True, nogil=True, inline="always")
def _grow_by_k(src, k, dst):
    """Along each row by a whole factor ``k`` known when compiled: dst[y, k i + t] = src[y, i]."""
    n = src.shape[1]
    for y in range(dst.shape[0]):
        s = src[y]
        d = dst[y]
        for i in range(n):
            v = s[i]
            for t in range(k):
                d[k * i + t] = v


@numba.njit(cache=True, nogil=True, inline="always")
def _copy_rows(src, rows, dst):
    """dst[y] = src[rows[y]] (an explicit loop: numba's row-slice assignment is several times slower)."""
    n = dst.shape[1]
    for y in range(dst.shape[0]):
        s = src[rows[y]]
        d = dst[y]
        for i in range(n):
            d[i] = s[i]


@numba.njit(cache=True, nogil=True)
def pixelate_kernel(planes, hs, ws, hg, wg, small_h, small_w, hk, hkw, gk, out):
    """Pillow's BOX resize of each plane to small_h x small_w and back (P x H x W uint8 -> out).

    ``hs``/``ws``: the reducing passes' span tables (rows H -> small_h, columns W -> small_w);
    ``hg``/``wg``: the enlarging passes' source rows and columns (each output copies one input).
    Horizontal passes run on transposed planes (16 x 16 vector transposes), so every pass works
    on whole rows, except by a whole factor (``hk``: 2, 3 or 4 inputs of weight ``hkw`` per output;
    ``gk``: each input copied 2, 3 or 4 times), where strided loads or stores along the rows do.
    Pillow's order (horizontal, then vertical, each rounded to 8 bits) is kept.
    """
    wide_vectors()
    npl, h, w = planes.shape
    hsr, wsr = small_h, small_w
    tr = np.empty((w, h), dtype=np.uint8)  # the plane transposed
    red = np.empty((wsr, h), dtype=np.uint8)  # horizontally reduced, transposed
    back = np.empty((h, wsr), dtype=np.uint8)  # horizontally reduced
    small = np.empty((hsr, wsr), dtype=np.uint8)
    small_t = np.empty((wsr, hsr), dtype=np.uint8)
    grown_t = np.empty((w, hsr), dtype=np.uint8)
    grown = np.empty((hsr, w), dtype=np.uint8)
    acc = np.empty(max(h, wsr), dtype=np.int32)
    same_h = np.arange(h)
    same_s = np.arange(hsr)
    hstart, hindex, hweight, hcommon = hs
    wstart, windex, wweight, wcommon = ws
    for p in range(npl):
        src = planes[p]
        if hk == 2:  # a whole factor: strided loads along the rows, no transposes
            _reduce_by_k(src, hkw, 2, back)
        elif hk == 3:
            _reduce_by_k(src, hkw, 3, back)
        elif hk == 4:
            _reduce_by_k(src, hkw, 4, back)
        elif wsr != w:
            transpose_into(src, tr)
            _reduce_along_rows(tr, wstart, windex, wweight, wcommon, red, acc)
            transpose_into(red, back)
        else:
            _copy_rows(src, same_h, back)
        if hsr != h:
            _reduce_along_rows(back, hstart, hindex, hweight, hcommon, small, acc)
        else:
            _copy_rows(back, same_s, small)
        # enlarge: columns (on the transposed small plane: row copies), then rows (row copies)
        if gk == 2:
            _grow_by_k(small, 2, grown)
        elif gk == 3:
            _grow_by_k(small, 3, grown)
        elif gk == 4:
            _grow_by_k(small, 4, grown)
        elif wsr != w:
            transpose_into(small, small_t)
            _copy_rows(small_t, wg, grown_t)
            transpose_into(grown_t, grown)
        else:
            _copy_rows(small, same_s, grown)
        _copy_rows(grown, hg if hsr != h else same_h, out[p])


def pixelate_planes(planes: np.ndarray, small_h: int, small_w: int, out: np.ndarray) -> np.ndarray | None:
    """Pillow's ``resize((small_w, small_h), BOX).resize((w, h), BOX)`` of each 8-bit plane (P x H x W)
    into ``out``; None (nothing written) when an enlarging pass is not a plain copy of one input per
    output (then :func:`box_resize_planes` twice gives the same)."""
    _, h, w = planes.shape
    hg = gather_index(small_h, h) if small_h != h else np.zeros(0, dtype=np.intp)
    wg = gather_index(small_w, w) if small_w != w else np.zeros(0, dtype=np.intp)
    if hg is None or wg is None or small_h < 1 or small_w < 1:
        return None
    hs = span_table(h, small_h) if small_h != h else span_table(1, 1)
    ws = span_table(w, small_w) if small_w != w else span_table(1, 1)
    hk, hkw = 0, 0
    whole = _whole_factor(w, small_w) if small_w != w else None
    if whole is not None and np.all(whole[1] == whole[1][0]):
        hk, hkw = whole[0], int(whole[1][0])
    gk = (_whole_expansion(small_w, w) or 0) if small_w != w else 0
    pixelate_kernel(planes, tuple(hs), tuple(ws), hg, wg, small_h, small_w, hk, np.int32(hkw), gk, out)
    return out
