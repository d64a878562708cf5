"""Fused CPU kernel for elastic_transform's two resamplings.

One pass per pixel for each of: OpenCV's fixed-point ``warpAffine`` (1/32-pixel
coordinates, float32 weight products summed left to right, BORDER_REFLECT_101)
and SciPy's ``map_coordinates(order=1, mode='reflect')`` (half-sample folding,
float64 interpolation, float32 result), then ``clip(0, 1) * 255``. It performs
the operations of the tensor path in :mod:`.elastic` (:func:`~.elastic.warp_affine`
in "fixed" mode and :func:`~.elastic.map_coordinates_linear`) in the same
precision; the tests check that both paths agree.

:func:`elastic_levels_kernel` takes 8-bit RGB levels (``level / 255`` from a table) and the smoothed fields before
their scaling, and writes the truncated levels into the caller's buffer where it wants levels: no float copy of
the batch, of the scaled fields or of the result. :func:`elastic_kernel` takes the float planes of any number of
channels.

Both passes run a few pixels per step as portable LLVM vector code (:func:`_warp8`, :func:`_map4`): the same
operations in the same order and precision as the per-pixel code, lane by lane (no fused multiply-adds), for the
steps whose pixels all fall inside the image; a step with a pixel at the border, and a row's last few pixels, take
the per-pixel code. The values are the same either way.
"""

from __future__ import annotations

import math

import numba
import numba.extending
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_INTER_BITS = 5
_INTER_TAB = 1 << _INTER_BITS
_SHIFT = 10 - _INTER_BITS  # AB_BITS - INTER_BITS


@numba.njit(cache=True, nogil=True, inline="always")
def _reflect101(i: int, n: int) -> int:
    if n == 1:
        return 0
    if i < 0 and i > -n:  # one reflection (no division): the warp's border taps
        return -i
    if i >= n and i <= 2 * n - 2:
        return 2 * n - 2 - i
    if i < 0 or i >= n:
        p = 2 * n - 2
        i = i % p  # Python semantics: non-negative
        if i >= n:
            i = p - i
    return i


@numba.njit(cache=True, nogil=True, inline="always")
def _fold(c: float, n: int) -> float:
    # SciPy's map_coordinates 'reflect' folding of an out-of-range coordinate
    if n <= 1:
        return 0.0
    if c >= 0.0 and c <= n - 1:
        return c
    sz2 = 2.0 * n
    if c < 0.0:
        if c < -sz2:
            c = sz2 * math.trunc(-c / sz2) + c
        if c < -n:
            return c + sz2
        return -c - 1.0
    c = c - sz2 * math.trunc(c / sz2)
    if c >= n:
        c = sz2 - c - 1.0
    return c


@numba.njit(cache=True, nogil=True)
def elastic_kernel(
    x: np.ndarray,
    adelta: np.ndarray,
    bdelta: np.ndarray,
    x0: np.ndarray,
    y0: np.ndarray,
    dx: np.ndarray,
    dy: np.ndarray,
    out: np.ndarray,
    start: int,
    end: int,
) -> None:
    """Images start..end-1. x, out: B x C x H x W float32 (x in 0..1, out in 0..255);
    adelta, bdelta: B x W and x0, y0: B x H int64 fixed-point warp terms; dx, dy: B x H x W float32."""
    _, nc, nh, nw = x.shape
    warped = np.empty((nc, nh * nw), dtype=np.float32)
    wtab = _weight_table()
    if nc == 3:  # RGB: the three planes side by side, one set of indices and weights per pixel
        for n in range(start, end):
            _warp_rgb(x[n].reshape(3, nh * nw), wtab, adelta[n], bdelta[n], x0[n], y0[n], nh, nw, warped)
            # scale 1: float32(float32 displacement * 1.0) is the displacement itself
            _map_rgb(warped, dx[n], dy[n], 1.0, nh, nw, out[n, 0], out[n, 1], out[n, 2])
        return
    for n in range(start, end):
        planes = x[n].reshape(nc, nh * nw)
        oplanes = out[n].reshape(nc, nh * nw)
        for i in range(nh):
            _warp_row(planes, wtab, adelta[n], bdelta[n], x0[n, i], y0[n, i], nh, nw, i * nw, warped)
        for i in range(nh):
            _map_row(warped, dx[n, i], dy[n, i], i, nh, nw, oplanes)


