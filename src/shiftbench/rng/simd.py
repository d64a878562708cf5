"""Compiler hints and intrinsics shared by the compiled (numba) kernels."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def wide_vectors(typingctx):
    """Call first in a compiled kernel: lets the compiler vectorise its loops with 512-bit registers
    where the CPU has them. LLVM's default on AVX-512 CPUs is 256 bits; the 8-bit image kernels
    run up to ~1.3x faster at 512. Only the register width changes, so every value is the same.
    The function attribute is a hint: CPUs without AVX-512 use their widest registers as before."""
    sig = types.none()

    def codegen(context, builder, signature, args):
        # llvmlite's attribute set only names the enumerated attributes; a string attribute is
        # written into the IR as it stands. Should a llvmlite version store attributes otherwise,
        # the kernel compiles without the hint.
        attrs = builder.function.attributes
        if isinstance(attrs, set):
            set.add(attrs, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return sig, codegen


def mul_high(bits: int, signed: bool):
    """An intrinsic: the high ``bits`` bits of the double-width product of two ``bits``-bit
    integers (one ``mul`` for 64 bits; vpmulhw / vpmulhuw when 16-bit loops vectorise)."""
    t = getattr(types, f"{'int' if signed else 'uint'}{bits}")

    @intrinsic
    def _mulhi(typingctx, a, b):
        sig = t(t, t)

        def codegen(context, builder, signature, args):
            wide = ir.IntType(2 * bits)
            ext = builder.sext if signed else builder.zext
            p = builder.mul(ext(args[0], wide), ext(args[1], wide))
            shift = builder.ashr if signed else builder.lshr
            return builder.trunc(shift(p, ir.Constant(wide, bits)), ir.IntType(bits))

        return sig, codegen

    return _mulhi


def _lanes(*ix: int) -> ir.Constant:
    return ir.Constant(ir.VectorType(ir.IntType(32), 4), list(ix))


@intrinsic
def transpose4(typingctx, src, si, sj, dst, di, dj):
    """``dst[di:di+4, dj:dj+4] = src[si:si+4, sj:sj+4].T`` for 2-D C-contiguous arrays of one dtype: four
    vector loads, eight shuffles and four vector stores (a transposing loop moves one value at a time).
    The indices are not checked; only values move, so every value is the same."""
    sig = types.none(src, si, sj, dst, di, dj)

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
