"""Philox4x32-10 (compiled): the published known-answer vectors (Random123's kat_vectors) and a plain
Python transcription of the algorithm as the oracle on random counters and keys."""

from __future__ import annotations

import numpy as np
import pytest

from shiftbench.rng.philox import PhiloxStream, philox4x32, philox4x32_reference, philox_fill

# Random123 examples/kat_vectors, the "philox4x32 10" lines: counter (4 words), key (2), result (4)
KAT = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0), (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize(("ctr", "key", "want"), KAT)
def test_known_answers(ctr, key, want) -> None:  # type: ignore[no-untyped-def]
    assert philox4x32_reference(ctr, key) == want
    assert philox4x32(ctr, key) == want


def test_compiled_equals_reference_on_random_inputs() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        ctr = tuple(int(v) for v in rng.integers(0, 2**32, 4))
        key = tuple(int(v) for v in rng.integers(0, 2**32, 2))
        assert philox4x32(ctr, key) == philox4x32_reference(ctr, key)  # type: ignore[arg-type]
    # a stream of blocks: block i is the counter (first + i, c1, c2, c3)
    out = np.empty(4 * 37, dtype=np.uint32)
    philox_fill(out, 2**32 - 5, 7, 8, 9, 0xDEADBEEF, 0x12345678)  # the block index wraps at 2**32
    want = [w for i in range(37) for w in philox4x32_reference(((2**32 - 5 + i) % 2**32, 7, 8, 9), (0xDEADBEEF, 0x12345678))]
    assert out.tolist() == want


def test_stream_is_keyed_and_splits_freely() -> None:
    a = PhiloxStream(2**64 - 1, 12345678901234567, "fog", 3)
    whole = a.uint32(40)
    b = PhiloxStream(2**64 - 1, 12345678901234567, "fog", 3)
    assert np.array_equal(np.concatenate([b.uint32(8), b.uint32(12), b.uint32(20)]), whole)
    assert whole[:4].tolist() == list(philox4x32_reference((0, *a.counter), a.key))  # type: ignore[arg-type]
    for other in (PhiloxStream(0, 12345678901234567, "fog", 3), PhiloxStream(2**64 - 1, 1, "fog", 3),
                  PhiloxStream(2**64 - 1, 12345678901234567, "snow", 3), PhiloxStream(2**64 - 1, 12345678901234567, "fog", 4)):
        assert not np.array_equal(other.uint32(40), whole)
    u = PhiloxStream(1, 2, "snow", 5).random(100_000)
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.005
    w = PhiloxStream(1, 2, "snow", 5).uint32(200_000)
    assert abs(np.unpackbits(w.view(np.uint8)).mean() - 0.5) < 0.002
    with pytest.raises(ValueError):
        PhiloxStream(2**64, 0, "fog", 1)
