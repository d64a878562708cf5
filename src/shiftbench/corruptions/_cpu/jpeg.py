"""Compiled JPEG round trip: Pillow's ``save(JPEG, quality)`` + ``open`` pixels without the codec.

The arithmetic is that of :mod:`._jpeg_torch` (libjpeg-turbo's colour tables, 4:2:0 downsampling
with its alternating bias, islow forward DCT, reciprocal quantisation, islow inverse DCT with the
range-limit table, fancy upsampling), compiled for one CPU core: the DCTs in 32-bit integers, the
width of libjpeg-turbo's own SIMD code; the colour conversions, the upsampling and the conversion
back to RGB in 16-bit words (products as high and low words), twice the lanes. The lossless entropy
coder is skipped.

Layout: a plane's rows are stored in the order (row within block, block row), so that viewed as
8-sample segments and transposed (OpenCV), sample ``k`` of row ``r`` of every block lies in one
contiguous run over the blocks. Every 1-D transform is then a loop over all the plane's blocks
with contiguous loads and stores, which the compiler vectorises:

1. colour conversion (for chroma with the 2 x 2 sums), edges repeated, level shift;
2. transpose; forward DCT along rows;
3. forward DCT along columns, quantisation, dequantisation and the inverse DCT's column pass,
   one column of coefficients at a time (no coefficient array is stored);
4. inverse DCT along rows and range limit; transpose back;
5. fancy upsampling of the chroma rows and conversion to RGB into the output planes.

On x86 CPUs steps 2 to 4 run instead as the word-vector code of :mod:`.jpeg_vec` (libjpeg-turbo's
SIMD arithmetic: 16-bit words, multiply-adds, 8 x 8 transposes in registers, so no transposes
through memory), and the whole batch in one compiled call (:func:`_batch`). The pixels are the
same either way (tested against Pillow for every width and for the portable kernels).
"""

from __future__ import annotations

import sys
import threading
from functools import lru_cache

import cv2
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ...rng.simd import mul_high
from ...rng.simd import wide_vectors as _wide
from .._jpeg_tables import (
    F0_298,
    F0_390,
    F0_541,
    F0_765,
    F0_899,
    F1_175,
    F1_501,
    F1_847,
    F1_961,
    F2_053,
    F2_562,
    F3_072,
    divisors,
    fix,
    quant_tables,
)
from . import jpeg_vec as _V


def _int_op(op: str, bits: int):
    """A binary operation on ``bits``-wide integers, result of the same width. Numba widens 32-bit
    arithmetic to 64 bits, which halves the vector lanes and makes multiplications slow; these keep
    it at libjpeg-turbo's width (16 bits where sums are known to fit: twice the lanes)."""
    t = types.int32 if bits == 32 else types.int16

    @intrinsic
    def _op(typingctx, a, b):
        sig = t(t, t)

        def codegen(context, builder, signature, args):
            return getattr(builder, op)(args[0], args[1])

        return sig, codegen

    return _op


_add16 = _int_op("add", 16)
_sub16 = _int_op("sub", 16)
_mul16 = _int_op("mul", 16)
_shr16 = _int_op("ashr", 16)
_lshr16 = _int_op("lshr", 16)
_shl16 = _int_op("shl", 16)
_or16 = _int_op("or_", 16)
_and16 = _int_op("and_", 16)
_add = _int_op("add", 32)
_sub = _int_op("sub", 32)
_mul = _int_op("mul", 32)
_shr = _int_op("ashr", 32)
_shl = _int_op("shl", 32)
_and = _int_op("and_", 32)


def _clip_byte(bits: int, narrow: bool):
    """An intrinsic: a ``bits``-bit integer clipped to 0..255, as uint8 when ``narrow``, else of the same width."""
    t = types.int32 if bits == 32 else types.int16

    @intrinsic
    def _clip(typingctx, a):
        sig = (types.uint8 if narrow else t)(t)

        def codegen(context, builder, signature, args):
            it = ir.IntType(bits)
            x = args[0]
            x = builder.select(builder.icmp_signed("<", x, ir.Constant(it, 0)), ir.Constant(it, 0), x)
            x = builder.select(builder.icmp_signed(">", x, ir.Constant(it, 255)), ir.Constant(it, 255), x)
            return builder.trunc(x, ir.IntType(8)) if narrow else x

        return sig, codegen

    return _clip


