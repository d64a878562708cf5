"""Raw 64-bit words of a NumPy ``PCG64`` stream, generated in compiled code.

``BitGenerator.random_raw(n)`` calls the generator through a function pointer once per word
(~2.5 ns each); the noise corruptions take 30,000-80,000 words per image. :func:`raw_words`
runs PCG64's step (128-bit LCG, XSL-RR output) in one compiled loop instead and then moves the
generator's state on by the same number of steps, so the words, and everything drawn from the
generator afterwards, are exactly those of ``random_raw`` (tested against it).
"""

from __future__ import annotations

from typing import Any

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
def pcg_step(
    hi: np.uint64, lo: np.uint64, m_hi: np.uint64, m_lo: np.uint64, i_hi: np.uint64, i_lo: np.uint64
) -> tuple[np.uint64, np.uint64]:
    """state * m + i (mod 2**128) on (high, low) 64-bit halves."""
    p_lo = lo * m_lo
    p_hi = hi * m_lo + lo * m_hi + _mulhi64(lo, m_lo)
    n_lo = p_lo + i_lo
    return p_hi + i_hi + (np.uint64(1) if n_lo < p_lo else np.uint64(0)), n_lo


@numba.njit(cache=True, nogil=True, inline="always")
def pcg_output(hi: np.uint64, lo: np.uint64) -> np.uint64:
    """PCG's XSL-RR output of a 128-bit state."""
    x = hi ^ lo
    rot = hi >> np.uint64(58)
    return (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))


@numba.njit(cache=True, nogil=True, inline="always")
def _step4(h0, l0, h1, l1, h2, l2, h3, l3, jump):
    """Each of four lanes (high, low halves) moved on by ``jump`` (multiplier and increment, as halves)."""
    m_hi, m_lo, i_hi, i_lo = jump[0], jump[1], jump[2], jump[3]
    h0, l0 = pcg_step(h0, l0, m_hi, m_lo, i_hi, i_lo)
    h1, l1 = pcg_step(h1, l1, m_hi, m_lo, i_hi, i_lo)
    h2, l2 = pcg_step(h2, l2, m_hi, m_lo, i_hi, i_lo)
    h3, l3 = pcg_step(h3, l3, m_hi, m_lo, i_hi, i_lo)
    return h0, l0, h1, l1, h2, l2, h3, l3


@numba.njit(cache=True, nogil=True)
def _fill4(lanes: np.ndarray, jump: np.ndarray, out: np.ndarray) -> None:
    """Words from four interleaved lanes: lane k holds the state k + 1 steps ahead and every lane
    jumps four steps at a time (``jump``: multiplier and increment of four steps, as halves), so
    the four multiply chains run side by side. ``out``: a multiple of 4 words. ``lanes`` (4 x 2:
    high, low) ends as the lanes' last states."""
    h0, l0, h1, l1 = lanes[0, 0], lanes[0, 1], lanes[1, 0], lanes[1, 1]
    h2, l2, h3, l3 = lanes[2, 0], lanes[2, 1], lanes[3, 0], lanes[3, 1]
    n = out.shape[0]
    for b in range(0, n, 4):
        if b > 0:
            h0, l0, h1, l1, h2, l2, h3, l3 = _step4(h0, l0, h1, l1, h2, l2, h3, l3, jump)
        out[b] = pcg_output(h0, l0)
        out[b + 1] = pcg_output(h1, l1)
        out[b + 2] = pcg_output(h2, l2)
        out[b + 3] = pcg_output(h3, l3)
    lanes[0, 0], lanes[0, 1], lanes[1, 0], lanes[1, 1] = h0, l0, h1, l1
    lanes[2, 0], lanes[2, 1], lanes[3, 0], lanes[3, 1] = h2, l2, h3, l3


def _split(v: int) -> tuple[int, int]:
    return (v >> 64) & _MASK64, v & _MASK64


