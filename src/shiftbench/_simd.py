"""Compiler hints shared by the compiled (numba) kernels."""

from __future__ import annotations

from numba import types
from numba.extending import intrinsic


@intrinsic
def wide_vectors(typingctx):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    """Call first in a compiled kernel: lets the compiler vectorise its loops with 512-bit registers
    where the CPU has them. LLVM's default on AVX-512 CPUs is 256 bits; the 8-bit image kernels
    run up to ~1.3x faster at 512. Only the register width changes, so every value is the same.
    The function attribute is a hint: CPUs without AVX-512 use their widest registers as before."""
    sig = types.none()

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        # llvmlite's attribute set only names the enumerated attributes; a string attribute is
        # written into the IR as it stands. Should a llvmlite version store attributes otherwise,
        # the kernel compiles without the hint.
        attrs = builder.function.attributes
        if isinstance(attrs, set):
            set.add(attrs, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return sig, codegen