_byte = _clip_byte(32, narrow=False)  # int32 clipped to 0..255
_byte16 = _clip_byte(16, narrow=True)  # int16 clipped to 0..255, as uint8

_mulhi16 = mul_high(16, signed=True)  # high word of the product of two int16 (vpmulhw)


@intrinsic
def _below16(typingctx, a, b):
    """1 where ``a < b`` as unsigned 16-bit numbers (the carry out of ``b + x = a``), else 0."""
    sig = types.int16(types.int16, types.int16)

    def codegen(context, builder, signature, args):
        return builder.zext(builder.icmp_unsigned("<", args[0], args[1]), ir.IntType(16))

    return sig, codegen


@intrinsic
def _quant(typingctx, f, c, m, s, q):
    """Quantise and dequantise a coefficient: sign(f) * (((|f| + c) * m) >> s) * q."""
    sig = types.int32(types.int32, types.int32, types.int32, types.int32, types.int32)

    def codegen(context, builder, signature, args):
        f, c, m, s, q = args
        zero = ir.Constant(ir.IntType(32), 0)
        neg = builder.icmp_signed("<", f, zero)
        mag = builder.ashr(builder.mul(builder.add(builder.select(neg, builder.sub(zero, f), f), c), m), s)
        return builder.mul(builder.select(neg, builder.sub(zero, mag), mag), q)

    return sig, codegen


# where the even and odd upsampled pixels go in a 16-bit word, so that its bytes are in pixel order
_EVEN_BYTE, _ODD_BYTE = (0, 8) if sys.byteorder == "little" else (8, 0)

# colour conversion, 16-bit fixed point (libjpeg's jccolor.c / jdcolor.c tables as arithmetic, the
# constants of :mod:`._jpeg_torch`). Those beyond 16 bits are split into a shift and a 16-bit rest,
# so that every product is of two 16-bit numbers, in 16-bit lanes with high and low product words
# (vpmulhw, vpmullw).
# Luma: the three constants sum to 2**16, so Y = G + (r (R - G) + b (B - G) + 2**15) >> 16.
_Y_R, _Y_B = fix(0.299), fix(0.114)
assert fix(0.299) + fix(0.587) + fix(0.114) == 1 << 16
# Chroma: the two negative constants of Cb (and of Cr) sum to -FIX(0.5) = -2**15, so
# Cb = (2**15 (B - G) + c (G - R) + 2**15 - 1) >> 16 + 128 with c = FIX(0.16874), and
# Cr = (2**15 (R - G) + c' (G - B) + 2**15 - 1) >> 16 + 128 with c' = FIX(0.08131).
_CB_C, _CR_C = fix(0.16874), fix(0.08131)
assert fix(0.16874) + fix(0.33126) == fix(0.41869) + fix(0.08131) == 1 << 15
# Decoding in 16-bit words: (c x + 2**15) >> 16 is the product's high word plus the top bit of its
# low word, so R = Y + Cr + rnd(Cr x (1.402 - 1)) and B = Y + 2 Cb + rnd(Cb x (1.772 - 2)); G sums two
# products before its one rounding: G = Y - Cr + hi(Cb g) + hi(Cr g') + the carry out of the low words
# (+ 2**15), with g' = 2**16 - FIX(0.71414) so that both constants fit 16 bits.
_R_CR = fix(1.40200) - (1 << 16)
_B_CB = fix(1.77200) - (1 << 17)
_G_CB, _G_CR = -fix(0.34414), (1 << 16) - fix(0.71414)
assert max(abs(c) for c in (_Y_R, _Y_B, _CB_C, _CR_C, _R_CR, _B_CB, _G_CB, _G_CR)) < 1 << 15


@numba.njit(cache=True, nogil=True, inline="always")
def _odd(t0, t1, t2, t3):
    """The islow DCTs' odd part (forward and inverse), in libjpeg's order."""
    z5 = _mul(_add(_add(t0, t2), _add(t1, t3)), F1_175)
    z1 = _mul(_add(t0, t3), -F0_899)
    z2 = _mul(_add(t1, t2), -F2_562)
    z3 = _add(_mul(_add(t0, t2), -F1_961), z5)
    z4 = _add(_mul(_add(t1, t3), -F0_390), z5)
    return (
        _add(_add(_mul(t0, F0_298), z1), z3),
        _add(_add(_mul(t1, F2_053), z2), z4),
        _add(_add(_mul(t2, F3_072), z2), z3),
        _add(_add(_mul(t3, F1_501), z1), z4),
    )


