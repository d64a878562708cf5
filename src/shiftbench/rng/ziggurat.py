"""Standard normal draws by the ziggurat method (Marsaglia and Tsang, 2000), fed with raw 64-bit words.

NumPy's ``Generator.standard_normal`` calls its bit generator once per value through a
function pointer, which costs ~9 ns per float32 value here; the noise corruptions need
150,528 values per 224 image. This module takes the raw 64-bit output of the image's
own PCG64 stream in one call (~0.5 ns per 32-bit word) and runs the ziggurat in one
compiled loop. The result is a fixed function of the stream, with only integer
operations on the fast path and correctly rounded float64 arithmetic elsewhere, so it
is the same on every platform.

Layout (256 layers of equal area ``V`` under f(x) = exp(-x^2 / 2), x >= 0): layer 0 is the
base strip, a rectangle [0, R] x [0, f(R)] plus the tail x > R, drawn as a pseudo
rectangle of width ``V / f(R)``; layer i >= 1 lies between the heights f(e[i-1]) and
f(e[i]), with outer width e[i-1] and inner width e[i] (e[0] = R, e[255] = 0). One 32-bit
word gives the layer (8 bits), the sign (1 bit) and the position (23 bits); a point
inside the inner width is accepted at once (98.8 % of draws), a point in a wedge is
tested against f with one more word, a point beyond R in the base strip is replaced by
a tail draw (Marsaglia's exponential rejection, two words per try). The float64 variant
(:func:`standard_normal64`, for ``FastDraws.normal``) takes one 64-bit word per try and a
52-bit position.
"""

from __future__ import annotations

import math
import sys
from functools import lru_cache

import numba
import numpy as np

from .pcg64 import raw_words
from .simd import wide_vectors

LAYERS = 256
R = 3.6541528853610088  # right edge of the base strip for 256 layers


def _f(x: float) -> float:
    return math.exp(-0.5 * x * x)


@lru_cache(maxsize=2)
def tables(bits: int = 23) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(k, w, f_outer, f_inner) per layer: fast-accept bound on the ``bits``-bit position, width per
    position unit, and f at the layer's outer and inner edges."""
    scale = float(1 << bits)
    v = R * _f(R) + math.sqrt(math.pi / 2) * math.erfc(R / math.sqrt(2))  # area of each layer
    e = [R]
    for _ in range(1, LAYERS - 1):
        y = v / e[-1] + _f(e[-1])
        e.append(math.sqrt(-2.0 * math.log(y)))
    e.append(0.0)  # the top layer reaches the axis
    k = np.zeros(LAYERS, dtype=np.uint64)
    w = np.zeros(LAYERS, dtype=np.float64)
    fo = np.zeros(LAYERS, dtype=np.float64)
    fi = np.zeros(LAYERS, dtype=np.float64)
    q = v / _f(R)  # pseudo width of the base strip
    k[0] = int(math.floor(scale * R / q))
    w[0] = q / scale
    fo[0] = 0.0
    fi[0] = _f(R)
    for i in range(1, LAYERS):
        outer, inner = e[i - 1], e[i]
        k[i] = int(math.floor(scale * inner / outer))
        w[i] = outer / scale
        fo[i] = _f(outer)
        fi[i] = _f(inner)
    return k, w, fo, fi


@numba.njit(cache=True, nogil=True)
def _word(raw: np.ndarray, p: int) -> np.uint64:
    """Word p of the stream: ``raw`` holds 64-bit words, or 32-bit words (the halves of the
    64-bit output, low half first: see :func:`halves`)."""
    return np.uint64(raw[p])


@numba.njit(cache=True, nogil=True)
def _unit(word: np.uint64, wide: bool, positive: bool) -> float:
    """A word as a uniform: 32-bit words in (0, 1); 64-bit words as 53-bit doubles, in (0, 1) when
    ``positive`` (the tail takes logarithms) else in [0, 1)."""
    if not wide:
        return (float(word) + 0.5) * 2.3283064365386963e-10
    v = float(word >> np.uint64(11))
    if positive:
        v += 0.5
    return v * 1.1102230246251565e-16


