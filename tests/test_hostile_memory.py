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


def _readings(monkeypatch: pytest.MonkeyPatch, values: list[int]) -> list[int]:
    """Make ``available_memory`` return ``values`` in turn, starting with no recent reading; the returned list
    grows by one item per reading taken."""
    from shiftbench.corruptions import _images

    taken: list[int] = []

    def fake() -> int:
        taken.append(values[min(len(taken), len(values) - 1)])
        return taken[-1]

    monkeypatch.setattr(_images, "available_memory", fake)
    monkeypatch.setattr(_images, "_recent", None)
    return taken


def test_small_requests_within_a_second_of_a_reading_take_no_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from shiftbench.corruptions import require_memory

    taken = _readings(monkeypatch, [8 << 30])
    for _ in range(5):
        require_memory(100 << 20, "a batch")
    assert len(taken) == 1


def test_a_request_above_the_small_share_is_read_afresh_and_refused_when_memory_fell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shiftbench.corruptions import _images, require_memory
    from shiftbench.errors import ImageShapeError

    taken = _readings(monkeypatch, [8 << 30, 1 << 30])
    require_memory(100 << 20, "a batch")  # passes on the first reading (8 GiB)
    with pytest.raises(ImageShapeError, match=r"32x20000.*1\.0 GiB available.*2\.0 GiB"):
        require_memory(2 << 30, "32x20000 (HxW)")  # a quarter of the recent 8 GiB: read again, 1 GiB now
    assert len(taken) == 2
    require_memory(200 << 20, "a batch")  # a fifth of the 1 GiB now: more than 1/SMALL_SHARE of it, read again
    assert len(taken) == 3 and (1 << 30) // _images.SMALL_SHARE < 200 << 20


def test_a_request_larger_than_a_recent_reading_is_refused_on_a_fresh_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from shiftbench.corruptions import require_memory
    from shiftbench.errors import ImageShapeError

    taken = _readings(monkeypatch, [8 << 30])
    require_memory(1 << 20, "a batch")
    with pytest.raises(ImageShapeError, match="8.0 GiB available"):
        require_memory(9 << 30, "a strip")
    assert len(taken) == 2


def test_a_reading_older_than_a_second_is_taken_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from shiftbench.corruptions import _images, require_memory

    taken = _readings(monkeypatch, [8 << 30])
    monkeypatch.setattr(_images, "_recent", (time.monotonic() - _images.RECENT_SECONDS - 0.1, 8 << 30))
    require_memory(1 << 20, "a batch")
    assert len(taken) == 1


def test_corrupt_of_a_photo_batch_reads_the_memory_once_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    x = np.zeros((2, 64, 64, 3), np.uint8)
    names = ("jpeg_compression", "fog", "contrast")
    for name in names:  # compiled and imported first: the calls below take milliseconds
        shiftbench.corrupt(x, name, 3)
    taken = _readings(monkeypatch, [8 << 30])
    for name in names:
        shiftbench.corrupt(x, name, 3)
    assert len(taken) == 1
