"""The JPEG round trip's DCT passes as explicit 16-bit vector code, libjpeg-turbo's SIMD layout.

The compiled kernels of :mod:`._jpeg_cpu` leave vectorisation to the compiler, which keeps the
islow DCTs in 32-bit lanes. libjpeg-turbo's own SIMD code (what Pillow runs) holds the samples and
coefficients in 16-bit words and forms every product pair with one word multiply-add (pmaddwd):
``a x c0 + b x c1`` for 16-bit ``a, b`` into a 32-bit sum, twice the lanes and half the multiplies.
These kernels do the same, :data:`LANES` blocks per step (32; 16 with AVX2), written as LLVM vector
IR through numba intrinsics:

- words are interleaved for the multiply-adds and packed back with signed saturation per 128-bit
  lane (unpack low/high, then pack: the two undo each other, so lanes keep their order);
- every product pair is an exact rewriting of libjpeg's formula (``z1 = (a + b) c`` and
  ``a c' + z1`` become ``a (c + c') + b c``), every descale the same rounding shift, so the numbers
  are libjpeg's; the quantisation is its reciprocal multiply (high word of the unsigned product).

The multiply-add and pack intrinsics are chosen for the CPU: 512-bit (AVX-512BW), 256-bit (AVX2,
one 16-word vector) or 128-bit (SSE2, four pieces of a 32-word vector). On other CPUs :data:`AVAILABLE` is False and
:mod:`._jpeg_cpu` keeps its portable kernels.
"""

from __future__ import annotations

import os
import platform

import numba
import numpy as np
from llvmlite import binding as llb
from llvmlite import ir
from numba import types
from numba.core import cgutils, config
from numba.extending import intrinsic

from ...errors import InvalidArgumentError
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
)

_WIDTHS = {"avx512": 1, "avx2": 2, "sse2": 4, "off": 0}  # machine vectors per 32 words
ENV = "SHIFTBENCH_JPEG_VECTORS"


def _target_features() -> set[str]:
    """The CPU features numba compiles for: ``NUMBA_CPU_FEATURES`` when set (e.g. for caches shared
    between machines), else the host's, as numba's own code generator takes them."""
    if config.CPU_FEATURES is not None:
        return {f[1:] for f in str(config.CPU_FEATURES).split(",") if f.startswith("+")}
    return {name for name, on in llb.get_host_cpu_features().items() if on}