@numba.njit(cache=True, nogil=True)
def _slow(
    raw: np.ndarray,
    p: int,
    r: np.uint64,
    k: np.ndarray,
    w: np.ndarray,
    fo: np.ndarray,
    fi: np.ndarray,
    r_edge: float,
    wide: bool,
) -> tuple[float, int]:
    """Finish a draw whose first try (word ``r``, already consumed; ``p`` is the next word) missed
    the fast test: wedge test, tail, or a fresh try. Returns (value, next word), next word -1 when
    ``raw`` ran out."""
    nwords = raw.shape[0]
    while True:
        layer = int(r & np.uint64(0xFF))
        neg = (r >> np.uint64(8)) & np.uint64(1)
        j = (r >> np.uint64(12)) if wide else ((r >> np.uint64(9)) & np.uint64(0x7FFFFF))
        x = float(j) * w[layer]
        if j < k[layer]:
            return (-x if neg else x), p
        if layer == 0:  # tail beyond R
            while True:
                if p + 2 > nwords:
                    return 0.0, -1
                t = -math.log(_unit(_word(raw, p), wide, True)) / r_edge
                y = -math.log(_unit(_word(raw, p + 1), wide, True))
                p += 2
                if y + y > t * t:
                    break
            val = r_edge + t
            return (-val if neg else val), p
        if p >= nwords:
            return 0.0, -1
        u = _unit(_word(raw, p), wide, False)
        p += 1
        if fo[layer] + u * (fi[layer] - fo[layer]) < math.exp(-0.5 * x * x):
            return (-x if neg else x), p
        if p >= nwords:
            return 0.0, -1
        r = _word(raw, p)
        p += 1


@numba.njit(cache=True, nogil=True)
def _fill(
    raw: np.ndarray,
    out: np.ndarray,
    k: np.ndarray,
    w: np.ndarray,
    fo: np.ndarray,
    fi: np.ndarray,
    r_edge: float,
    wide: bool,
) -> int:
    # The fast test accepts 98.8 % of tries; its sign is applied without a branch (a random
    # sign as a branch is mispredicted half the time, which cost 4x on this loop).
    nwords = raw.shape[0]
    p = 0
    for i in range(out.shape[0]):
        if p >= nwords:
            return -1
        r = _word(raw, p)
        p += 1
        layer = int(r & np.uint64(0xFF))
        j = (r >> np.uint64(12)) if wide else ((r >> np.uint64(9)) & np.uint64(0x7FFFFF))
        if j < k[layer]:
            sign = 1.0 - 2.0 * float(np.int64((r >> np.uint64(8)) & np.uint64(1)))
            out[i] = float(np.int64(j)) * w[layer] * sign
        else:
            v, p = _slow(raw, p, r, k, w, fo, fi, r_edge, wide)
            if p < 0:
                return -1
            out[i] = v
    return p


@numba.njit(cache=True, nogil=True)
def ziggurat_fill(
    raw: np.ndarray, out: np.ndarray, k: np.ndarray, w: np.ndarray, fo: np.ndarray, fi: np.ndarray, r_edge: float
) -> int:
    """Fill ``out`` (1-D float32) with standard normal values from 32-bit words ``raw`` (uint32;
    :func:`halves` of the generator's 64-bit output).

    Returns the number of words used, or -1 when ``raw`` ran out (draw more and call again
    with the longer buffer: the values depend only on the words, so the prefix is reproduced).
    """
    return _fill(raw, out, k, w, fo, fi, r_edge, False)


@numba.njit(cache=True, nogil=True)
def ziggurat_fill64(
    raw: np.ndarray, out: np.ndarray, k: np.ndarray, w: np.ndarray, fo: np.ndarray, fi: np.ndarray, r_edge: float
) -> int:
    """The float64 variant: one 64-bit word per try (8 bits layer, 1 bit sign, 52 bits position);
    wedge and tail uniforms are 53-bit doubles of the following words. Same return convention."""
    return _fill(raw, out, k, w, fo, fi, r_edge, True)


