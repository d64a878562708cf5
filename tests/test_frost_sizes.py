"""Frost at every image size, in any order: the output depends only on the image, severity, seed and edition.

Frost crops a texture that is enlarged to fit images larger than it; the enlarged textures and their tensor copies
are cached. These tests corrupt many sizes in one process, in two orders, and compare every output with a fresh
interpreter that computes the same calls in the opposite order (so nothing cached before can decide an output).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shiftbench import corrupt

from .conftest import sample_paths

REPO = Path(__file__).resolve().parents[1]

_DIGESTS = r"""
import hashlib, json, sys
import numpy as np
from shiftbench import corrupt
calls = json.loads(sys.stdin.read())
base = np.random.default_rng(0).integers(0, 256, (170, 170, 3), dtype=np.uint8)
out = []
for h, w, s, seed, edition in calls:
    x = base[:h, :w]
    out.append(hashlib.sha256(np.ascontiguousarray(corrupt(x, "frost", s, seed=seed, edition=edition))).hexdigest())
print(json.dumps(out))
"""


def _calls(n: int, seed: int) -> list[tuple[int, int, int, int, str]]:
    rng = np.random.default_rng(seed)
    return [
        (int(rng.integers(90, 171)), int(rng.integers(90, 171)), int(rng.integers(1, 6)), int(rng.integers(0, 1000)),
         str(rng.choice(["224", "224", "64", "32"])))
        for _ in range(n)
    ]  # fmt: skip


def _fresh(calls: list[tuple[int, int, int, int, str]]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    r = subprocess.run([sys.executable, "-c", _DIGESTS], input=json.dumps(calls), capture_output=True, text=True,
                       env=env, timeout=600, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    return list(json.loads(r.stdout))


def test_frost_many_sizes_and_orders_equal_a_fresh_process() -> None:
    calls = _calls(400, 1)
    base = np.random.default_rng(0).integers(0, 256, (170, 170, 3), dtype=np.uint8)
    here = {}
    order = list(range(len(calls)))
    np.random.default_rng(2).shuffle(order)
    for i in order:  # a shuffled order in this process; every call must succeed
        h, w, s, seed, edition = calls[i]
        y = corrupt(base[:h, :w], "frost", s, seed=seed, edition=edition)
        here[i] = hashlib.sha256(np.ascontiguousarray(y)).hexdigest()
    fresh = _fresh(calls[::-1])[::-1]  # the opposite order in a new interpreter
    differ = [calls[i] for i in range(len(calls)) if here[i] != fresh[i]]
    assert not differ, f"{len(differ)} of {len(calls)} outputs depend on what was corrupted before: {differ[:5]}"


def test_frost_float_batch_of_an_odd_size() -> None:
    x = np.random.default_rng(95).random((2, 114, 95, 3))
    y = corrupt(x, "frost", 3, seed=95)
    assert y.shape == x.shape and y.dtype == x.dtype and np.isfinite(y).all() and 0 <= y.min() and y.max() <= 1


def test_frost_on_photos_at_their_native_sizes() -> None:
    from shiftbench.sources import load_image_rgb

    try:
        paths = sample_paths()[:40]
    except RuntimeError as e:
        pytest.skip(str(e))
    sizes = set()
    for p in paths:
        img = load_image_rgb(p)
        sizes.add(img.size)
        y = corrupt(img, "frost", 3, seed=0)
        assert y.size == img.size and y.mode == "RGB"
    assert len(sizes) > 5
