"""Matrix transposes for the compiled kernels: 16 x 16 byte blocks and 4 x 4 blocks of 32- or 64-bit
values as vector shuffles.

A pass along image rows that reads a few neighbours per output (Pillow's horizontal BOX pass) does
not vectorise; on a transposed plane the same pass runs along columns, whole rows at a time. A
scalar transpose moves one byte per instruction, which costs more than the pass itself. Here a
16 x 16 block is 16 vector loads, four rounds of interleaves (``out[2j], out[2j + 1]`` = the low and
high halves of rows ``j`` and ``j + 8`` interleaved byte by byte; four rounds transpose the block)
and 16 vector stores, written as portable LLVM vector IR (``shufflevector``), which the compiler
turns into the CPU's byte-unpack instructions. Edges narrower than a block are moved one byte at a time.
:func:`transpose4` moves a 4 x 4 block of floats the same way (four loads, eight shuffles, four stores).
Only values move, so every value is the same.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["transpose_into", "transpose4"]

_I8x16 = ir.VectorType(ir.IntType(8), 16)
_LO = ir.Constant(ir.VectorType(ir.IntType(32), 16), [m for k in range(8) for m in (k, 16 + k)])
_HI = ir.Constant(ir.VectorType(ir.IntType(32), 16), [m for k in range(8) for m in (8 + k, 24 + k)])


@intrinsic
def _block16(typingctx, src, soff, sstride, dst, doff, dstride):
    """dst[doff + c * dstride + r] = src[soff + r * sstride + c] for r, c in 0..15 (flat uint8 arrays)."""
    sig = types.void(src, soff, sstride, dst, doff, dstride)

    def codegen(context, builder, signature, args):
        intp = context.get_value_type(types.intp)
        sdata = context.make_array(signature.args[0])(context, builder, args[0]).data
        ddata = context.make_array(signature.args[3])(context, builder, args[3]).data
        so, ss, do, ds = (
            context.cast(builder, args[k], signature.args[k], types.intp) for k in (1, 2, 4, 5)
        )
        rows = []
        for r in range(16):
            off = builder.add(so, builder.mul(ss, ir.Constant(intp, r)))
            ptr = builder.bitcast(builder.gep(sdata, [off]), _I8x16.as_pointer())
            rows.append(builder.load(ptr, align=1))
        for _ in range(4):
            nxt = []
            for j in range(8):
                nxt.append(builder.shuffle_vector(rows[j], rows[j + 8], _LO))
                nxt.append(builder.shuffle_vector(rows[j], rows[j + 8], _HI))
            rows = nxt
        for c in range(16):
            off = builder.add(do, builder.mul(ds, ir.Constant(intp, c)))
            ptr = builder.bitcast(builder.gep(ddata, [off]), _I8x16.as_pointer())
            builder.store(rows[c], ptr, align=1)
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True, nogil=True)
def transpose_into(src: np.ndarray, dst: np.ndarray) -> None:
    """``dst[:] = src.T`` for C-contiguous 2-D uint8 arrays (src H x W, dst W x H)."""
    h, w = src.shape
    fs = src.reshape(-1)
    fd = dst.reshape(-1)
    h16 = h - h % 16
    w16 = w - w % 16
    for r0 in range(0, h16, 16):
        for c0 in range(0, w16, 16):
            _block16(fs, r0 * w + c0, w, fd, c0 * h + r0, h)
        for r in range(r0, r0 + 16):
            for c in range(w16, w):
                fd[c * h + r] = fs[r * w + c]
    for r in range(h16, h):
        for c in range(w):
            fd[c * h + r] = fs[r * w + c]


def _lanes(*ix: int) -> ir.Constant:
    return ir.Constant(ir.VectorType(ir.IntType(32), 4), list(ix))


@intrinsic
def transpose4(typingctx, src, si, sj, dst, di, dj):
    """``dst[di:di+4, dj:dj+4] = src[si:si+4, sj:sj+4].T`` for 2-D C-contiguous arrays of one dtype:
    four vector loads, eight shuffles (pairs of rows interleaved, then pairs of halves) and four
    vector stores. The indices are not checked."""
    sig = types.void(src, si, sj, dst, di, dj)

    def codegen(context, builder, signature, args):
        srct, dstt = signature.args[0], signature.args[3]
        vec = ir.VectorType(context.get_value_type(srct.dtype), 4)

        def row_ptr(aryty, value, i, j, k):
            ary = context.make_array(aryty)(context, builder, value)
            p = cgutils.get_item_pointer(context, builder, aryty, ary, [builder.add(i, ir.Constant(i.type, k)), j])
            return builder.bitcast(p, vec.as_pointer())

        a, b, c, d = (builder.load(row_ptr(srct, args[0], args[1], args[2], k), align=4) for k in range(4))
        ab0, ab1 = builder.shuffle_vector(a, b, _lanes(0, 4, 2, 6)), builder.shuffle_vector(a, b, _lanes(1, 5, 3, 7))
        cd0, cd1 = builder.shuffle_vector(c, d, _lanes(0, 4, 2, 6)), builder.shuffle_vector(c, d, _lanes(1, 5, 3, 7))
        cols = (
            builder.shuffle_vector(ab0, cd0, _lanes(0, 1, 4, 5)),
            builder.shuffle_vector(ab1, cd1, _lanes(0, 1, 4, 5)),
            builder.shuffle_vector(ab0, cd0, _lanes(2, 3, 6, 7)),
            builder.shuffle_vector(ab1, cd1, _lanes(2, 3, 6, 7)),
        )
        for k in range(4):
            builder.store(cols[k], row_ptr(dstt, args[3], args[4], args[5], k), align=4)
        return context.get_dummy_value()

    return sig, codegen