def _pieces() -> int:
    """How many machine vectors make 32 words (0: no x86 word multiply-add here, or
    turned off). ``SHIFTBENCH_JPEG_VECTORS`` = avx512, avx2, sse2 or off may narrow the choice
    (never widen it past the CPU's)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return 0
    features = _target_features()
    best = 1 if "avx512bw" in features else 2 if "avx2" in features else 4  # SSE2: part of x86-64
    asked = os.environ.get(ENV, "").strip().lower()
    if not asked:
        return best
    if asked not in _WIDTHS:
        raise InvalidArgumentError(ENV, asked, f"one of {', '.join(_WIDTHS)} (or unset: the widest the CPU has)")
    return _WIDTHS[asked] if _WIDTHS[asked] == 0 or _WIDTHS[asked] >= best else best


_PIECES = _pieces()
AVAILABLE = _PIECES > 0
# blocks per step, the words of a kernel vector: 32 (one 512-bit vector; four 128-bit ones with
# SSE2), 16 with AVX2, where one 256-bit register holds a vector: the eight rows of a step and the
# odd part's products then fit the 16 registers (a 32-word step would spill to memory)
LANES = 16 if _PIECES == 2 else 32
_SPLIT = max(1, _PIECES * LANES // 32)  # machine vectors per kernel vector
# compiled code depends on _PIECES, which numba's cache does not see: cache only the CPU's own choice
# (so do the callers that compile code() in)
CACHE = not os.environ.get(ENV, "").strip()

_I16, _I32 = ir.IntType(16), ir.IntType(32)
_W = ir.VectorType(_I16, LANES)  # a kernel vector of words
_D = ir.VectorType(_I32, LANES // 2)  # and of double words


def _words(*values: int) -> ir.Constant:
    """A word vector repeating ``values``."""
    return ir.Constant(_W, [ir.Constant(_I16, values[i % len(values)]) for i in range(LANES)])


def _dwords(value: int) -> ir.Constant:
    return ir.Constant(_D, [ir.Constant(_I32, value)] * (LANES // 2))


def _mask(idx: list[int]) -> ir.Constant:
    return ir.Constant(ir.VectorType(_I32, len(idx)), [ir.Constant(_I32, i) for i in idx])


def _unpack_masks(g: int) -> list[ir.Constant]:
    """Unpack low / high per 128-bit lane (8 words) in groups of ``g`` words: for g = 1,
    a0 b0 a1 b1 a2 b2 a3 b3 | a8 b8 ... and a4 b4 ... a7 b7 | a12 b12 ... (punpck{l,h}wd, dq, qdq)."""
    return [
        _mask([
            base + 8 * lane + 4 * half + g * i + k
            for lane in range(LANES // 8) for i in range(4 // g) for base in (0, LANES) for k in range(g)
        ])  # fmt: skip
        for half in (0, 1)
    ]


_UNPACK = {g: _unpack_masks(g) for g in (1, 2, 4)}


class _Emit:
    """The operations of one kernel step on vectors of ``LANES`` words and ``LANES / 2`` double words."""

    def __init__(self, builder: ir.IRBuilder) -> None:
        self.b = builder
        m = builder.module
        n = LANES // _SPLIT  # words per machine vector
        if _PIECES == 1:
            names = ("llvm.x86.avx512.pmaddw.d.512", "llvm.x86.avx512.packssdw.512")
        elif _PIECES == 2:
            names = ("llvm.x86.avx2.pmadd.wd", "llvm.x86.avx2.packssdw")
        else:
            names = ("llvm.x86.sse2.pmadd.wd", "llvm.x86.sse2.packssdw.128")
        wv, dv = ir.VectorType(_I16, n), ir.VectorType(_I32, n // 2)
        self._madd = cgutils.get_or_insert_function(m, ir.FunctionType(dv, [wv, wv]), names[0])
        self._pack = cgutils.get_or_insert_function(m, ir.FunctionType(wv, [dv, dv]), names[1])
        self._n = n

    # pieces of a vector for the machine-width intrinsics, and back
    def _split(self, v: ir.Value, size: int) -> list[ir.Value]:
        if _SPLIT == 1:
            return [v]
        return [self.b.shuffle_vector(v, v, _mask(list(range(p * size, (p + 1) * size)))) for p in range(_SPLIT)]

    def _join(self, parts: list[ir.Value]) -> ir.Value:
        while len(parts) > 1:
            size = parts[0].type.count
            parts = [self.b.shuffle_vector(parts[i], parts[i + 1], _mask(list(range(2 * size)))) for i in range(0, len(parts), 2)]
        return parts[0]

    def madd(self, x: ir.Value, c: ir.Constant) -> ir.Value:
        """Word multiply-add: double word ``i`` = x[2i] c[2i] + x[2i+1] c[2i+1]."""
        xs, cs = self._split(x, self._n), self._split(c, self._n)
        return self._join([self.b.call(self._madd, [xp, cp]) for xp, cp in zip(xs, cs)])

    def pack(self, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """Signed-saturating pack per 128-bit lane: the inverse of :meth:`unpack`'s order."""
        h = self._n // 2
        return self._join([self.b.call(self._pack, [a, c]) for a, c in zip(self._split(lo, h), self._split(hi, h))])

    def unpack(self, a: ir.Value, c: ir.Value, g: int = 1) -> tuple[ir.Value, ir.Value]:
        lo, hi = _UNPACK[g]
        return self.b.shuffle_vector(a, c, lo), self.b.shuffle_vector(a, c, hi)

    def transpose(self, r: list[ir.Value]) -> list[ir.Value]:
        """The 8 x 8 word transpose of each 128-bit lane of eight vectors: word i of lane L of
        output k is word k of lane L of input i."""
        t = [x for i in range(0, 8, 2) for x in self.unpack(r[i], r[i + 1], 1)]  # (0,1)lo (0,1)hi (2,3)lo ...
        s = [*self.unpack(t[0], t[2], 2), *self.unpack(t[1], t[3], 2), *self.unpack(t[4], t[6], 2), *self.unpack(t[5], t[7], 2)]
        return [x for i in range(4) for x in self.unpack(s[i], s[i + 4], 4)]

    def pair(self, a: ir.Value, c: ir.Value, k0: tuple[int, int], k1: tuple[int, int]) -> tuple[list[ir.Value], list[ir.Value]]:
        """``a k0[0] + c k0[1]`` and ``a k1[0] + c k1[1]`` (double words, exact), each as its
        [low, high] halves in :meth:`unpack`'s order."""
        lo, hi = self.unpack(a, c)
        w0, w1 = _words(*k0), _words(*k1)
        return [self.madd(lo, w0), self.madd(hi, w0)], [self.madd(lo, w1), self.madd(hi, w1)]

    def add2(self, x: list[ir.Value], y: list[ir.Value]) -> list[ir.Value]:
        return [self.b.add(p, q) for p, q in zip(x, y)]

    def sub2(self, x: list[ir.Value], y: list[ir.Value]) -> list[ir.Value]:
        return [self.b.sub(p, q) for p, q in zip(x, y)]

    def descale(self, x: list[ir.Value], n: int) -> ir.Value:
        """(x + 2**(n-1)) >> n of both halves, packed to words."""
        r, s = _dwords(1 << (n - 1)), _dwords(n)
        return self.pack(*(self.b.ashr(self.b.add(p, r), s) for p in x))

    def odd(self, t0: ir.Value, t1: ir.Value, t2: ir.Value, t3: ir.Value) -> tuple[list[ir.Value], ...]:
        """The islow DCTs' odd part (forward and inverse) as four multiply-add pairs."""
        b = self.b
        z3, z4 = self.pair(b.add(t0, t2), b.add(t1, t3), (F1_175 - F1_961, F1_175), (F1_175, F1_175 - F0_390))
        p0, p3 = self.pair(t0, t3, (F0_298 - F0_899, -F0_899), (-F0_899, F1_501 - F0_899))
        p1, p2 = self.pair(t1, t2, (F2_053 - F2_562, -F2_562), (-F2_562, F3_072 - F2_562))
        return self.add2(p0, z3), self.add2(p1, z4), self.add2(p2, z3), self.add2(p3, z4)

    def splat(self, x: ir.Value) -> ir.Value:
        """A word vector of one 16-bit scalar."""
        v = self.b.insert_element(ir.Constant(_W, ir.Undefined), x, ir.Constant(_I32, 0))
        return self.b.shuffle_vector(v, v, _mask([0] * LANES))


