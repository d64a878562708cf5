"""Compiler hints and intrinsics shared by the compiled (numba) kernels."""

from __future__ import annotations

from llvmlite import ir
from numba import types
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
