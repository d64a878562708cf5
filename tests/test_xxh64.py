"""The compiled XXH64 (image content keys): published digests, and the key's properties."""

from __future__ import annotations

import numpy as np
import pytest

from shiftbench.rng.seeding import image_key
from shiftbench.rng.xxh64 import xxh64_bytes

# Digests published with xxHash implementations and users (ClickHouse's xxHash64 tests, the
# python-xxhash README, nim-xxhash, DragonFly's HAMMER2 with its seed, BDN): (data, seed, XXH64).
_HAMMER2 = 0x4D617474446C6C6E
PUBLISHED = [
    (b"", 0, 0xEF46DB3751D8E999),
    (b"a", 0, 15154266338359012955),
    (b"ab", 0, 7347350983217793633),
    (b"abc", 0, 0x44BC2CF5AD770999),
    (b"ABC", 0, 0xE66AE7354FCFEE98),
    (b"xxhash", 0, 0x32DD38952C4BC720),
    (b"Nobody inspects the spammish repetition", 0, 0xFBCEA83C8A378BF1),  # 39 bytes: one stripe, 8 + 4 + 3 tail
    (b"", 0x1234567890ABCDEF, 0xA2F5C44D0F46C872),
    (b"", _HAMMER2, 0x84566AC0F5A0CB84),
    (b"hammer2", _HAMMER2, 0xA041BE268B5674E5),
    (b"This code is derived from software contributed to The DragonFly Project", _HAMMER2, 0x103C241EEDDC8D32),  # 71 bytes
]


@pytest.mark.parametrize(("data", "seed", "want"), PUBLISHED)
def test_published_digests(data: bytes, seed: int, want: int) -> None:
    assert xxh64_bytes(data, seed) == want


def test_every_tail_length_and_alignment() -> None:
    """Lengths 0..100 (every stripe/tail split) give distinct digests, and a buffer's digest does
    not depend on where it lies in memory (words are assembled byte by byte, little-endian)."""
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 200, dtype=np.uint8)
    seen = {xxh64_bytes(data[:n].tobytes()) for n in range(101)}
    assert len(seen) == 101
    for off in range(1, 9):
        shifted = np.empty(100 + off, dtype=np.uint8)[off:]
        shifted[:] = data[:100]
        assert xxh64_bytes(shifted) == xxh64_bytes(data[:100].tobytes())


def test_image_key_tells_images_apart() -> None:
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (3, 32, 48), dtype=np.uint8)
    k = image_key(img)
    assert k == image_key(img.copy()) and 0 <= k < 2**64
    assert image_key(np.asfortranarray(img)) == k  # the pixels count, not the memory layout
    for c, y, x in ((0, 0, 0), (2, 31, 47), (1, 10, 20)):  # one level changed anywhere
        other = img.copy()
        other[c, y, x] ^= 1
        assert image_key(other) != k
    # the same bytes in another shape are another image
    assert image_key(img.reshape(3, 48, 32)) != k
    flat = np.zeros((3, 16, 16), np.uint8)
    assert image_key(flat) != image_key(np.zeros((3, 8, 32), np.uint8))
    # low bits of keys of near-identical images look independent: 256 one-level edits, 256 keys
    keys = set()
    for i in range(256):
        other = img.copy()
        other.reshape(-1)[i] ^= 1
        keys.add(image_key(other) & 0xFF)
    assert len(keys) > 140  # ~162 distinct low bytes expected for 256 uniform draws
