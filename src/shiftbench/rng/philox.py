"""Philox4x32-10, the counter-based generator of Salmon et al. (SC'11, "Parallel random numbers: as
easy as 1, 2, 3"; Random123), compiled for the CPU.

A counter-based generator computes block ``i`` of a stream directly from ``(key, counter i)``: no
state carried from one draw to the next, so a CPU kernel, a GPU kernel or any split of the work
gives the same numbers. Not used by any corruption yet (they draw from PCG64 streams, see
:mod:`shiftbench.seeding`); this is the CPU side of that future generator, tested against a plain
Python transcription of the algorithm and the published known-answer vectors.

A stream is keyed by ``(seed, image key, corruption, severity)``:

* key (2 x 32 bits): the experiment seed (0 .. 2**64-1), low word first;
* counter (4 x 32 bits): ``(block index, tag, image key low, image key high)`` where ``tag`` is
  the low 24 bits of the corruption name's XXH64 digest and the severity in the low byte.

Each block gives four 32-bit words; uniform doubles take two words each (53 bits).
"""

from __future__ import annotations

import numba
import numpy as np

from .xxh64 import xxh64_bytes

__all__ = [
    "PHILOX_M0",
    "PHILOX_M1",
    "PHILOX_W0",
    "PHILOX_W1",
    "philox4x32_reference",
    "philox4x32",
    "philox_fill",
    "PhiloxStream",
]

PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9  # golden ratio
PHILOX_W1 = 0xBB67AE85  # sqrt(3) - 1
_MASK = 0xFFFFFFFF


def philox4x32_reference(ctr: tuple[int, int, int, int], key: tuple[int, int], rounds: int = 10) -> tuple[int, int, int, int]:
    """The algorithm as published, in plain Python integers (the oracle of the compiled one)."""
    c0, c1, c2, c3 = (int(v) & _MASK for v in ctr)
    k0, k1 = (int(v) & _MASK for v in key)
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + PHILOX_W0) & _MASK, (k1 + PHILOX_W1) & _MASK
        p0, p1 = PHILOX_M0 * c0, PHILOX_M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & _MASK, p1 & _MASK, ((p0 >> 32) ^ c3 ^ k1) & _MASK, p0 & _MASK
    return c0, c1, c2, c3


@numba.njit(cache=True, nogil=True, inline="always")
def _block(c0: int, c1: int, c2: int, c3: int, k0: int, k1: int) -> tuple[int, int, int, int]:
    m = np.uint64(_MASK)
    c0, c1, c2, c3 = np.uint64(c0), np.uint64(c1), np.uint64(c2), np.uint64(c3)
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for r in range(10):
        if r:
            k0 = (k0 + np.uint64(PHILOX_W0)) & m
            k1 = (k1 + np.uint64(PHILOX_W1)) & m
        p0 = np.uint64(PHILOX_M0) * c0
        p1 = np.uint64(PHILOX_M1) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0) & m, p1 & m, ((p0 >> np.uint64(32)) ^ c3 ^ k1) & m, p0 & m
    return c0, c1, c2, c3


@numba.njit(cache=True, nogil=True)
def _block_array(ctr: np.ndarray, key: np.ndarray) -> np.ndarray:
    out = np.empty(4, dtype=np.uint32)
    a, b, c, d = _block(ctr[0], ctr[1], ctr[2], ctr[3], key[0], key[1])
    out[0], out[1], out[2], out[3] = a, b, c, d
    return out


def philox4x32(ctr: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, int, int, int]:
    """One block of Philox4x32-10, compiled."""
    out = _block_array(np.asarray(ctr, dtype=np.uint32), np.asarray(key, dtype=np.uint32))
    return int(out[0]), int(out[1]), int(out[2]), int(out[3])


@numba.njit(cache=True, nogil=True)
def philox_fill(out: np.ndarray, first_block: int, c1: int, c2: int, c3: int, k0: int, k1: int) -> None:
    """``out`` (uint32, length a multiple of 4) = blocks ``first_block, first_block + 1, ...`` of the
    stream with counter words 1..3 ``(c1, c2, c3)`` and key ``(k0, k1)``."""
    for j in range(out.shape[0] // 4):
        a, b, c, d = _block(np.uint64(first_block + j) & np.uint64(_MASK), c1, c2, c3, k0, k1)
        out[4 * j] = a
        out[4 * j + 1] = b
        out[4 * j + 2] = c
        out[4 * j + 3] = d


class PhiloxStream:
    """The Philox4x32-10 stream of ``(seed, image key, corruption, severity)``; draws advance it.

    ``uint32(n)`` gives the next ``n`` words; ``random(n)`` the next ``n`` doubles in [0, 1)
    (53 bits from two words: ``((hi >> 5) * 2**26 + (lo >> 6)) / 2**53``). Reads start at block
    boundaries: a draw of ``n`` words consumes ``ceil(n / 4)`` blocks.
    """

    def __init__(self, seed: int, image_key: int, corruption: str, severity: int) -> None:
        seed, image_key, severity = int(seed), int(image_key), int(severity)
        if not 0 <= seed < 2**64 or not 0 <= image_key < 2**64 or not 0 <= severity < 256:
            raise ValueError("seed and image key in 0 .. 2**64-1, severity in 0..255")
        tag = ((xxh64_bytes(corruption.encode()) & 0xFFFFFF) << 8) | severity
        self.key = (seed & _MASK, seed >> 32)
        self.counter = (tag, image_key & _MASK, image_key >> 32)
        self.block = 0

    def uint32(self, n: int) -> np.ndarray:
        blocks = -(-int(n) // 4)
        out = np.empty(4 * blocks, dtype=np.uint32)
        philox_fill(out, self.block, *self.counter, *self.key)
        self.block += blocks
        return out[:n]

    def random(self, n: int) -> np.ndarray:
        w = self.uint32(2 * int(n)).astype(np.uint64)
        hi, lo = w[0::2] >> np.uint64(5), w[1::2] >> np.uint64(6)
        return (hi * np.float64(2.0**26) + lo) / 2.0**53