@numba.njit(cache=True, nogil=True, inline="always")
def _fdct(d0, d1, d2, d3, d4, d5, d6, d7, dc_bits, dc_shift, n):
    """One islow forward DCT pass: outputs 0 and 4 shifted left by ``dc_bits`` or descaled by
    ``dc_shift`` bits; the rotated outputs descaled by ``n`` bits."""
    tmp0, tmp7 = _add(d0, d7), _sub(d0, d7)
    tmp1, tmp6 = _add(d1, d6), _sub(d1, d6)
    tmp2, tmp5 = _add(d2, d5), _sub(d2, d5)
    tmp3, tmp4 = _add(d3, d4), _sub(d3, d4)
    tmp10, tmp13 = _add(tmp0, tmp3), _sub(tmp0, tmp3)
    tmp11, tmp12 = _add(tmp1, tmp2), _sub(tmp1, tmp2)
    r = 1 << (n - 1)
    if dc_shift:
        dr = 1 << (dc_shift - 1)
        o0 = _shr(_add(_add(tmp10, tmp11), dr), dc_shift)
        o4 = _shr(_add(_sub(tmp10, tmp11), dr), dc_shift)
    else:
        o0 = _shl(_add(tmp10, tmp11), dc_bits)
        o4 = _shl(_sub(tmp10, tmp11), dc_bits)
    z1 = _mul(_add(tmp12, tmp13), F0_541)
    o2 = _shr(_add(_add(z1, _mul(tmp13, F0_765)), r), n)
    o6 = _shr(_add(_sub(z1, _mul(tmp12, F1_847)), r), n)
    o7, o5, o3, o1 = _odd(tmp4, tmp5, tmp6, tmp7)
    return o0, _shr(_add(o1, r), n), o2, _shr(_add(o3, r), n), o4, _shr(_add(o5, r), n), o6, _shr(_add(o7, r), n)


@numba.njit(cache=True, nogil=True, inline="always")
def _idct(d0, d1, d2, d3, d4, d5, d6, d7):
    """One islow inverse DCT pass before its descale (libjpeg's all-zero shortcuts give the same numbers)."""
    z1 = _mul(_add(d2, d6), F0_541)
    tmp3 = _add(z1, _mul(d2, F0_765))
    tmp2 = _sub(z1, _mul(d6, F1_847))
    tmp0 = _shl(_add(d0, d4), 13)
    tmp1 = _shl(_sub(d0, d4), 13)
    tmp10, tmp13 = _add(tmp0, tmp3), _sub(tmp0, tmp3)
    tmp11, tmp12 = _add(tmp1, tmp2), _sub(tmp1, tmp2)
    t0, t1, t2, t3 = _odd(d7, d5, d3, d1)
    return (
        _add(tmp10, t3), _add(tmp11, t2), _add(tmp12, t1), _add(tmp13, t0),
        _sub(tmp13, t0), _sub(tmp12, t1), _sub(tmp11, t2), _sub(tmp10, t3),
    )  # fmt: skip


@numba.njit(cache=True, nogil=True, inline="always")
def _sample(v):
    """Descale the second inverse pass (13 + 2 + 3 bits) and apply libjpeg's range-limit table:
    x + 128 clipped to 0..255 for x in -384..639, the 10-bit wrap-round beyond."""
    x = _sub(_and(_add(_shr(_add(v, 1 << 17), 18), 512), 1023), 512)  # the 10 bits, signed
    return _byte(_add(x, 128))


