"""NumPy's ``SeedSequence`` for the four integers of a derived generator, compiled.

:func:`~shiftbench.rng.seeding.derive_generator` seeds a PCG64 from ``SeedSequence([seed, key, name, level])``.
Building that object and asking it for PCG64's four words takes about 17 us per generator, which is a few
per cent of a fast corruption's time per image and runs holding the GIL. :func:`seed_words` computes the same
four words in one compiled call: the entropy's 32-bit words (each integer little-endian, zero as one word), the
pool of four mixed by O'Neill's hash-mix and mix functions as NumPy does (``hashmix``, ``mix``,
``mix_entropy``), then ``generate_state(4, uint64)``. Tested against ``SeedSequence`` itself.
"""

from __future__ import annotations

import numba
import numpy as np

_INIT_A = np.uint32(0x43B0D7E5)
_MULT_A = np.uint32(0x931E8875)
_INIT_B = np.uint32(0x8B51F9DD)
_MULT_B = np.uint32(0x58F38DED)
_MIX_MULT_L = np.uint32(0xCA01F9DD)
_MIX_MULT_R = np.uint32(0x4973F715)
_XSHIFT = np.uint32(16)
_POOL = 4


@numba.njit(cache=True, nogil=True, inline="always")
def _hashmix(value: np.uint32, h: np.uint32) -> tuple[np.uint32, np.uint32]:
    """(hashed value, next hash constant)."""
    value ^= h
    h = np.uint32(h * _MULT_A)
    value = np.uint32(value * h)
    return value ^ (value >> _XSHIFT), h


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(x: np.uint32, y: np.uint32) -> np.uint32:
    r = np.uint32(np.uint32(_MIX_MULT_L * x) - np.uint32(_MIX_MULT_R * y))
    return r ^ (r >> _XSHIFT)


@numba.njit(cache=True, nogil=True)
def seed_words(a: np.uint64, b: np.uint64, c: np.uint64, d: np.uint64) -> np.ndarray:
    """``SeedSequence([a, b, c, d]).generate_state(4, np.uint64)`` for integers in 0..2**64-1."""
    entropy = np.zeros(8, dtype=np.uint32)
    n = 0
    for word in (a, b, c, d):
        entropy[n] = np.uint32(word & np.uint64(0xFFFFFFFF))
        n += 1
        high = np.uint32(word >> np.uint64(32))
        if high != 0:
            entropy[n] = high
            n += 1
    pool = np.zeros(_POOL, dtype=np.uint32)
    h = _INIT_A
    for i in range(_POOL):
        pool[i], h = _hashmix(entropy[i] if i < n else np.uint32(0), h)
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                v, h = _hashmix(pool[src], h)
                pool[dst] = _mix(pool[dst], v)
    for src in range(_POOL, n):
        for dst in range(_POOL):
            v, h = _hashmix(entropy[src], h)
            pool[dst] = _mix(pool[dst], v)
    state = np.empty(8, dtype=np.uint32)
    h = _INIT_B
    for i in range(8):
        v = pool[i % _POOL] ^ h
        h = np.uint32(h * _MULT_B)
        v = np.uint32(v * h)
        state[i] = v ^ (v >> _XSHIFT)
    return state.view(np.uint64)
