"""Raw 64-bit words of a NumPy ``PCG64`` stream, generated in compiled code.

``BitGenerator.random_raw(n)`` calls the generator through a function pointer once per word
(~2.5 ns each); the noise corruptions take 30,000-80,000 words per image. :func:`raw_words`
runs PCG64's step (128-bit LCG, XSL-RR output) in one compiled loop instead and then moves the
generator's state on by the same number of steps, so the words, and everything drawn from the
generator afterwards, are exactly those of ``random_raw`` (tested against it).
"""

from __future__ import annotations

import numba
import numpy as np

from .simd import mul_high

_MASK64 = (1 << 64) - 1
# PCG's default 128-bit multiplier (O'Neill 2014; NumPy's PCG64)
_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_MULT_HI = np.uint64(_MULT >> 64)
_MULT_LO = np.uint64(_MULT & _MASK64)
# four steps at once: state * MULT**4 + inc * (1 + MULT + MULT**2 + MULT**3)  (mod 2**128)
_MULT4 = pow(_MULT, 4, 1 << 128)
_INC_SUM4 = (1 + _MULT + _MULT**2 + _MULT**3) % (1 << 128)


_mulhi64 = mul_high(64, signed=False)  # high 64 bits of the 128-bit product of two uint64


@numba.njit(cache=True, nogil=True, inline="always")
def _step(
    hi: np.uint64, lo: np.uint64, m_hi: np.uint64, m_lo: np.uint64, i_hi: np.uint64, i_lo: np.uint64
) -> tuple[np.uint64, np.uint64]:
    """state * m + i (mod 2**128) on (high, low) 64-bit halves."""
    p_lo = lo * m_lo
    p_hi = hi * m_lo + lo * m_hi + _mulhi64(lo, m_lo)
    n_lo = p_lo + i_lo
    return p_hi + i_hi + (np.uint64(1) if n_lo < p_lo else np.uint64(0)), n_lo


@numba.njit(cache=True, nogil=True, inline="always")
def _output(hi: np.uint64, lo: np.uint64) -> np.uint64:
    """PCG's XSL-RR output of a 128-bit state."""
    x = hi ^ lo
    rot = hi >> np.uint64(58)
    return (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))


@numba.njit(cache=True, nogil=True)
def _fill4(lanes: np.ndarray, jump: np.ndarray, out: np.ndarray) -> None:
    """Words from four interleaved lanes: lane k holds the state k + 1 steps ahead and every lane
    jumps four steps at a time (``jump``: multiplier and increment of four steps, as halves), so
    the four multiply chains run side by side. ``out``: a multiple of 4 words. ``lanes`` (4 x 2:
    high, low) ends as the lanes' last states."""
    m_hi, m_lo, i_hi, i_lo = jump[0], jump[1], jump[2], jump[3]
    h0, l0, h1, l1 = lanes[0, 0], lanes[0, 1], lanes[1, 0], lanes[1, 1]
    h2, l2, h3, l3 = lanes[2, 0], lanes[2, 1], lanes[3, 0], lanes[3, 1]
    n = out.shape[0]
    for b in range(0, n, 4):
        if b > 0:
            h0, l0 = _step(h0, l0, m_hi, m_lo, i_hi, i_lo)
            h1, l1 = _step(h1, l1, m_hi, m_lo, i_hi, i_lo)
            h2, l2 = _step(h2, l2, m_hi, m_lo, i_hi, i_lo)
            h3, l3 = _step(h3, l3, m_hi, m_lo, i_hi, i_lo)
        out[b] = _output(h0, l0)
        out[b + 1] = _output(h1, l1)
        out[b + 2] = _output(h2, l2)
        out[b + 3] = _output(h3, l3)
    lanes[0, 0], lanes[0, 1], lanes[1, 0], lanes[1, 1] = h0, l0, h1, l1
    lanes[2, 0], lanes[2, 1], lanes[3, 0], lanes[3, 1] = h2, l2, h3, l3


def _split(v: int) -> tuple[int, int]:
    return (v >> 64) & _MASK64, v & _MASK64


def raw_words(bit_generator: np.random.BitGenerator, n: int) -> np.ndarray:
    """``bit_generator.random_raw(n)``, the same words and the same state afterwards."""
    if type(bit_generator) is not np.random.PCG64 or n < 256:
        return bit_generator.random_raw(n)
    st = bit_generator.state
    s, inc = int(st["state"]["state"]), int(st["state"]["inc"])
    lanes = np.empty((4, 2), dtype=np.uint64)
    for k in range(4):
        s = (s * _MULT + inc) % (1 << 128)
        lanes[k] = _split(s)
    out = np.empty(-(-n // 4) * 4, dtype=np.uint64)
    _fill4(lanes, np.array(_split(_MULT4) + _split(inc * _INC_SUM4 % (1 << 128)), dtype=np.uint64), out)
    last = lanes[(n - 1) % 4]  # the lane that made word n - 1 (lanes after it ran one step further)
    st["state"]["state"] = (int(last[0]) << 64) | int(last[1])
    bit_generator.state = st
    return out[:n]
