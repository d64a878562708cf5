"""Frost, as the hostile-input probe found it: typed errors on valid images and outputs that depended on what had
been corrupted before. Reproduced as the probe ran it (3,000 calls of 90-160 px crops in one process; the shared
photos at their native sizes through ``Corrupt``); the quicker checks of the same are in tests/test_frost_sizes.py."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from shiftbench import Corrupt, corrupt

from .conftest import sample_paths
from .test_frost_sizes import _fresh


@pytest.mark.slow
def test_3000_frost_calls_of_90_to_160_px_in_one_process_equal_the_same_calls_in_another_order() -> None:
    rng = np.random.default_rng(32)
    calls = [(int(rng.integers(90, 161)), int(rng.integers(90, 161)), int(rng.integers(1, 6)),
              int(rng.integers(0, 1000)), "224") for _ in range(3000)]  # fmt: skip
    base = np.random.default_rng(0).integers(0, 256, (170, 170, 3), dtype=np.uint8)
    # the edition named as the fresh process names it (left to the default, a 90-160 px image takes another edition)
    here = [hashlib.sha256(np.ascontiguousarray(corrupt(base[:h, :w], "frost", s, seed=seed, edition=e))).hexdigest()
            for h, w, s, seed, e in calls]  # fmt: skip  (every call succeeds: no typed error on a valid image)
    fresh = _fresh(calls[::-1])[::-1]
    differ = [c for c, a, b in zip(calls, here, fresh, strict=True) if a != b]
    assert not differ, f"{len(differ)} of 3000 outputs depend on the order: {differ[:5]}"


@pytest.mark.slow
def test_frost_on_the_100_shared_photos_at_their_native_sizes() -> None:
    from shiftbench.sources import load_image_rgb

    try:
        paths = sample_paths()[:100]
    except RuntimeError as e:
        pytest.skip(str(e))
    t = Corrupt("frost", 3, seed=0)
    sizes = set()
    for p in paths:
        img = load_image_rgb(p)
        sizes.add(img.size)
        y = t(img)
        assert y.size == img.size and y.mode == "RGB"
    assert len(paths) == 100 and len(sizes) > 40