@numba.njit(cache=True, nogil=True)
def _weight_table() -> np.ndarray:
    """OpenCV's bilinear weights of each 1/32-pixel fraction pair (float32, as computed per pixel):
    row ``ty * 32 + tx`` holds (1-ty)(1-tx), (1-ty) tx, ty (1-tx), ty tx."""
    inv_tab = np.float32(1.0 / _INTER_TAB)
    one = np.float32(1.0)
    wtab = np.empty((_INTER_TAB * _INTER_TAB, 4), dtype=np.float32)
    for a in range(_INTER_TAB):
        ty = np.float32(a) * inv_tab
        uy = one - ty
        for b in range(_INTER_TAB):
            tx = np.float32(b) * inv_tab
            ux = one - tx
            k = a * _INTER_TAB + b
            wtab[k, 0] = uy * ux
            wtab[k, 1] = uy * tx
            wtab[k, 2] = ty * ux
            wtab[k, 3] = ty * tx
    return wtab


_WARP_LANES = 8  # float32 pixels per warp step
_MAP_LANES = 4  # float64 pixels per map step
_F32, _F64, _I32, _I64 = ir.FloatType(), ir.DoubleType(), ir.IntType(32), ir.IntType(64)


def _vec(t: ir.Type, n: int) -> ir.VectorType:
    return ir.VectorType(t, n)


