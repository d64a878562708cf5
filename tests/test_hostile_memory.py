"""Inputs whose working memory exceeds the machine: a typed error naming the size before the allocation, never a
``MemoryError`` or the kernel killing the process (checked under an address-space limit in a child process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import resource, sys
import numpy as np
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
import shiftbench
from shiftbench.errors import ImageShapeError
x = np.zeros((32, 20000, 3), np.uint8)
for name in sys.argv[1:]:
    try:
        shiftbench.corrupt(x, name, 3)
        print(name, "ok")
    except ImageShapeError as e:
        print(name, "refused", "20000" in str(e) and "GiB" in str(e))
"""


@pytest.mark.parametrize("name", ["fog", "elastic_transform"])
def test_a_32_by_20000_strip_is_refused_before_allocating(name: str) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("RLIMIT_AS is enforced on Linux")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", CHILD, name], capture_output=True, text=True, env=env, timeout=600,
                       check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [name, "refused", "True"], r.stdout + r.stderr[-2000:]