def _row_pointer(context, builder, aty, aval):
    """Data pointer and row length of a C-contiguous 2-D array."""
    ary = context.make_array(aty)(context, builder, aval)
    ncol = cgutils.unpack_tuple(builder, ary.shape, 2)[1]
    return ary.data, ncol


def _address(builder, data, ncol, row, j):
    idx = builder.add(builder.mul(row, ncol), j)
    return builder.bitcast(builder.gep(data, [idx]), _W.as_pointer())


_ARR = types.Array(types.int16, 2, "C")
_FLAT = types.Array(types.int16, 1, "C")
_FLAT8 = types.Array(types.uint8, 1, "C")


def _fdct(e: _Emit, d: list[ir.Value], first: bool) -> list[ir.Value]:
    """One islow forward DCT pass on eight word vectors. The first (rows): outputs 0 and 4 shifted
    left by 2 bits, the rotated ones descaled by 11; the second (columns): 0 and 4 descaled by 2,
    the others by 15."""
    b = e.b
    tmp0, tmp7 = b.add(d[0], d[7]), b.sub(d[0], d[7])
    tmp1, tmp6 = b.add(d[1], d[6]), b.sub(d[1], d[6])
    tmp2, tmp5 = b.add(d[2], d[5]), b.sub(d[2], d[5])
    tmp3, tmp4 = b.add(d[3], d[4]), b.sub(d[3], d[4])
    tmp10, tmp13 = b.add(tmp0, tmp3), b.sub(tmp0, tmp3)
    tmp11, tmp12 = b.add(tmp1, tmp2), b.sub(tmp1, tmp2)
    two = _words(2)
    if first:
        f0, f4, n = b.shl(b.add(tmp10, tmp11), two), b.shl(b.sub(tmp10, tmp11), two), 11
    else:
        f0, f4, n = b.ashr(b.add(b.add(tmp10, tmp11), two), two), b.ashr(b.add(b.sub(tmp10, tmp11), two), two), 15
    o2, o6 = e.pair(tmp13, tmp12, (F0_541 + F0_765, F0_541), (F0_541, F0_541 - F1_847))
    o7, o5, o3, o1 = e.odd(tmp4, tmp5, tmp6, tmp7)
    return [f0, e.descale(o1, n), e.descale(o2, n), e.descale(o3, n), f4, e.descale(o5, n), e.descale(o6, n), e.descale(o7, n)]