def _splat(builder, x, n):
    v = builder.insert_element(ir.Constant(_vec(x.type, n), ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, v, ir.Constant(_vec(_I32, n), [0] * n))


def _const(t: ir.Type, n: int, value) -> ir.Constant:
    return ir.Constant(_vec(t, n), [value] * n)


def _all(builder, mask, n):
    """True where every lane of an n x i1 mask is set."""
    return builder.icmp_unsigned("==", builder.bitcast(mask, ir.IntType(n)), ir.Constant(ir.IntType(n), (1 << n) - 1))


def _pairs(builder, data, idx, n):
    """data[idx[k]] and data[idx[k] + 1] for each of the n flat float32 indices: one 8-byte load per pair,
    then split into the vector of firsts and the vector of seconds."""
    v = ir.Constant(_vec(_F64, n), ir.Undefined)
    for k, q in enumerate(idx):
        pair = builder.load(builder.bitcast(builder.gep(data, [q]), _F64.as_pointer()), align=4)
        v = builder.insert_element(v, pair, ir.Constant(_I32, k))
    v = builder.bitcast(v, _vec(_F32, 2 * n))
    firsts = builder.shuffle_vector(v, v, ir.Constant(_vec(_I32, n), [2 * k for k in range(n)]))
    seconds = builder.shuffle_vector(v, v, ir.Constant(_vec(_I32, n), [2 * k + 1 for k in range(n)]))
    return firsts, seconds


def _lanes_index(builder, vector, n):
    """The n lanes of a 32-bit index vector as 64-bit scalars (non-negative)."""
    return [builder.zext(builder.extract_element(vector, ir.Constant(_I32, k)), _I64) for k in range(n)]


@intrinsic
def _warp8(typingctx, s0, s1, s2, adelta, bdelta, x0, y0, nh, nw, j, base, d0, d1, d2):
    """Pixels j..j+7 of one output row of the fixed-point warp (all three planes), when all their taps lie inside
    the image: returns 1; else writes nothing and returns 0. The lanes compute what :func:`_warp_px` does: the
    coordinates shifted in 32-bit lanes (the caller checks they fit), the weight table's products ((32 - a) (32 - b)
    / 1024 and so on, exact in float32) formed from the fractions, and the four float32 products summed left to
    right."""
    sig = types.int64(s0, s1, s2, adelta, bdelta, x0, y0, nh, nw, j, base, d0, d1, d2)
    n = _WARP_LANES

    def codegen(context, builder, signature, args):
        at = signature.args
        data = {k: context.make_array(at[k])(context, builder, args[k]).data for k in (0, 1, 2, 3, 4, 11, 12, 13)}
        xr, yr, nhh, nww, jj, bb = (context.cast(builder, args[k], at[k], types.int64) for k in (5, 6, 7, 8, 9, 10))
        done = cgutils.alloca_once_value(builder, ir.Constant(_I64, 0))

        def coordinate(d, origin):
            terms = builder.load(builder.bitcast(builder.gep(d, [jj]), _vec(_I64, n).as_pointer()), align=8)
            units = builder.trunc(builder.add(terms, _splat(builder, origin, n)), _vec(_I32, n))
            sub = builder.ashr(units, _const(_I32, n, _SHIFT))  # 1/32 pixel
            return sub, builder.ashr(sub, _const(_I32, n, _INTER_BITS))

        sx, ix = coordinate(data[3], xr)
        sy, iy = coordinate(data[4], yr)
        one64 = ir.Constant(_I64, 1)
        zero = _const(_I32, n, 0)
        inside = builder.and_(
            builder.and_(builder.icmp_signed(">=", ix, zero), builder.icmp_signed(">=", iy, zero)),
            builder.and_(
                builder.icmp_signed("<", ix, _splat(builder, builder.trunc(builder.sub(nww, one64), _I32), n)),
                builder.icmp_signed("<", iy, _splat(builder, builder.trunc(builder.sub(nhh, one64), _I32), n)),
            ),
        )
        with builder.if_then(_all(builder, inside, n), likely=True):
            one = _const(_F32, n, 1.0)

            def fraction(sub):
                return builder.fmul(builder.sitofp(builder.and_(sub, _const(_I32, n, _INTER_TAB - 1)), _vec(_F32, n)), _const(_F32, n, 1.0 / _INTER_TAB))

            tx, ty = fraction(sx), fraction(sy)
            ux, uy = builder.fsub(one, tx), builder.fsub(one, ty)
            weights = (builder.fmul(uy, ux), builder.fmul(uy, tx), builder.fmul(ty, ux), builder.fmul(ty, tx))
            p00 = builder.add(builder.mul(iy, _splat(builder, builder.trunc(nww, _I32), n)), ix)
            top_row = _lanes_index(builder, p00, n)
            next_row = [builder.add(q, nww) for q in top_row]
            for ch in range(3):
                taps = (*_pairs(builder, data[ch], top_row, n), *_pairs(builder, data[ch], next_row, n))
                acc = builder.fmul(taps[0], weights[0])
                for t in range(1, 4):
                    acc = builder.fadd(acc, builder.fmul(taps[t], weights[t]))
                dst = builder.gep(data[11 + ch], [builder.add(bb, jj)])
                builder.store(acc, builder.bitcast(dst, acc.type.as_pointer()), align=4)
            builder.store(one64, done)
        return builder.load(done)

    return sig, codegen


@intrinsic
def _map4(typingctx, fxr, fyr, alpha, i, j, nh, nw, w0, w1, w2, o0, o1, o2):
    """Pixels j..j+3 of output row i of map_coordinates and the clip (all three planes), when none needs folding
    and none lies on the last column: returns 1; else writes nothing and returns 0. The lanes compute what
    :func:`_map_px` does in the same float64 operations and order (no fused multiply-adds), then float32, the
    clip, x 255 and the level's truncation or the value."""
    sig = types.int64(fxr, fyr, alpha, i, j, nh, nw, w0, w1, w2, o0, o1, o2)
    n = _MAP_LANES

    def codegen(context, builder, signature, args):
        at = signature.args
        data = [context.make_array(at[k])(context, builder, args[k]).data for k in (0, 1, 7, 8, 9, 10, 11, 12)]
        ii, jj, nhh, nww = (context.cast(builder, args[k], at[k], types.int64) for k in (3, 4, 5, 6))
        scale = _splat(builder, context.cast(builder, args[2], at[2], types.float64), n)
        done = cgutils.alloca_once_value(builder, ir.Constant(_I64, 0))
        vd, vf, vi = _vec(_F64, n), _vec(_F32, n), _vec(_I32, n)

        def displaced(k, origin):
            kind = context.get_value_type(at[k].dtype)
            field = builder.load(builder.bitcast(builder.gep(data[k], [jj]), _vec(kind, n).as_pointer()), align=4 if kind == _F32 else 8)
            if kind == _F32:
                field = builder.fpext(field, vd)
            step = builder.fpext(builder.fptrunc(builder.fmul(field, scale), vf), vd)  # float32(field * alpha)
            return builder.fadd(origin, step)

        one64 = ir.Constant(_I64, 1)
        r = displaced(1, _splat(builder, builder.sitofp(ii, _F64), n))
        c = displaced(0, builder.fadd(_splat(builder, builder.sitofp(jj, _F64), n), ir.Constant(vd, [float(k) for k in range(n)])))
        zero = _const(_F64, n, 0.0)
        top = _splat(builder, builder.sitofp(builder.sub(nhh, one64), _F64), n)
        right = _splat(builder, builder.sitofp(builder.sub(nww, one64), _F64), n)
        inside = builder.and_(
            builder.and_(builder.fcmp_ordered(">=", r, zero), builder.fcmp_ordered("<=", r, top)),
            builder.and_(builder.fcmp_ordered(">=", c, zero), builder.fcmp_ordered("<", c, right)),
        )
        with builder.if_then(_all(builder, inside, n), likely=True):
            floor = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vd, [vd]), f"llvm.floor.v{n}f64")
            fr, fc = builder.call(floor, [r]), builder.call(floor, [c])
            ty, tx = builder.fsub(r, fr), builder.fsub(c, fc)
            one = _const(_F64, n, 1.0)
            uy, ux = builder.fsub(one, ty), builder.fsub(one, tx)
            weights = (builder.fmul(uy, ux), builder.fmul(uy, tx), builder.fmul(ty, ux), builder.fmul(ty, tx))
            i0, j0 = builder.fptosi(fr, vi), builder.fptosi(fc, vi)
            below = builder.add(i0, _const(_I32, n, 1))
            last = _splat(builder, builder.trunc(builder.sub(nhh, one64), _I32), n)
            i1 = builder.select(builder.icmp_signed("<", below, last), below, last)
            width = _splat(builder, builder.trunc(nww, _I32), n)
            rows = (_lanes_index(builder, builder.add(builder.mul(i0, width), j0), n),
                    _lanes_index(builder, builder.add(builder.mul(i1, width), j0), n))
            lo, hi, s255 = _const(_F32, n, 0.0), _const(_F32, n, 1.0), _const(_F32, n, 255.0)
            for ch in range(3):
                taps = (*_pairs(builder, data[2 + ch], rows[0], n), *_pairs(builder, data[2 + ch], rows[1], n))
                acc = builder.fmul(weights[0], builder.fpext(taps[0], vd))
                for t in range(1, 4):
                    acc = builder.fadd(acc, builder.fmul(weights[t], builder.fpext(taps[t], vd)))
                v = builder.fptrunc(acc, vf)
                v = builder.select(builder.fcmp_ordered("<", v, lo), lo, v)
                v = builder.select(builder.fcmp_ordered(">", v, hi), hi, v)
                v = builder.fmul(v, s255)
                if at[10 + ch].dtype == types.uint8:
                    v = builder.trunc(builder.fptosi(v, vi), _vec(ir.IntType(8), n))
                dst = builder.gep(data[5 + ch], [jj])
                builder.store(v, builder.bitcast(dst, v.type.as_pointer()), align=1)
            builder.store(one64, done)
        return builder.load(done)

    return sig, codegen


