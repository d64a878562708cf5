"""XXH64, the 64-bit hash of the xxHash family, compiled: the content key of an image.

Implemented from the algorithm's public specification (four 64-bit accumulators over 32-byte
stripes, then the tail and the final avalanche); tested against published digests. It reads
about 8 bytes a cycle on one core, ~15x faster than SHA-256 with the SHA extensions, which made
the image key ~15 % of a noise corruption's time. The key needs no cryptographic strength: it
only has to tell images apart, so that their draws are independent.
"""

from __future__ import annotations

import numba
import numpy as np

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)


@numba.njit(cache=True, nogil=True, inline="always")
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@numba.njit(cache=True, nogil=True, inline="always")
def _word(b, i, n):
    """The little-endian ``n``-byte word at byte ``i`` (any alignment, any machine)."""
    w = np.uint64(0)
    for k in range(n - 1, -1, -1):
        w = (w << np.uint64(8)) | np.uint64(b[i + k])
    return w


@numba.njit(cache=True, nogil=True, inline="always")
def _round(acc, w):
    return _rotl(acc + w * _P2, 31) * _P1


@numba.njit(cache=True, nogil=True, inline="always")
def _merge(h, v):
    return (h ^ _round(np.uint64(0), v)) * _P1 + _P4


@numba.njit(cache=True, nogil=True)
def xxh64(data: np.ndarray, seed: np.uint64) -> np.uint64:
    """XXH64 of a 1-D uint8 array with a 64-bit seed."""
    n = data.shape[0]
    i = 0
    if n >= 32:
        v1 = seed + _P1 + _P2
        v2 = seed + _P2
        v3 = seed
        v4 = seed - _P1
        while i + 32 <= n:
            v1 = _round(v1, _word(data, i, 8))
            v2 = _round(v2, _word(data, i + 8, 8))
            v3 = _round(v3, _word(data, i + 16, 8))
            v4 = _round(v4, _word(data, i + 24, 8))
            i += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = seed + _P5
    h += np.uint64(n)
    while i + 8 <= n:
        h = _rotl(h ^ _round(np.uint64(0), _word(data, i, 8)), 27) * _P1 + _P4
        i += 8
    if i + 4 <= n:
        h = _rotl(h ^ (_word(data, i, 4) * _P1), 23) * _P2 + _P3
        i += 4
    while i < n:
        h = _rotl(h ^ (np.uint64(data[i]) * _P5), 11) * _P1
        i += 1
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


def xxh64_bytes(data: bytes | bytearray | memoryview | np.ndarray, seed: int = 0) -> int:
    """XXH64 of any bytes-like object (or an array's bytes, C order) as a Python int."""
    if isinstance(data, np.ndarray):
        a = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    else:
        a = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    return int(xxh64(a, np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)))
