"""No traceback anywhere: every command whose output cannot be written says so in one line (exit code 1 or 2).

Each command is run with its output under a folder this process cannot write, on a full small file system (a
64 KiB tmpfs, where this process may mount one), under ``/proc``, and with a 300-character file name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shiftbench.cli import main
from shiftbench.evaluation.models import MODEL_SOURCES, register_model_source

from ._eval_toys import image_folder, toy_classifier
from .conftest import unwritable_folder

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "stores"
LONG = "n" * 300


@pytest.fixture()
def toys() -> Iterator[None]:
    register_model_source("toyout", lambda name, weights: toy_classifier(f"toyout:{name}"))
    try:
        yield
    finally:
        MODEL_SOURCES.unregister("toyout")


def _full_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "full"
    mnt.mkdir()
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True,
                           timeout=20, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        r = None
    if r is None or r.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs the right to mount)")
    try:
        with open(mnt / "filler", "wb", buffering=0) as f:  # fill it up
            try:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
            except OSError:
                pass
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=20, check=False)


@pytest.fixture(params=["read-only", "full", "proc", "long-name"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    kind = request.param
    if kind == "read-only":
        yield unwritable_folder(tmp_path) / "out"
    elif kind == "full":
        yield from (p / "out" for p in _full_fs(tmp_path))
    elif kind == "proc":
        yield Path("/proc/self/out")
    else:
        yield tmp_path / LONG


def _inputs(tmp: Path) -> dict[str, str]:
    tmp.mkdir(parents=True, exist_ok=True)
    rgb = np.random.default_rng(0).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp / "in.png")
    src = tmp / "src" / "n01440764"
    src.mkdir(parents=True)
    Image.fromarray(rgb).save(src / "a.png")
    store = tmp / "s.sqlite"
    shutil.copyfile(FIXTURES / "v3_all.sqlite", store)
    (tmp / "m.csv").write_text("noc_hue,noc_rain,noc_blur\n1,0,0.4\n0,1,0.05\n0.4,0.05,1\n")
    data = image_folder(tmp / "data", n_per_class=1, n_classes=2)
    return {"img": str(tmp / "in.png"), "src": str(tmp / "src"), "store": str(store), "matrix": str(tmp / "m.csv"),
            "tmp": str(tmp), "data": str(data)}  # fmt: skip


COMMANDS: dict[str, Callable[[dict[str, str], Path], list[str]]] = {
    "corrupt": lambda i, o: ["corrupt", "contrast", "1", i["img"], str(o / "o.png")],
    "generate": lambda i, o: ["generate", "imagenet-c", "--src", i["src"], "--out", str(o / "g"), "--corruptions",
                              "contrast", "--severities", "1", "--edition", "32", "--workers", "1"],
    "results --export": lambda i, o: ["results", "--store", i["store"], "--export", str(o / "e.csv")],
    "results --results-file": lambda i, o: ["results", "--store", i["store"], "--results-file", str(o / "r.json")],
    "report --out": lambda i, o: ["report", "--store", i["store"], "--out", str(o / "r.html")],
    "report --figures": lambda i, o: ["report", "--store", i["store"], "--out", str(Path(i["tmp"]) / "r.html"),
                                      "--figures", str(o / "figs")],
    "select --save-file": lambda i, o: ["select", "--matrix", i["matrix"], "--thresholds", "0.1", "--save", "x",
                                        "--save-file", str(o / "x.json")],
    "evaluate --store": lambda i, o: ["evaluate", "--model", "toyout:a", "--data", i["data"], "--corruptions",
                                      "contrast", "--severities", "1", "--store", str(o / "s.sqlite"), "--no-progress"],
    "evaluate --results-file": lambda i, o: ["evaluate", "--model", "toyout:a", "--data", i["data"], "--corruptions",
                                             "contrast", "--severities", "1", "--store", str(Path(i["tmp"]) / "e.sqlite"),
                                             "--results-file", str(o / "r.json"), "--no-progress"],
}  # fmt: skip


@pytest.mark.parametrize("command", list(COMMANDS))
def test_unwritable_outputs_are_one_line(tmp_path: Path, capsys, toys, place: Path, command: str) -> None:
    inputs = _inputs(tmp_path / "in")
    argv = COMMANDS[command](inputs, place)
    rc = main(argv)
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip() and ln.startswith("Error")]
    assert rc in (1, 2), (rc, captured.err[-2000:])
    assert "Traceback" not in captured.err and len(lines) == 1, captured.err[-2000:]
    if place.name != LONG:
        assert not (os.path.exists(place) and any(Path(place).iterdir())) or place.parent.name == "full"


def test_overlap_run_json_that_cannot_be_written_is_refused_before_the_study(tmp_path: Path, capsys, place: Path) -> None:
    rc = main(["overlap", "run", "--config", "no-such-study", "--json", str(place / "r.json")])
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip() and ln.startswith("Error")]
    assert rc in (1, 2) and len(lines) == 1 and "Traceback" not in captured.err, captured.err[-2000:]
    if place.parent.name != "full":  # a full file system still takes the probe: then the unknown study is the line
        assert "--json" in lines[0], lines