@numba.njit(cache=True, nogil=True)
def _luma(img: np.ndarray, h: int, w: int, nby: int, plane: np.ndarray) -> None:
    """Y - 128 of every row of the padded plane (rows and columns repeated at the edges), rows in
    (row within block, block row) order. In 16-bit words: Y = G + (r (R - G) + b (B - G) + 2**15) >> 16
    (see the constants above), the shift being the two products' high words plus the carry out
    of their low words (+ 2**15); equal to libjpeg's tables for all 2**24 inputs (tested)."""
    _wide()
    rr, gg, bb = img[0], img[1], img[2]
    wp = plane.shape[1]
    for yy in range(plane.shape[0]):
        src = min(yy, h - 1)
        dst = plane[(yy & 7) * nby + (yy >> 3)]
        r, g, b = rr[src], gg[src], bb[src]
        for x in range(w):
            gv = np.int16(g[x])
            dr, db = _sub16(np.int16(r[x]), gv), _sub16(np.int16(b[x]), gv)
            lr, lb = _mul16(dr, _Y_R), _mul16(db, _Y_B)  # low words
            lo = _add16(lr, lb)
            carry = _add16(_below16(lo, lr), _lshr16(lo, 15))  # out of lr + lb, then of + 2**15
            hi = _add16(_mulhi16(dr, _Y_R), _mulhi16(db, _Y_B))
            dst[x] = _add16(_add16(_sub16(gv, 128), hi), carry)
        for x in range(w, wp):
            dst[x] = dst[w - 1]


@numba.njit(cache=True, nogil=True, inline="always")
def _chroma16(d1, d2, c):
    """``(2**15 d1 + c d2 + 2**15 - 1) >> 16`` of int16 ``d1``, ``d2`` (-255..255) in 16-bit words:
    the product's high word plus ``d1 >> 1``, plus the carry out of the low words (the product's,
    2**15 for odd ``d1``, 2**15 - 1). Cb or Cr - 128 (see the constants above); equal to libjpeg's
    tables for all 2**24 inputs (tested)."""
    rest = _or16(_shl16(_and16(d1, 1), 15), 0x7FFF)
    lo = _mul16(d2, c)
    carry = _below16(_add16(lo, rest), lo)
    return _add16(_add16(_mulhi16(d2, c), _shr16(d1, 1)), carry)


@numba.njit(cache=True, nogil=True, inline="always")
def _column_sums(ra, ga, ba, rb, gb, bb, w, sums):
    """Cb and Cr of every pixel of two rows (libjpeg's per-pixel rounding), summed down the
    columns into ``sums[0]`` and ``sums[1]`` (0..510), the last column repeated up to their
    length. Contiguous loads, one pixel per 16-bit lane."""
    scb, scr = sums[0], sums[1]
    for x in range(w):
        r0, g0, b0 = np.int16(ra[x]), np.int16(ga[x]), np.int16(ba[x])
        r1, g1, b1 = np.int16(rb[x]), np.int16(gb[x]), np.int16(bb[x])
        gr0, bg0, gr1, bg1 = _sub16(g0, r0), _sub16(b0, g0), _sub16(g1, r1), _sub16(b1, g1)
        rg0, gb0, rg1, gb1 = _sub16(r0, g0), _sub16(g0, b0), _sub16(r1, g1), _sub16(g1, b1)
        cb = _add16(_chroma16(bg0, gr0, _CB_C), _chroma16(bg1, gr1, _CB_C))
        cr = _add16(_chroma16(rg0, gb0, _CR_C), _chroma16(rg1, gb1, _CR_C))
        scb[x] = _add16(cb, 256)
        scr[x] = _add16(cr, 256)
    for x in range(w, scb.shape[0]):
        scb[x], scr[x] = scb[w - 1], scr[w - 1]


@numba.njit(cache=True, nogil=True, inline="always")
def _pair_average(pairs, dst):
    """``dst[x]`` = the 2 x 2 average of the column sums ``2 x`` and ``2 x + 1`` (one int32 of
    ``pairs``: its two 16-bit halves, both non-negative, in either byte order) with the
    alternating bias 1, 2, level shifted."""
    for x in range(dst.shape[0]):
        p = pairs[x]
        s = _add(_and(p, 0xFFFF), _shr(p, 16))
        dst[x] = np.int16(_sub(_shr(_add(s, _add(_and(x, 1), 1)), 2), 128))