@numba.njit(cache=True, nogil=True, inline="always")
def _warp_taps(wtab, x0, y0, ad, bd, nh, nw):
    """The four bilinear weights (from the table) and flat source indices of one warp pixel: its fixed-point
    coordinates ``x0 + ad``, ``y0 + bd`` (1/1024 pixel, rounding offset included), mirrored at the borders."""
    sx = (x0 + ad) >> _SHIFT
    sy = (y0 + bd) >> _SHIFT
    ix = sx >> _INTER_BITS
    iy = sy >> _INTER_BITS
    k = (sy & (_INTER_TAB - 1)) * _INTER_TAB + (sx & (_INTER_TAB - 1))
    if ix >= 0 and iy >= 0 and ix < nw - 1 and iy < nh - 1:
        p00 = iy * nw + ix
        p01 = p00 + 1
        p10 = p00 + nw
        p11 = p10 + 1
    else:
        r0 = _reflect101(iy, nh) * nw
        r1 = _reflect101(iy + 1, nh) * nw
        c0 = _reflect101(ix, nw)
        c1 = _reflect101(ix + 1, nw)
        p00 = r0 + c0
        p01 = r0 + c1
        p10 = r1 + c0
        p11 = r1 + c1
    return wtab[k, 0], wtab[k, 1], wtab[k, 2], wtab[k, 3], p00, p01, p10, p11


@numba.njit(cache=True, nogil=True, inline="always")
def _warp_row(planes, wtab, adelta, bdelta, x0, y0, nh, nw, base, warped) -> None:
    # one output row of the fixed-point warp; planes, warped: C x (H*W) float32
    nc = planes.shape[0]
    for j in range(nw):
        w0, w1, w2, w3, p00, p01, p10, p11 = _warp_taps(wtab, x0, y0, adelta[j], bdelta[j], nh, nw)
        for ch in range(nc):
            src = planes[ch]
            v = src[p00] * w0
            v += src[p01] * w1
            v += src[p10] * w2
            v += src[p11] * w3
            warped[ch, base + j] = v