def standard_normal64(bit_generator: np.random.BitGenerator, n: int) -> np.ndarray:
    """``n`` standard normal float64 values (52-bit positions) from ``bit_generator``'s raw output."""
    k, w, fo, fi = tables(52)
    out = np.empty(n, dtype=np.float64)
    raw = raw_words(bit_generator, n + n // 32 + 64)
    while True:
        if ziggurat_fill64(raw, out, k, w, fo, fi, R) >= 0:
            return out
        raw = np.concatenate([raw, raw_words(bit_generator, n // 16 + 64)])


def standard_normal32(bit_generator: np.random.BitGenerator, n: int) -> np.ndarray:
    """``n`` standard normal float32 values from ``bit_generator``'s raw 64-bit output."""
    k, w, fo, fi = tables()
    out = np.empty(n, dtype=np.float32)
    # one word per value plus ~1.3 % for wedges and the tail; rarely, more is drawn and the fill redone
    raw = raw_words(bit_generator, (n + n // 32 + 64 + 1) // 2)
    while True:
        used = ziggurat_fill(halves(raw), out, k, w, fo, fi, R)
        if used >= 0:
            return out
        raw = np.concatenate([raw, raw_words(bit_generator, n // 16 + 64)])


def halves(raw: np.ndarray) -> np.ndarray:
    """64-bit words as their 32-bit halves, low half first (a view on little-endian machines)."""
    if sys.byteorder == "little":
        return raw.view(np.uint32)
    return np.stack([raw & np.uint64(0xFFFFFFFF), raw >> np.uint64(32)], axis=1).ravel().astype(np.uint32)


@numba.njit(cache=True, nogil=True)
def noise_image(
    raw: np.ndarray,
    x: np.ndarray,
    c: np.float32,
    multiplicative: bool,
    out: np.ndarray,
    k: np.ndarray,
    w: np.ndarray,
    fo: np.ndarray,
    fi: np.ndarray,
    r_edge: float,
) -> int:
    """Gaussian (or speckle) noise on one image without materialising the field: the float32
    normals of :func:`ziggurat_fill` on the 32-bit words ``raw`` (H x W x 3 order), drawn one image
    row at a time into an L1-sized buffer and applied with the float32 operations of the noise
    functional (x: 3 x H x W levels or values; out: float32 values or uint8 levels). Returns the
    words used, -1 when ``raw`` ran out.

    The normals go into a channel-planar row buffer, so the apply loop reads it contiguously."""
    wide_vectors()
    nwords = raw.shape[0]
    _, nh, nw = x.shape
    k255 = np.float32(255.0)
    zero = np.float32(0.0)
    one = np.float32(1.0)
    zbuf = np.empty((3, nw), dtype=np.float32)
    p = 0
    for i in range(nh):
        for j in range(nw):
            for ch in range(3):
                if p >= nwords:
                    return -1
                r = _word(raw, p)
                p += 1
                layer = int(r & np.uint64(0xFF))
                jj = (r >> np.uint64(9)) & np.uint64(0x7FFFFF)
                if jj < k[layer]:
                    sign = 1.0 - 2.0 * float(np.int64((r >> np.uint64(8)) & np.uint64(1)))
                    zbuf[ch, j] = float(np.int64(jj)) * w[layer] * sign
                else:
                    zv, p = _slow(raw, p, r, k, w, fo, fi, r_edge, False)
                    if p < 0:
                        return -1
                    zbuf[ch, j] = zv
        for ch in range(3):
            xr = x[ch, i]
            o = out[ch, i]
            zr = zbuf[ch]
            for j in range(nw):
                v = np.float32(xr[j]) / k255
                tt = c * zr[j]
                if multiplicative:
                    tt = v * tt
                v = v + tt
                o[j] = min(max(v, zero), one) * k255
    return p
