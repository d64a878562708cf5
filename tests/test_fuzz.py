"""Fuzzing the public corruption surface and the command line with hypothesis.

Outcome for every generated case: a correct output (the input's type, shape, dtype; values in
range; deterministic) or a typed :class:`~shiftbench.errors.ShiftbenchError` (exit code 2 with
one line on the command line); never another exception, a crash or a hang.

Profiles: ``ci`` (default: a bounded budget, sides up to 256 px) and ``long`` (many more cases,
sides up to 2048 px; ``-m slow`` with ``SHIFTBENCH_FUZZ=long``). The case count of a long run is
recorded in docs/robustness-to-bad-input.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shiftbench
from shiftbench import errors
from shiftbench.cli import main

settings.register_profile(
    "ci", max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
settings.register_profile("long", max_examples=int(os.environ.get("SHIFTBENCH_FUZZ_EXAMPLES", "2000")), deadline=None, suppress_health_check=list(HealthCheck))
LONG = os.environ.get("SHIFTBENCH_FUZZ") == "long"
PROFILE = "long" if LONG else "ci"
MAX_SIDE = 2048 if LONG else 256
NAMES = shiftbench.list_corruptions("all") + shiftbench.list_corruptions(group="candidate")
CASES = {"count": 0}


@st.composite
def images(draw: st.DrawFn) -> object:
    h = draw(st.one_of(st.integers(1, 40), st.integers(32, MAX_SIDE)))
    w = draw(st.one_of(st.integers(1, 40), st.integers(32, MAX_SIDE)))
    if h * w > 512 * 512 and not LONG:
        h, w = min(h, 256), min(w, 256)
    c = draw(st.sampled_from([None, 1, 2, 3, 4, 5]))
    dtype = draw(st.sampled_from(["uint8", "float32", "float64", "float16", "int32", "bool"]))
    kind = draw(st.sampled_from(["numpy", "tensor"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (h, w) if c is None else (h, w, c)
    if dtype == "uint8":
        a = rng.integers(0, 256, shape, dtype=np.uint8)
    elif dtype in ("int32", "bool"):
        a = rng.integers(0, 2, shape).astype(dtype)
    else:
        scale = draw(st.sampled_from([1.0, 1.0, 1.0, 255.0, -1.0]))
        a = (rng.random(shape) * scale).astype(dtype)
    if draw(st.booleans()):
        a = a[::-1]  # negative stride
    if kind == "tensor":
        t = torch.from_numpy(a.copy())  # tensors cannot have negative strides
        return t.permute(2, 0, 1) if t.ndim == 3 else t
    return a


def _check_output(x: object, y: object) -> None:
    assert type(y) is type(x)
    assert tuple(np.shape(y)) == tuple(np.shape(x))
    arr = y.numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    assert arr.dtype == (x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)).dtype
    if arr.dtype.kind == "f":
        assert np.isfinite(arr.astype(np.float64)).all() and arr.min() >= 0 and arr.max() <= 1


@settings(settings.get_profile(PROFILE))
@given(
    x=images(),
    name=st.sampled_from(NAMES),
    severity=st.one_of(st.integers(1, 5), st.sampled_from([0, 6, -1, 2.5, "3", None])),
    seed=st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([-1, 2**64, 2**80])),
)
def test_fuzz_corrupt(x: object, name: str, severity: object, seed: int) -> None:
    CASES["count"] += 1
    try:
        y = shiftbench.corrupt(x, name, severity, seed=seed)  # type: ignore[arg-type]
    except errors.ShiftbenchError:
        return
    _check_output(x, y)


@settings(settings.get_profile(PROFILE))
@given(name=st.sampled_from([n for n in NAMES if shiftbench.get_corruption(n).random]), data=st.data())
def test_fuzz_replayed_draws(name: str, data: st.DataObject) -> None:
    """Random and adversarial draws: any value, shape or dtype in any key."""
    CASES["count"] += 1
    side = data.draw(st.integers(32, 72))
    img = np.random.default_rng(side).integers(0, 256, (side, side + 3, 3), dtype=np.uint8)
    d = shiftbench.sample_draws(img, name, 3)
    key = data.draw(st.sampled_from(sorted(d)))
    v = np.asarray(d[key])
    bad = data.draw(
        st.one_of(
            st.just(v),
            st.integers(-(2**63), 2**63 - 1).map(lambda i: np.full(v.shape, i)),
            st.floats(allow_nan=True, allow_infinity=True).map(lambda f: np.full(v.shape, f)),
            st.integers(0, 3).map(lambda k: np.zeros(v.shape[:-1] + (max(0, (v.shape[-1] if v.ndim else 1) - k),), v.dtype)),
            st.sampled_from(["x", None, b"x", {"a": 1}]),
        )
    )
    try:
        y = shiftbench.corrupt(img, name, 3, draws=[{**d, key: bad}])
    except errors.ShiftbenchError:
        return
    assert y.shape == img.shape and y.dtype == np.uint8


@settings(settings.get_profile(PROFILE), max_examples=15 if not LONG else int(os.environ.get("SHIFTBENCH_FUZZ_EXAMPLES", "300")))
@given(
    args=st.lists(
        st.sampled_from(
            ["--corruptions", "", "*zzz*", "border", "fog", "--severities", "0", "9", "1,2", "--seed", "-3",
             str(2**64), "--edition", "99", "224", "--workers", "1", "--out", "x.bmp", "--batch-size", "0", "--bogus"]
        ),
        max_size=8,
    ),
    command=st.sampled_from(["list", "corrupt", "generate"]),
)
def test_fuzz_cli(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], args: list[str], command: str) -> None:
    CASES["count"] += 1
    tmp = tmp_path_factory.mktemp("cli")
    img = tmp / "in.png"
    from PIL import Image

    Image.fromarray(np.zeros((40, 40, 3), np.uint8)).save(img)
    if command == "corrupt":
        argv = ["corrupt", str(img), *args]
    elif command == "generate":
        argv = ["generate", "imagenet-c", "--src", str(tmp / "nowhere"), *args]
    else:
        argv = ["list", *args]
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse/click usage errors
        rc = int(e.code or 0)
    err = capsys.readouterr().err
    assert rc in (0, 1, 2), (argv, rc, err)
    if rc == 2:
        assert "Traceback" not in err


OUT_EXTS = [".png", ".PNG", ".jpg", ".JPEG", ".bmp", ".tif", ".tiff", ".webp", ".gif", ".xyz", "", ".", ".png.part", ".tar.gz"]
PLACES = ["here", "missing/parents", "below_file", "is_file", "is_folder", "unwritable", "unwritable/new"]
IN_MODES = ["RGB", "RGBA", "LA", "L", "P", "I;16", "F"]


def _place(tmp: Path, place: str, name: str) -> tuple[Path, bool]:
    """An output path of a given kind under ``tmp``; True if it can be written."""
    from .conftest import unwritable_folder

    (tmp / "afile").write_bytes(b"x")
    if place == "here":
        return tmp / name, True
    if place == "missing/parents":
        return tmp / "new" / "deeper" / name, True
    if place == "below_file":
        return tmp / "afile" / name, False
    if place == "is_file":
        return tmp / "afile", False
    if place == "is_folder":
        (tmp / name).mkdir(exist_ok=True)
        return tmp / name, False
    ro = unwritable_folder(tmp)
    return (ro / name if place == "unwritable" else ro / "new" / name), False


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p): (p.read_bytes() if p.is_file() else None) for p in root.rglob("*")}


@settings(settings.get_profile(PROFILE), max_examples=25 if not LONG else int(os.environ.get("SHIFTBENCH_FUZZ_EXAMPLES", "300")))
@given(
    ext=st.sampled_from(OUT_EXTS),
    stem=st.sampled_from(["out", "a b", ".hidden", "x.y"]),
    place=st.sampled_from(PLACES),
    mode=st.sampled_from(IN_MODES),
    command=st.sampled_from(["corrupt", "corrupt", "generate"]),
)
def test_fuzz_cli_outputs(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], ext: str, stem: str, place: str, mode: str, command: str
) -> None:
    """Output paths and extensions: a correct file, or one line naming the option with exit code 2 and
    nothing written; which of the two is decided by the format table and the place."""
    from PIL import Image

    from shiftbench.outputs import IMAGE_FORMATS, corrupted_mode

    CASES["count"] += 1
    tmp = tmp_path_factory.mktemp("out")
    rng = np.random.default_rng(len(ext) + len(stem))
    im = Image.fromarray(rng.integers(0, 256, (40, 36, 4), dtype=np.uint8))
    im = {"I;16": Image.fromarray(np.asarray(im.convert("L")).astype(np.uint16) * 257),
          "F": Image.fromarray(np.asarray(im.convert("L")).astype(np.float32) / 255)}.get(mode) or im.convert(mode)
    (tmp / "src" / "n0").mkdir(parents=True)
    im.save(tmp / "src" / "n0" / "in.tif")
    out, writable = _place(tmp, place, stem + (ext if command == "corrupt" else ""))
    before = _tree(tmp)
    if command == "corrupt":
        option = "OUT_IMAGE"
        fmt = IMAGE_FORMATS.get(Path(out).suffix.lower())
        ok = writable and fmt is not None and corrupted_mode(mode) in fmt.modes
        argv = ["corrupt", str(tmp / "src" / "n0" / "in.tif"), str(out), "-c", "contrast", "-s", "1"]
    else:
        option = "--out"
        ok = writable or place == "is_folder"  # an existing --out folder is filled (or resumed)
        argv = ["generate", "imagenet-c", "--src", str(tmp / "src"), "--out", str(out), "--corruptions", "contrast",
                "--severities", "1", "--workers", "1", "--edition", "64"]
    rc = main(argv)
    err = capsys.readouterr().err
    if ok:
        assert rc == 0, (argv, err)
        if command == "corrupt":
            with Image.open(out) as got:
                assert got.mode == corrupted_mode(mode) and got.size == im.size
        else:
            assert (Path(out) / "contrast" / "1" / "n0" / "in.JPEG").is_file()
        return
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and option in lines[0] and "Traceback" not in err, (argv, rc, err)
    assert _tree(tmp) == before  # nothing written, created or left half-done


@pytest.mark.slow
def test_fuzz_long_run_budget() -> None:
    """Run with SHIFTBENCH_FUZZ=long -m slow; reports the number of cases exercised."""
    if not LONG:
        pytest.skip("set SHIFTBENCH_FUZZ=long")
    print(f"fuzz cases: {CASES['count']}")