@numba.njit(cache=True, nogil=True, inline="always")
def _taps(i, j, dy, dx, nh, nw, top, right):
    """The four bilinear weights and flat source indices of output pixel (i, j) displaced by (dy, dx), reflected."""
    r = i + np.float64(dy)
    c = j + np.float64(dx)
    if not (r >= 0.0 and r <= top):
        r = _fold(r, nh)
    if not (c >= 0.0 and c <= right):
        c = _fold(c, nw)
    fr = math.floor(r)
    fc = math.floor(c)
    ty64 = r - fr
    tx64 = c - fc
    ir = int(fr)
    jc = int(fc)
    i0 = min(max(ir, 0), nh - 1)
    i1 = min(max(ir + 1, 0), nh - 1)
    j0 = min(max(jc, 0), nw - 1)
    j1 = min(max(jc + 1, 0), nw - 1)
    a00 = (1.0 - ty64) * (1.0 - tx64)
    a01 = (1.0 - ty64) * tx64
    a10 = ty64 * (1.0 - tx64)
    a11 = ty64 * tx64
    p00 = i0 * nw + j0
    p01 = i0 * nw + j1
    p10 = i1 * nw + j0
    p11 = i1 * nw + j1
    return a00, a01, a10, a11, p00, p01, p10, p11


@numba.njit(cache=True, nogil=True, inline="always")
def _map_row(warped, dxr, dyr, i, nh, nw, oplanes) -> None:
    # one output row of map_coordinates(order=1, mode='reflect') and the final clip * 255
    nc = warped.shape[0]
    base = i * nw
    top = np.float64(nh - 1)
    right = np.float64(nw - 1)
    for j in range(nw):
        a00, a01, a10, a11, p00, p01, p10, p11 = _taps(i, j, dyr[j], dxr[j], nh, nw, top, right)
        for ch in range(nc):
            oplanes[ch, base + j] = _lerp_clip255(a00, a01, a10, a11, warped[ch], p00, p01, p10, p11)


@numba.njit(cache=True, nogil=True, inline="always")
def _warp_px(s0, s1, s2, wtab, xr, yr, ad, bd, nh, nw, base, j, d0, d1, d2) -> None:
    # one pixel of the fixed-point warp, all three planes
    w0, w1, w2, w3, p00, p01, p10, p11 = _warp_taps(wtab, xr, yr, ad, bd, nh, nw)
    v = s0[p00] * w0
    v += s0[p01] * w1
    v += s0[p10] * w2
    v += s0[p11] * w3
    d0[base + j] = v
    v = s1[p00] * w0
    v += s1[p01] * w1
    v += s1[p10] * w2
    v += s1[p11] * w3
    d1[base + j] = v
    v = s2[p00] * w0
    v += s2[p01] * w1
    v += s2[p10] * w2
    v += s2[p11] * w3
    d2[base + j] = v


@numba.njit(cache=True, nogil=True)
def _warp_rgb(planes, wtab, adelta, bdelta, x0, y0, nh, nw, warped) -> None:
    """_warp_row for every row of a 3-plane image (planes, warped: 3 x (H*W) float32): steps of
    :data:`_WARP_LANES` pixels where the fixed-point coordinates fit 32-bit lanes, the rest pixel by pixel."""
    s0, s1, s2 = planes[0], planes[1], planes[2]
    d0, d1, d2 = warped[0], warped[1], warped[2]
    nv = 0
    if nh > 0 and nw > 0 and np.abs(adelta).max() + np.abs(bdelta).max() + np.abs(x0).max() + np.abs(y0).max() < 2**30:
        nv = nw - nw % _WARP_LANES
    for i in range(nh):
        xr = x0[i]
        yr = y0[i]
        base = i * nw
        for j0 in range(0, nv, _WARP_LANES):
            if not _warp8(s0, s1, s2, adelta, bdelta, xr, yr, nh, nw, j0, base, d0, d1, d2):
                for j in range(j0, j0 + _WARP_LANES):
                    _warp_px(s0, s1, s2, wtab, xr, yr, adelta[j], bdelta[j], nh, nw, base, j, d0, d1, d2)
        for j in range(nv, nw):
            _warp_px(s0, s1, s2, wtab, xr, yr, adelta[j], bdelta[j], nh, nw, base, j, d0, d1, d2)


