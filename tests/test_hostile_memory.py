"""Inputs whose working memory exceeds the machine: a typed error naming the size before the allocation, never a
``MemoryError`` or the kernel killing the process, for every corruption and every perturbation, from the Python API
and the command line (checked under an address-space limit in a child process); normal photo sizes are never
refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import shiftbench
from shiftbench.corruptions import get_corruption
from shiftbench.perturbations import list_perturbations, sequence_memory

REPO = Path(__file__).resolve().parents[1]
LIMIT = 4 << 30
"""The address-space limit of the child (``ulimit -v``): about 1.5 GiB beside what importing torch maps."""

CORRUPTIONS = shiftbench.list_corruptions(namespace="all")

CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
import numpy as np
import shiftbench
from shiftbench.errors import ImageShapeError, ShiftbenchError
from shiftbench.perturbations import perturb
kind, sizes, names = sys.argv[2], json.loads(sys.argv[3]), sys.argv[4:]
for h, w in sizes:
    x = np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)
    for name in names:
        try:
            shiftbench.corrupt(x, name, 3) if kind == "corrupt" else perturb(x, name, 1)
            out = "ok"
        except ImageShapeError as e:
            out = "refused" if f"{h}x{w}" in str(e) and "GiB" in str(e) else "refused without the size: " + str(e)
        except ShiftbenchError as e:
            out = "typed " + type(e).__name__ + ": " + str(e)[:200]
        except BaseException as e:
            out = "UNTYPED " + type(e).__name__ + ": " + str(e)[:200]
        print(json.dumps([name, f"{h}x{w}", out]), flush=True)
"""


def _child(kind: str, sizes: list[tuple[int, int]], names: list[str]) -> list[list[str]]:
    if not sys.platform.startswith("linux"):
        pytest.skip("RLIMIT_AS is enforced on Linux")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", CHILD, str(LIMIT), kind, json.dumps(sizes), *names], capture_output=True,
                       text=True, env=env, timeout=1200, check=False)  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]  # killed, or a crash outside Python
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("[")]
    assert len(rows) == len(sizes) * len(names), r.stdout + r.stderr[-2000:]
    return rows


STRIPS = [(32, 20000), (32, 200000)]


@pytest.mark.slow
@pytest.mark.parametrize("names", [CORRUPTIONS[i::3] for i in range(3)], ids=["part1", "part2", "part3"])
def test_strips_are_refused_or_corrupted_for_every_corruption_under_a_memory_limit(names: list[str]) -> None:
    rows = _child("corrupt", STRIPS, names)
    # style_transfer without a configured style folder is a typed error of its own (SHIFTBENCH_STYLE_DIR unset)
    bad = [r for r in rows if r[2] not in ("ok", "refused") and not (r[0] == "style_transfer" and r[2].startswith("typed"))]
    assert not bad, bad


@pytest.mark.parametrize("name", ["fog", "elastic_transform", "glass_blur", "frost", "spatter", "zoom_blur"])
def test_a_32_by_20000_strip_is_refused_or_corrupted_never_a_memory_error(name: str) -> None:
    rows = _child("corrupt", [(32, 20000)], [name])
    assert rows[0][2] in ("ok", "refused"), rows


@pytest.mark.slow
def test_strips_are_refused_or_perturbed_for_every_perturbation_under_a_memory_limit() -> None:
    rows = _child("perturb", STRIPS, list_perturbations())
    bad = [r for r in rows if r[2] not in ("ok", "refused")]
    assert not bad, bad


def test_a_long_strip_is_refused_by_perturb_before_preparing_it() -> None:
    rows = _child("perturb", [(32, 200000)], ["translate", "gaussian_noise"])
    assert [r[2] for r in rows] == ["refused", "refused"], rows


def test_the_command_line_gives_one_line_for_a_strip_too_large(tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    Image.fromarray(np.zeros((32, 200000, 3), np.uint8)).save(tmp_path / "strip.png")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    code = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, {LIMIT})); "
            "from shiftbench.cli import main; sys.exit(main(sys.argv[1:]))")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code, "corrupt", str(tmp_path / "strip.png"), str(tmp_path / "o.png"),
                        "-c", "fog", "-s", "3"], capture_output=True, text=True, env=env, timeout=600, check=False)  # fmt: skip
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "32x200000" in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "o.png").exists()


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_photo_sizes_are_never_refused(name: str) -> None:
    """The estimate of a 224 and a 299 photo (and a 4000 x 3000 one) stays far below any machine's memory."""
    spec = get_corruption(name)
    for (h, w), most in (((224, 224), 256 << 20), ((299, 299), 256 << 20), ((3000, 4000), 32 << 30)):
        ed = "299" if (h, w) == (299, 299) and "299" in spec.params else next(iter(spec.params))
        assert spec.working_memory(h, w, ed, spec.severity_params(ed, 3)) <= most, (name, h, w)


def test_photo_sizes_are_never_refused_by_perturb() -> None:
    for ed in ("224", "299", "64", "32"):
        assert sequence_memory(375, 500, ed) <= 1 << 30, ed