@numba.njit(cache=True, nogil=True)
def _chroma(img: np.ndarray, h: int, w: int, cby: int, level: np.ndarray) -> None:
    """Cb - 128 and Cr - 128 of the padded subsampled planes, stacked as one plane of 2 x ``cby``
    block rows (Cb's, then Cr's), rows permuted as in :func:`_luma`.
    Full-size columns are widened by repeating the last one; the image is completed to a pair of
    rows and the subsampled plane then repeats its own last row; the 2 x 2 sums are averaged with
    the alternating bias 1, 2. Per row pair: the column sums of each pixel's Cb and Cr, then the
    sums of adjacent columns (both passes over contiguous lanes)."""
    _wide()
    rr, gg, bb = img[0], img[1], img[2]
    ch = (h + 1) // 2
    wp = level.shape[1]
    sums = np.empty((2, 2 * wp), np.int16)
    pairs = sums.view(np.int32)  # 2 x wp: the column sums 2x and 2x + 1 as one 32-bit word
    for cyy in range(8 * cby):
        cy = min(cyy, ch - 1)
        ya, yb = 2 * cy, min(2 * cy + 1, h - 1)
        row = (cyy & 7) * 2 * cby + (cyy >> 3)
        _column_sums(rr[ya], gg[ya], bb[ya], rr[yb], gg[yb], bb[yb], w, sums)
        _pair_average(pairs[0], level[row])
        _pair_average(pairs[1], level[row + cby])


@numba.njit(cache=True, nogil=True)
def _rows(t: np.ndarray, o: np.ndarray) -> None:
    """Forward DCT along rows: ``t[k, r * n + j]`` (sample k of row r of block j) -> ``o[r * 8 + u, j]``."""
    _wide()
    n = o.shape[1]
    for r in range(8):
        s = r * n
        t0, t1, t2, t3 = t[0, s : s + n], t[1, s : s + n], t[2, s : s + n], t[3, s : s + n]
        t4, t5, t6, t7 = t[4, s : s + n], t[5, s : s + n], t[6, s : s + n], t[7, s : s + n]
        for j in range(n):
            o0, o1, o2, o3, o4, o5, o6, o7 = _fdct(t0[j], t1[j], t2[j], t3[j], t4[j], t5[j], t6[j], t7[j], 2, 0, 11)
            o[r * 8, j] = o0
            o[r * 8 + 1, j] = o1
            o[r * 8 + 2, j] = o2
            o[r * 8 + 3, j] = o3
            o[r * 8 + 4, j] = o4
            o[r * 8 + 5, j] = o5
            o[r * 8 + 6, j] = o6
            o[r * 8 + 7, j] = o7


@numba.njit(cache=True, nogil=True)
def _columns(o: np.ndarray, ws: np.ndarray, tab: np.ndarray) -> None:
    """Column DCT, quantise, dequantise and the inverse column pass (descaled by 11 bits), one
    coefficient column ``u`` at a time: ``o[v * 8 + u, j]`` -> ``ws[v * 8 + u, j]``."""
    _wide()
    n = o.shape[1]
    qt, recip, corr, shift = tab[0], tab[1], tab[2], tab[3]
    for u in range(8):
        q0, q1, q2, q3, q4, q5, q6, q7 = qt[u], qt[8 + u], qt[16 + u], qt[24 + u], qt[32 + u], qt[40 + u], qt[48 + u], qt[56 + u]
        m0, m1, m2, m3 = recip[u], recip[8 + u], recip[16 + u], recip[24 + u]
        m4, m5, m6, m7 = recip[32 + u], recip[40 + u], recip[48 + u], recip[56 + u]
        c0, c1, c2, c3 = corr[u], corr[8 + u], corr[16 + u], corr[24 + u]
        c4, c5, c6, c7 = corr[32 + u], corr[40 + u], corr[48 + u], corr[56 + u]
        s0, s1, s2, s3 = shift[u], shift[8 + u], shift[16 + u], shift[24 + u]
        s4, s5, s6, s7 = shift[32 + u], shift[40 + u], shift[48 + u], shift[56 + u]
        for j in range(n):
            f0, f1, f2, f3, f4, f5, f6, f7 = _fdct(
                o[u, j], o[8 + u, j], o[16 + u, j], o[24 + u, j], o[32 + u, j], o[40 + u, j], o[48 + u, j], o[56 + u, j], 0, 2, 15
            )
            i0, i1, i2, i3, i4, i5, i6, i7 = _idct(
                _quant(f0, c0, m0, s0, q0), _quant(f1, c1, m1, s1, q1), _quant(f2, c2, m2, s2, q2), _quant(f3, c3, m3, s3, q3),
                _quant(f4, c4, m4, s4, q4), _quant(f5, c5, m5, s5, q5), _quant(f6, c6, m6, s6, q6), _quant(f7, c7, m7, s7, q7),
            )  # fmt: skip
            ws[u, j] = _shr(_add(i0, 1024), 11)
            ws[8 + u, j] = _shr(_add(i1, 1024), 11)
            ws[16 + u, j] = _shr(_add(i2, 1024), 11)
            ws[24 + u, j] = _shr(_add(i3, 1024), 11)
            ws[32 + u, j] = _shr(_add(i4, 1024), 11)
            ws[40 + u, j] = _shr(_add(i5, 1024), 11)
            ws[48 + u, j] = _shr(_add(i6, 1024), 11)
            ws[56 + u, j] = _shr(_add(i7, 1024), 11)