@numba.njit(cache=True, inline="always", nogil=True)
def _lerp_clip255(a00, a01, a10, a11, src, p00, p01, p10, p11):
    v = np.float32(a00 * np.float64(src[p00]) + a01 * np.float64(src[p01]) + a10 * np.float64(src[p10]) + a11 * np.float64(src[p11]))
    if v < 0:
        v = np.float32(0.0)
    elif v > 1:
        v = np.float32(1.0)
    return v * np.float32(255.0)


def _store(row, j, v):  # pragma: no cover - compiled through the overload below
    row[j] = v


@numba.extending.overload(_store, inline="always")
def _store_impl(row, j, v):
    """``row[j] = v``: the truncated level for an 8-bit row (v in 0..255), the value otherwise."""
    if row.dtype == numba.types.uint8:

        def level(row, j, v):
            row[j] = np.uint8(np.int32(v))

        return level

    def value(row, j, v):
        row[j] = v

    return value


@numba.njit(cache=True, nogil=True, inline="always")
def _map_px(w0, w1, w2, fxr, fyr, alpha, i, j, nh, nw, top, right, r0, r1, r2) -> None:
    # one pixel of map_coordinates and the clip, all three planes
    dxv = np.float32(fxr[j] * alpha)
    dyv = np.float32(fyr[j] * alpha)
    a00, a01, a10, a11, p00, p01, p10, p11 = _taps(i, j, dyv, dxv, nh, nw, top, right)
    _store(r0, j, _lerp_clip255(a00, a01, a10, a11, w0, p00, p01, p10, p11))
    _store(r1, j, _lerp_clip255(a00, a01, a10, a11, w1, p00, p01, p10, p11))
    _store(r2, j, _lerp_clip255(a00, a01, a10, a11, w2, p00, p01, p10, p11))


@numba.njit(cache=True, nogil=True)
def _map_rgb(warped, fx, fy, alpha, nh, nw, o0, o1, o2) -> None:
    """_map_row for every row of a 3-plane image, the displacement ``float32(field * alpha)`` computed here (fx, fy:
    H x W fields: the float64 smoothed ones, scaled and rounded as the tensor path does, or float32 displacements
    with alpha 1); o0..o2: H x W float32 values or uint8 levels. Steps of :data:`_MAP_LANES` pixels, the
    per-pixel code where a step has a pixel to fold or on the last row or column."""
    top = np.float64(nh - 1)
    right = np.float64(nw - 1)
    w0, w1, w2 = warped[0], warped[1], warped[2]
    nv = nw - nw % _MAP_LANES
    for i in range(nh):
        fxr = fx[i]
        fyr = fy[i]
        r0, r1, r2 = o0[i], o1[i], o2[i]
        for j0 in range(0, nv, _MAP_LANES):
            if not _map4(fxr, fyr, alpha, i, j0, nh, nw, w0, w1, w2, r0, r1, r2):
                for j in range(j0, j0 + _MAP_LANES):
                    _map_px(w0, w1, w2, fxr, fyr, alpha, i, j, nh, nw, top, right, r0, r1, r2)
        for j in range(nv, nw):
            _map_px(w0, w1, w2, fxr, fyr, alpha, i, j, nh, nw, top, right, r0, r1, r2)


@numba.njit(cache=True, nogil=True)
def elastic_levels_kernel(levels, lut, adelta, bdelta, x0, y0, fx, fy, alpha, out, start, end) -> None:
    """Images start..end-1 of 8-bit RGB ``levels`` (B x 3 x H x W uint8), read through ``lut`` (the float32
    ``level / 255``); fx, fy: B x H x W float64 smoothed fields (scaled by ``alpha`` here); out: B x 3 x H x W
    float32 values (0..255) or uint8 (the truncated levels, as the caller's truncation gives)."""
    nh, nw = out.shape[2], out.shape[3]
    src = np.empty((3, nh * nw), dtype=np.float32)
    warped = np.empty((3, nh * nw), dtype=np.float32)
    wtab = _weight_table()
    for n in range(start, end):
        for c in range(3):
            lc = levels[n, c].reshape(nh * nw)
            sc = src[c]
            for p in range(nh * nw):
                sc[p] = lut[lc[p]]
        _warp_rgb(src, wtab, adelta[n], bdelta[n], x0[n], y0[n], nh, nw, warped)
        _map_rgb(warped, fx[n], fy[n], alpha, nh, nw, out[n, 0], out[n, 1], out[n, 2])

