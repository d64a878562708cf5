"""The JPEG tables and integer constants shared by the tensor, compiled and vector JPEG paths.

Annex K quantisation tables of ITU-T T.81, libjpeg-turbo's "islow" DCT constants (13-bit fixed
point, 2 extra bits between the passes), its 16-bit colour-conversion fixed point, the quality
scaling of ``jpeg_set_quality`` and the reciprocal quantisation of ``jcdctmgr.c``.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = [
    "STD_LUMA", "STD_CHROMA", "CONST_BITS", "PASS1_BITS", "SCALE", "HALF", "fix", "quant_tables", "divisors",
    "F0_298", "F0_390", "F0_541", "F0_765", "F0_899", "F1_175", "F1_501", "F1_847", "F1_961", "F2_053",
    "F2_562", "F3_072",
]  # fmt: skip

# Annex K of the JPEG standard (ITU-T T.81), natural (row-major) order.
STD_LUMA = (
    16, 11, 10, 16, 24, 40, 51, 61,
    12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77,
    24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101,
    72, 92, 95, 98, 112, 100, 103, 99,
)  # fmt: skip
STD_CHROMA = (
    17, 18, 24, 47, 99, 99, 99, 99,
    18, 21, 26, 66, 99, 99, 99, 99,
    24, 26, 56, 99, 99, 99, 99, 99,
    47, 66, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99,
)  # fmt: skip

# islow DCT constants: round(x * 2**13)
CONST_BITS = 13
PASS1_BITS = 2
F0_298 = 2446
F0_390 = 3196
F0_541 = 4433
F0_765 = 6270
F0_899 = 7373
F1_175 = 9633
F1_501 = 12299
F1_847 = 15137
F1_961 = 16069
F2_053 = 16819
F2_562 = 20995
F3_072 = 25172

SCALE = 16  # colour conversion fixed point
HALF = 1 << (SCALE - 1)


def fix(x: float) -> int:
    """``x`` in libjpeg's 16-bit colour-conversion fixed point (``FIX(x)`` of jdcolor.c)."""
    return int(x * (1 << SCALE) + 0.5)


@lru_cache(maxsize=64)
def quant_tables(quality: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """libjpeg's ``jpeg_set_quality(quality, force_baseline=TRUE)``: the Annex K tables scaled
    (5000 / q below 50, 200 - 2 q from 50) and clipped to 1..255."""
    q = min(100, max(1, int(quality)))
    scale = 5000 // q if q < 50 else 200 - 2 * q

    def scaled(table: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(min(255, max(1, (v * scale + 50) // 100)) for v in table)

    return scaled(STD_LUMA), scaled(STD_CHROMA)


def divisors(table: tuple[int, ...]) -> tuple[list[int], list[int], list[int]]:
    """libjpeg-turbo's quantisation by multiplication: per coefficient a 16-bit reciprocal, a
    rounding correction and a shift, for the divisor 8 * q (the DCT output carries a factor 8)."""
    recip, corr, shift = [], [], []
    for q in table:
        d = 8 * q
        b = d.bit_length() - 1
        r = 16 + b
        fq, fr = divmod(1 << r, d)
        c = d // 2
        if fr == 0:
            fq >>= 1
            r -= 1
        elif fr <= d // 2:
            c += 1
        else:
            fq += 1
        recip.append(fq)
        corr.append(c)
        shift.append(r)
    return recip, corr, shift