@numba.njit(cache=True, nogil=True)
def _samples(ws: np.ndarray, p: np.ndarray) -> None:
    """Inverse DCT along rows and range limit: ``ws[r * 8 + k, j]`` -> ``p[k, r * n + j]``."""
    _wide()
    n = ws.shape[1]
    for r in range(8):
        s = r * n
        p0, p1, p2, p3 = p[0, s : s + n], p[1, s : s + n], p[2, s : s + n], p[3, s : s + n]
        p4, p5, p6, p7 = p[4, s : s + n], p[5, s : s + n], p[6, s : s + n], p[7, s : s + n]
        for j in range(n):
            o0, o1, o2, o3, o4, o5, o6, o7 = _idct(
                ws[r * 8, j], ws[r * 8 + 1, j], ws[r * 8 + 2, j], ws[r * 8 + 3, j],
                ws[r * 8 + 4, j], ws[r * 8 + 5, j], ws[r * 8 + 6, j], ws[r * 8 + 7, j],
            )  # fmt: skip
            p0[j] = _sample(o0)
            p1[j] = _sample(o1)
            p2[j] = _sample(o2)
            p3[j] = _sample(o3)
            p4[j] = _sample(o4)
            p5[j] = _sample(o5)
            p6[j] = _sample(o6)
            p7[j] = _sample(o7)


@numba.njit(cache=True, nogil=True)
def _upsample(dec: np.ndarray, h: int, w: int, cby: int, v: np.ndarray, up: np.ndarray) -> None:
    """Fancy upsampling of the decoded Cb and Cr planes (stacked and permuted as in :func:`_chroma`):
    per output row the vertical sums 3 * nearer + farther row, then per chroma column its even and
    odd output pixels (3/4 nearer, 1/4 farther sum; biases 8 and 7), stored as one 16-bit word
    ``even | odd << 8`` (little-endian; the other way round on big-endian machines) in
    ``up[plane, row, column]``: read as bytes, the upsampled row."""
    _wide()
    ch, cw = (h + 1) // 2, (w + 1) // 2
    for yy in range(h):
        i = yy >> 1
        far = max(i - 1, 0) if (yy & 1) == 0 else min(i + 1, ch - 1)
        ni, fi = (i & 7) * 2 * cby + (i >> 3), (far & 7) * 2 * cby + (far >> 3)
        for x in range(cw):
            v[0, x + 1] = _add16(_mul16(np.int16(dec[ni, x]), 3), np.int16(dec[fi, x]))
            v[1, x + 1] = _add16(_mul16(np.int16(dec[ni + cby, x]), 3), np.int16(dec[fi + cby, x]))
        v[0, 0], v[1, 0] = v[0, 1], v[1, 1]  # the first and last columns repeat their own sample
        v[0, cw + 1], v[1, cw + 1] = v[0, cw], v[1, cw]
        for c in range(2):
            for x in range(cw):
                even = _shr16(_add16(_add16(_mul16(v[c, x + 1], 3), v[c, x]), 8), 4)
                odd = _shr16(_add16(_add16(_mul16(v[c, x + 1], 3), v[c, x + 2]), 7), 4)
                up[c, yy, x] = _or16(_shl16(even, _EVEN_BYTE), _shl16(odd, _ODD_BYTE))


@numba.njit(cache=True, nogil=True, inline="always")
def _rounded16(a, c):
    """``(a * c + 2**15) >> 16`` of two int16: the product's high word plus its low word's top bit."""
    return _add16(_mulhi16(a, c), _lshr16(_mul16(a, c), 15))