def _idct(e: _Emit, d: list[ir.Value]) -> list[list[ir.Value]]:
    """One islow inverse DCT pass on eight word vectors, before its descale (double-word halves)."""
    tmp3, tmp2 = e.pair(d[2], d[6], (F0_541 + F0_765, F0_541), (F0_541, F0_541 - F1_847))
    tmp0, tmp1 = e.pair(d[0], d[4], (1 << 13, 1 << 13), (1 << 13, -(1 << 13)))  # (d0 +- d4) << 13
    t10, t13 = e.add2(tmp0, tmp3), e.sub2(tmp0, tmp3)
    t11, t12 = e.add2(tmp1, tmp2), e.sub2(tmp1, tmp2)
    q0, q1, q2, q3 = e.odd(d[7], d[5], d[3], d[1])
    return [
        e.add2(t10, q3), e.add2(t11, q2), e.add2(t12, q1), e.add2(t13, q0),
        e.sub2(t13, q0), e.sub2(t12, q1), e.sub2(t11, q2), e.sub2(t10, q3),
    ]  # fmt: skip


def _segments(builder, data, n, r, j, vtype):
    """Pointers (as ``vtype``) to the eight runs of ``LANES`` samples that hold segments r * n + j ..
    r * n + j + LANES - 1 of a plane (8 samples each, see :class:`._jpeg_cpu._Plane`)."""
    first = builder.mul(builder.add(builder.mul(r, n), j), ir.Constant(r.type, 8))
    return [builder.bitcast(builder.gep(data, [builder.add(first, ir.Constant(r.type, LANES * i))]), vtype.as_pointer()) for i in range(8)]


def _load_rows(context, builder, aty, aval, rows, j):
    data, ncol = _row_pointer(context, builder, aty, aval)
    return [builder.load(_address(builder, data, ncol, r, j), align=2) for r in rows]