def _open_lanes(st: Any) -> tuple[np.ndarray, np.ndarray]:
    """The four interleaved lanes at the next word of a PCG64 state (lane k: k + 1 steps on) and their
    four-step jump (multiplier and increment, as halves)."""
    s, inc = int(st["state"]["state"]), int(st["state"]["inc"])
    lanes = np.empty((4, 2), dtype=np.uint64)
    for k in range(4):
        s = (s * _MULT + inc) % (1 << 128)
        lanes[k] = _split(s)
    return lanes, np.array(_split(_MULT4) + _split(inc * _INC_SUM4 % (1 << 128)), dtype=np.uint64)


def _move_on(bit_generator: np.random.BitGenerator, st: Any, lanes: np.ndarray, n: int) -> None:
    """Set the generator to the state after n words, the last state of the lane that made word n - 1
    (the lanes after it ran one step further)."""
    last = lanes[(n - 1) % 4]
    st["state"]["state"] = (int(last[0]) << 64) | int(last[1])
    bit_generator.state = st


def raw_words(bit_generator: np.random.BitGenerator, n: int) -> np.ndarray:
    """``bit_generator.random_raw(n)``, the same words and the same state afterwards."""
    if type(bit_generator) is not np.random.PCG64 or n < 256:
        return bit_generator.random_raw(n)
    st = bit_generator.state
    lanes, jump = _open_lanes(st)
    out = np.empty(-(-n // 4) * 4, dtype=np.uint64)
    _fill4(lanes, jump, out)
    _move_on(bit_generator, st, lanes, n)
    return out[:n]


@numba.njit(cache=True, nogil=True)
def _lemire32(words: np.ndarray, rng: np.uint32, off: np.int64, out: np.ndarray) -> int:
    """NumPy's ``random_bounded_uint64_fill`` for a range below 2**32 - 1 (Lemire's method on
    32-bit draws, the low half of each word first): fills ``out`` with ``off + v``, v in 0..rng.
    Returns the number of 32-bit halves taken, or -1 when ``words`` ran out (rejections)."""
    rng_excl = np.uint64(rng) + np.uint64(1)
    threshold = (np.uint64(0xFFFFFFFF) - np.uint64(rng)) % rng_excl
    mask = np.uint64(0xFFFFFFFF)
    avail = 2 * words.shape[0]
    n = out.shape[0]
    if n <= avail:  # first as if no draw were rejected (two halves a word, no branches) ...
        shift = np.uint64(32)
        low_rejected = np.uint64(0)
        for i in range(n // 2):
            w = words[i]
            m0 = (w & mask) * rng_excl
            m1 = (w >> shift) * rng_excl
            out[2 * i] = off + np.int64(m0 >> shift)
            out[2 * i + 1] = off + np.int64(m1 >> shift)
            low_rejected |= np.uint64((m0 & mask) < threshold) | np.uint64((m1 & mask) < threshold)
        if n & 1:
            m0 = (words[n // 2] & mask) * rng_excl
            out[n - 1] = off + np.int64(m0 >> shift)
            low_rejected |= np.uint64((m0 & mask) < threshold)
        if low_rejected == 0:
            return n
    k = 0  # ... and draw by draw where one was
    for i in range(out.shape[0]):
        while True:
            if k >= avail:
                return -1
            w = words[k >> 1]
            half = (w >> np.uint64(32)) if k & 1 else (w & mask)
            k += 1
            m = half * rng_excl
            if (m & mask) >= threshold:  # (leftover < rng_excl) is implied by leftover < threshold
                break
        out[i] = off + np.int64(m >> np.uint64(32))
    return k


@numba.njit(cache=True, nogil=True, inline="always")
def _unit(word: np.uint64, low: float, span: float) -> float:
    """NumPy's ``Generator.uniform`` of one word: ``low + span * next_double`` (53 bits, two roundings)."""
    return low + span * (np.float64(word >> np.uint64(11)) * (1.0 / 9007199254740992.0))


@numba.njit(cache=True, nogil=True)
def _uniform_fill4(lanes: np.ndarray, jump: np.ndarray, low: float, span: float, out: np.ndarray) -> None:
    """:func:`_fill4` and the uniform values of its words in one pass (no word array): ``out`` of any
    length; the lanes run whole groups of four, as :func:`_fill4` on the length rounded up."""
    h0, l0, h1, l1 = lanes[0, 0], lanes[0, 1], lanes[1, 0], lanes[1, 1]
    h2, l2, h3, l3 = lanes[2, 0], lanes[2, 1], lanes[3, 0], lanes[3, 1]
    n = out.shape[0]
    for b in range(0, n, 4):
        if b > 0:
            h0, l0, h1, l1, h2, l2, h3, l3 = _step4(h0, l0, h1, l1, h2, l2, h3, l3, jump)
        if b + 4 <= n:
            out[b] = _unit(pcg_output(h0, l0), low, span)
            out[b + 1] = _unit(pcg_output(h1, l1), low, span)
            out[b + 2] = _unit(pcg_output(h2, l2), low, span)
            out[b + 3] = _unit(pcg_output(h3, l3), low, span)
        else:  # the last, partial group
            tail = (pcg_output(h0, l0), pcg_output(h1, l1), pcg_output(h2, l2), pcg_output(h3, l3))
            for k in range(n - b):
                out[b + k] = _unit(tail[k], low, span)
    lanes[0, 0], lanes[0, 1], lanes[1, 0], lanes[1, 1] = h0, l0, h1, l1
    lanes[2, 0], lanes[2, 1], lanes[3, 0], lanes[3, 1] = h2, l2, h3, l3


def uniform_words(
    bit_generator: np.random.BitGenerator, low: float, high: float, n: int, out: np.ndarray | None = None
) -> np.ndarray | None:
    """``Generator(bit_generator).uniform(low, high, n)`` from compiled words (same values and
    state afterwards), written into ``out`` (n contiguous float64) where given, or None where this path does
    not apply (the caller asks NumPy instead; ``out`` and the generator are untouched)."""
    if type(bit_generator) is not np.random.PCG64 or n < 256 or not _exact_platform():
        return None
    low, span = float(low), float(high) - float(low)
    if not (np.isfinite(low) and np.isfinite(span) and span >= 0.0):
        return None
    if out is None:
        out = np.empty(n, dtype=np.float64)
    st = bit_generator.state
    lanes, jump = _open_lanes(st)
    _uniform_fill4(lanes, jump, low, span, out)
    _move_on(bit_generator, st, lanes, n)
    return out


def bounded_words(
    bit_generator: np.random.BitGenerator, low: int, high: int, n: int, dtype: Any = np.int64
) -> np.ndarray | None:
    """``Generator(bit_generator).integers(low, high, n)`` (int64) from compiled words (same values
    and state afterwards), stored as ``dtype`` (the values must fit), or None where this path does not
    apply (the caller asks NumPy instead)."""
    if type(bit_generator) is not np.random.PCG64 or n < 256:
        return None
    rng = int(high) - 1 - int(low)
    if not 0 < rng < 0xFFFFFFFF or not -(2**63) <= int(low) < 2**63:
        return None
    st = bit_generator.state
    if st.get("has_uint32"):
        return None  # a buffered half would come first
    out = np.empty(n, dtype=dtype)
    need = (n + 1) // 2 + 64 + n // 256  # rejections are rare (below rng / 2**32 per draw)
    words = raw_words(bit_generator, need)
    used = _lemire32(words, np.uint32(rng), np.int64(low), out)
    bit_generator.state = st
    if used < 0:
        return None
    bit_generator.advance((used + 1) // 2)
    # NumPy keeps the high half of the last word it drew: waiting (odd count) or spent (even)
    st = bit_generator.state
    st["has_uint32"] = used & 1
    st["uinteger"] = int(words[(used - 1) // 2] >> np.uint64(32))
    bit_generator.state = st
    return out


def word_lanes(bit_generator: np.random.BitGenerator) -> tuple[np.ndarray, np.ndarray] | None:
    """``(lanes, jump)`` for :func:`draw_bounded`: the four interleaved lanes of :func:`raw_words` at the
    generator's next word (its state is not moved on), or None where that stream is not the one
    ``Generator.integers`` reads (not a PCG64, or a 32-bit half buffered)."""
    if type(bit_generator) is not np.random.PCG64:
        return None
    st = bit_generator.state
    if st.get("has_uint32"):
        return None
    return _open_lanes(st)


@numba.njit(cache=True, nogil=True)
def _refill_words(words: np.ndarray, keep: int, n: int, lanes: np.ndarray, jump: np.ndarray) -> int:
    """Moves ``words[keep:n]`` to the front and fills the rest of ``words`` (whole groups of four) with
    the next words of ``lanes`` (they move on). Returns the new count."""
    m = n - keep
    for i in range(m):
        words[i] = words[keep + i]
    end = m + (words.shape[0] - m) // 4 * 4
    if end > m:
        _fill4(lanes, jump, words[m:end])
        for k in range(4):  # _fill4 leaves each lane at its last word: move it on to its next
            lanes[k, 0], lanes[k, 1] = pcg_step(lanes[k, 0], lanes[k, 1], jump[0], jump[1], jump[2], jump[3])
    return end


@numba.njit(cache=True, nogil=True)
def _bounded_halves(words: np.ndarray, n: int, k: int, rng: np.uint32, off: np.int64, out: np.ndarray) -> int:
    """``Generator.integers`` draws (``off + v``, v in 0..rng, Lemire's method as in :func:`bounded_words`)
    from the 32-bit halves of ``words[:n]`` starting at half ``k`` (low half first): fills ``out`` and
    returns the next half, or -1 when the words ran out (rejections)."""
    if k & 1 == 0:
        used = _lemire32(words[k >> 1 : n], rng, off, out)
        return k + used if used >= 0 else -1
    rng_excl = np.uint64(rng) + np.uint64(1)
    threshold = (np.uint64(0xFFFFFFFF) - np.uint64(rng)) % rng_excl
    mask = np.uint64(0xFFFFFFFF)
    for i in range(out.shape[0]):
        while True:
            if k >= 2 * n:
                return -1
            w = words[k >> 1]
            half = (w >> np.uint64(32)) if k & 1 else (w & mask)
            k += 1
            m = half * rng_excl
            if (m & mask) >= threshold:
                break
        out[i] = off + np.int64(m >> np.uint64(32))
    return k


@numba.njit(cache=True, nogil=True)
def draw_bounded(
    words: np.ndarray, at: np.ndarray, lanes: np.ndarray, jump: np.ndarray, rng: np.uint32, off: np.int64, out: np.ndarray
) -> None:
    """The next ``out.shape[0]`` draws of ``Generator.integers(off, off + rng + 1)`` from a stream opened
    with :func:`word_lanes`, generated as they are needed: ``words`` buffers the stream's words (at
    least ``out.shape[0] // 2 + 2`` of them, for every call; a run of rejections longer than the buffer
    raises RuntimeError), ``at`` holds (words buffered, next half)
    and starts at (0, 0). Successive calls give the draws of one ``integers`` call of their total size."""
    n, k = at[0], at[1]
    if 2 * n - k < out.shape[0]:
        n = _refill_words(words, k >> 1, n, lanes, jump)
        k &= 1
    nxt = _bounded_halves(words, n, k, rng, off, out)
    if nxt < 0:  # rejections used up the buffered words: draw by draw, refilling as needed
        for i in range(out.shape[0]):
            while True:
                nxt = _bounded_halves(words, n, k, rng, off, out[i : i + 1])
                if nxt >= 0:
                    break
                if k < 2 and n > words.shape[0] - 4:
                    raise RuntimeError("draw_bounded: a full buffer of rejected draws")
                n = _refill_words(words, k >> 1, n, lanes, jump)
                k &= 1
            k = nxt
        nxt = k
    at[0], at[1] = n, nxt


def _exact_platform() -> bool:
    """NumPy's C code rounds ``low + span * d`` twice on x86 builds (no fused multiply-add)."""
    import platform

    return platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")