@numba.njit(cache=True, nogil=True)
def _to_rgb(y: np.ndarray, up: np.ndarray, h: int, w: int, nby: int, out: np.ndarray) -> None:
    """YCbCr -> RGB with libjpeg's decoding tables as arithmetic (round(1.402 Cr), round(1.772 Cb),
    the green terms summed before one shift), clipped to 0..255; in 16-bit words (see the
    constants above), twice the lanes of 32-bit arithmetic. Equal to the tables for all 2**24
    (Y, Cb, Cr) (tested)."""
    _wide()
    for yy in range(h):
        yrow = y[(yy & 7) * nby + (yy >> 3)]
        cbr, crr = up[0, yy], up[1, yy]
        o0, o1, o2 = out[0, yy], out[1, yy], out[2, yy]
        for x in range(w):
            yv = np.int16(yrow[x])
            b = _sub16(np.int16(cbr[x]), 128)
            r = _sub16(np.int16(crr[x]), 128)
            o0[x] = _byte16(_add16(_add16(yv, r), _rounded16(r, _R_CR)))
            o2[x] = _byte16(_add16(_add16(yv, _add16(b, b)), _rounded16(b, _B_CB)))
            lb, lr = _mul16(b, _G_CB), _mul16(r, _G_CR)  # low words
            lo = _add16(lb, lr)
            carry = _add16(_below16(lo, lb), _lshr16(lo, 15))  # out of lb + lr, then of + 2**15
            g = _add16(_add16(_mulhi16(b, _G_CB), _mulhi16(r, _G_CR)), carry)
            o1[x] = _byte16(_add16(_sub16(yv, r), g))