@intrinsic
def _row_step(typingctx, level, o, n, r, j):
    """Blocks j..j+LANES-1, row r: the forward DCT's row pass from the plane's 8-sample segments
    (segment r * n + j is row r of block j, see :class:`._jpeg_cpu._Plane`) to ``o[r * 8 + u, j']``,
    the blocks in lane order (:meth:`_Emit.transpose`: block j + (LANES / 8) i + L at word 8L + i)."""
    sig = types.none(_FLAT, _ARR, types.intp, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        e, b = _Emit(builder), builder
        n, r, j = args[2], args[3], args[4]
        intp = r.type
        seg = _segments(builder, context.make_array(_FLAT)(context, builder, args[0]).data, n, r, j, _W)
        f = _fdct(e, e.transpose([b.load(x, align=2) for x in seg]), first=True)
        od, on = _row_pointer(context, builder, _ARR, args[1])
        r8 = b.mul(r, ir.Constant(intp, 8))
        for u in range(8):
            b.store(f[u], _address(b, od, on, b.add(r8, ir.Constant(intp, u)), j), align=2)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _column_step(typingctx, o, ws, tab, u, j):
    """Blocks j..j+LANES-1, coefficient column u: the forward DCT's column pass, quantisation and
    dequantisation (``tab``: :func:`word_table`'s q, reciprocal, correction, shift - 16), the inverse
    DCT's column pass descaled by 11 bits and packed with saturation (as libjpeg-turbo's SIMD
    code does): ``o[v * 8 + u, j]`` -> ``ws[v * 8 + u, j]``."""
    sig = types.none(_ARR, _ARR, _ARR, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        e, b = _Emit(builder), builder
        u, j = args[3], args[4]
        intp = u.type
        rows = [b.add(ir.Constant(intp, 8 * v), u) for v in range(8)]
        f = _fdct(e, _load_rows(context, builder, _ARR, args[0], rows, j), first=False)
        td, tn = _row_pointer(context, builder, _ARR, args[2])
        wide = ir.VectorType(_I32, LANES)
        sixteen, fifteen = ir.Constant(wide, [ir.Constant(_I32, 16)] * LANES), _words(15)
        zero = ir.Constant(intp, 0)
        dq = []
        for v in range(8):  # sign(f) ((|f| + corr) recip >> 16 >> shift) q
            q, m, c = (b.load(_address(b, td, tn, b.add(ir.Constant(intp, 64 * k), rows[v]), zero), align=2) for k in range(3))
            s = b.load(b.gep(td, [b.mul(b.add(ir.Constant(intp, 192), rows[v]), tn)]))  # a scalar: one shift for all lanes
            sgn = b.ashr(f[v], fifteen)
            mag = b.add(b.sub(b.xor(f[v], sgn), sgn), c)
            hi = b.trunc(b.lshr(b.mul(b.zext(mag, wide), b.zext(m, wide)), sixteen), _W)
            mag = b.lshr(hi, e.splat(s))
            dq.append(b.mul(b.sub(b.xor(mag, sgn), sgn), q))
        wd, wn = _row_pointer(context, builder, _ARR, args[1])
        for v, x in enumerate(_idct(e, dq)):
            b.store(e.descale(x, 11), _address(b, wd, wn, rows[v], j), align=2)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _sample_step(typingctx, ws, dec, n, r, j):
    """Blocks j..j+LANES-1 (in lane order), row r: the inverse DCT's row pass, descaled by 18 bits, and
    libjpeg's range limit (x + 128 clipped to 0..255 for x in -384..639, the 10-bit wrap-round
    beyond): ``ws[r * 8 + k, j']`` -> the decoded plane's segments r * n + j.. (as :func:`_row_step`)."""
    sig = types.none(_ARR, _FLAT8, types.intp, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        e, b = _Emit(builder), builder
        n, r, j = args[2], args[3], args[4]
        intp = r.type
        r8 = b.mul(r, ir.Constant(intp, 8))
        x = _idct(e, _load_rows(context, builder, _ARR, args[0], [b.add(r8, ir.Constant(intp, k)) for k in range(8)], j))
        zero, top = _words(0), _words(255)
        levels = []
        for k in range(8):
            v = b.sub(b.and_(b.add(e.descale(x[k], 18), _words(512)), _words(1023)), _words(512 - 128))
            v = b.select(b.icmp_signed("<", v, zero), zero, v)
            levels.append(b.select(b.icmp_signed(">", v, top), top, v))
        bytes_ = ir.VectorType(ir.IntType(8), LANES)
        seg = _segments(builder, context.make_array(_FLAT8)(context, builder, args[1]).data, n, r, j, bytes_)
        for ptr, v in zip(seg, e.transpose(levels)):
            b.store(b.trunc(v, bytes_), ptr, align=1)
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=CACHE, nogil=True)
def code(level: np.ndarray, n: int, o: np.ndarray, ws: np.ndarray, dec: np.ndarray, tab: np.ndarray) -> None:
    """The DCT passes of one plane of ``n`` blocks: level-shifted samples (``level``, segments as
    in :class:`._jpeg_cpu._Plane`) -> decoded samples (``dec``, the same layout), ``LANES``
    blocks a step. ``o`` and ``ws`` have a multiple of ``LANES`` columns, at least ``n``, and may
    be one array (a column step stores to the rows it has loaded); ``level`` and ``dec`` hold
    ``LANES`` segments more than ``8 n``: a last step past block n - 1 reads the next row's
    segments (or that margin) and writes its garbage where a later row's step overwrites it (or in
    the margin). ``tab``: :func:`word_table`."""
    m = o.shape[1]
    for r in range(8):
        for j in range(0, m, LANES):
            _row_step(level, o, n, r, j)
    for u in range(8):
        for j in range(0, m, LANES):
            _column_step(o, ws, tab, u, j)
    for r in range(8):
        for j in range(0, m, LANES):
            _sample_step(ws, dec, n, r, j)


def word_table(tab: np.ndarray) -> np.ndarray:
    """:func:`._jpeg_cpu._tables`' int32 rows (q, reciprocal, correction, shift) as the words
    :func:`code` reads: the reciprocal's 16 bits as they stand, the shift less 16; each of the
    4 x 64 words repeated ``LANES`` times (a row of the 256 x ``LANES`` result), so that a step
    loads the vectors it multiplies by instead of broadcasting words."""
    out = tab.astype(np.int64)
    out[3] -= 16
    words = (out & 0xFFFF).astype(np.uint16).view(np.int16).reshape(-1, 1)
    return np.ascontiguousarray(np.repeat(words, LANES, axis=1))