class _Plane:
    """Work buffers of one plane of ``nby`` x ``nbx`` blocks, for the word-vector DCT passes of
    :mod:`.jpeg_vec` where the CPU has them (``vector``), else for the portable kernels above."""

    def __init__(self, nby: int, nbx: int, vector: bool) -> None:
        n = nby * nbx
        self.nby, self.n, self.vector = nby, n, vector
        if vector:
            m = -(-n // _V.LANES) * _V.LANES
            margin = 8 * _V.LANES  # one step's overrun past the last segment (see jpeg_vec.code)
            self.level_flat = np.zeros(64 * n + margin, np.int16)
            self.dec_flat = np.zeros(64 * n + margin, np.uint8)
            self.level = self.level_flat[: 64 * n].reshape(8 * nby, 8 * nbx)  # padded plane, rows permuted
            self.dec = self.dec_flat[: 64 * n].reshape(8 * nby, 8 * nbx)  # decoded plane, rows permuted
            self.o = np.zeros((64, m), np.int16)  # row DCT output
            self.ws = self.o  # inverse column pass output, in place (a smaller working set)
            return
        self.level = np.empty((8 * nby, 8 * nbx), np.int16)
        self.t = np.empty((8, 8 * n), np.int16)  # k-major samples
        self.o = np.empty((64, n), np.int16)
        self.ws = np.empty((64, n), np.int32)
        self.p = np.empty((8, 8 * n), np.uint8)  # k-major decoded samples
        self.dec = np.empty((8 * nby, 8 * nbx), np.uint8)

    def code(self, tab: tuple[np.ndarray, np.ndarray]) -> None:
        """DCT, quantisation with ``tab`` (one of :func:`_tables`' pairs), IDCT: level -> dec."""
        if self.vector:
            _V.code(self.level_flat, self.n, self.o, self.ws, self.dec_flat, tab[1])
            return
        cv2.transpose(self.level.reshape(-1, 8), self.t)
        _rows(self.t, self.o)
        _columns(self.o, self.ws, tab[0])
        _samples(self.ws, self.p)
        cv2.transpose(self.p, self.dec.reshape(-1, 8))


@lru_cache(maxsize=128)
def _tables(quality: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Per quality (clipped to 1..100 by :func:`quant_tables`), luma and chroma: the quantisation
    table and its reciprocals, corrections and shifts, as 32-bit rows (portable kernels) and as
    the word rows of :func:`.jpeg_vec.word_table`."""

    def rows(table: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        recip, corr, shift = divisors(table)
        t = np.array([table, recip, corr, shift], dtype=np.int32)
        return t, _V.word_table(t)

    luma, chroma = quant_tables(quality)
    return rows(luma), rows(chroma)


@numba.njit(cache=True, nogil=True, inline="always")
def _plane_view(flat, n, nby):
    """The 8 nby x 8 nbx plane (rows permuted) that holds the first 64 n values of ``flat``."""
    return flat[: 64 * n].reshape(8 * nby, 64 * n // (8 * nby))


# compiles _V.code in, whose width numba's cache does not see: cached only when that is
@numba.njit(cache=_V.CACHE, nogil=True)
def _batch(x, out, h, w, nby, cby, ny, nc, yflat, cflat, yo, yws, co, cws, ydec, cdec, v, up, ltab, ctab):
    """:func:`jpeg_round_trip_planes`' loop over the images with the word-vector DCT passes, in
    one compiled call (the buffers of :class:`_Buffers`: the flat level and decoded planes of
    ``ny`` luma and ``nc`` chroma blocks, seen as planes here)."""
    ylevel, clevel = _plane_view(yflat, ny, nby), _plane_view(cflat, nc, 2 * cby)
    ydplane, cdplane = _plane_view(ydec, ny, nby), _plane_view(cdec, nc, 2 * cby)
    up8 = up.view(np.uint8)
    for i in range(x.shape[0]):
        _luma(x[i], h, w, nby, ylevel)
        _chroma(x[i], h, w, cby, clevel)
        _V.code(yflat, ny, yo, yws, ydec, ltab)
        _V.code(cflat, nc, co, cws, cdec, ctab)
        _upsample(cdplane, h, w, cby, v, up)
        _to_rgb(ydplane, up8, h, w, nby, out[i])


class _Buffers:
    """The work buffers of one image size (reused image after image, batch after batch)."""

    def __init__(self, h: int, w: int) -> None:
        ch, cw = (h + 1) // 2, (w + 1) // 2
        self.cby = (ch + 7) // 8
        vector = _V.AVAILABLE and not _PORTABLE
        self.y = _Plane((h + 7) // 8, (w + 7) // 8, vector)
        self.c = _Plane(2 * self.cby, (cw + 7) // 8, vector)  # Cb and Cr
        self.v = np.empty((2, cw + 2), np.int16)
        self.up = np.empty((2, h, cw), np.int16)  # byte pairs (see _upsample)
        self.up8 = self.up.view(np.uint8)  # 2 x h x 2 cw: the upsampled planes


_LOCAL = threading.local()  # per thread: the buffers of the last image size
_PORTABLE = False  # True: the portable kernels even where the word-vector ones run (tests set it)


def _buffers(h: int, w: int) -> _Buffers:
    held = getattr(_LOCAL, "buffers", None)
    if held is None or held[0] != (h, w, _PORTABLE):
        held = ((h, w, _PORTABLE), _Buffers(h, w))
        _LOCAL.buffers = held
    return held[1]


def jpeg_round_trip_planes(x: np.ndarray, quality: int, out: np.ndarray | None = None) -> np.ndarray:
    """Pillow's JPEG round trip (quality ``quality``, 4:2:0) of a B x 3 x H x W uint8 array, into
    ``out`` (same shape, contiguous) or a new array. Images at least 5 px wide (see
    :func:`~shiftbench.corruptions.digital.jpeg_round_trip`)."""
    luma, chroma = _tables(int(quality))
    x = np.ascontiguousarray(x)
    if out is None:
        out = np.empty_like(x)
    _, _, h, w = x.shape
    if w < 5:
        raise ValueError(f"jpeg_round_trip_planes: width must be at least 5 px, got {w}")
    bf = _buffers(h, w)
    yp, cp = bf.y, bf.c
    if yp.vector:  # the whole batch in one compiled call
        _batch(x, out, h, w, yp.nby, bf.cby, yp.n, cp.n, yp.level_flat, cp.level_flat,
               yp.o, yp.ws, cp.o, cp.ws, yp.dec_flat, cp.dec_flat, bf.v, bf.up, luma[1], chroma[1])  # fmt: skip
        return out
    for i in range(x.shape[0]):
        _luma(x[i], h, w, yp.nby, yp.level)
        _chroma(x[i], h, w, bf.cby, cp.level)
        yp.code(luma)
        cp.code(chroma)
        _upsample(cp.dec, h, w, bf.cby, bf.v, bf.up)
        _to_rgb(yp.dec, bf.up8, h, w, yp.nby, out[i])
    return out
