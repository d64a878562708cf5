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
from collections.abc import Callable
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
    _recheck(lambda: shiftbench.corrupt(x, name, severity, seed=seed), y, (name, severity, seed), x)  # type: ignore[arg-type]


# Order independence: every output is kept (small ones) and a random earlier case is recomputed after the later ones
# ran, so an output that depends on what was computed before (a cache keyed by the wrong thing) differs. The long
# profile also hands the kept cases to a fresh interpreter at the end (test_fuzz_fresh_recomputation).
KEPT: list[tuple[Callable[[], object], str, tuple[object, ...]]] = []
DIFFERS: list[tuple[object, ...]] = []


def _digest(y: object) -> str:
    import hashlib

    if isinstance(y, torch.Tensor):
        a = y.detach().cpu().numpy()
    elif isinstance(y, np.ndarray):
        a = y
    else:
        a = np.asarray(y)
    return hashlib.sha256(np.ascontiguousarray(a).tobytes() + str(a.dtype).encode() + str(a.shape).encode()).hexdigest()


def _recheck(again: Callable[[], object], y: object, what: tuple[object, ...], x: object) -> None:
    if int(np.prod(np.shape(x))) > 150_000:  # large inputs are not kept (memory); their outputs are checked above
        return
    KEPT.append((again, _digest(y), what))
    if len(KEPT) > 1:
        fn, want, label = KEPT[int(np.random.default_rng(len(KEPT)).integers(0, len(KEPT) - 1))]
        got = _digest(fn())
        if got != want:
            DIFFERS.append(label)
        assert got == want, f"output of {label} changed after later calls"
    if len(KEPT) > 150:
        del KEPT[: len(KEPT) - 150]


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


PERTURBATIONS = None


def _perturbations() -> list[str]:
    from shiftbench.perturbations import list_perturbations

    return list(list_perturbations())


@settings(settings.get_profile(PROFILE), max_examples=8 if not LONG else int(os.environ.get("SHIFTBENCH_FUZZ_EXAMPLES", "300")))
@given(
    name=st.sampled_from(_perturbations() + ["no_such"]),
    side=st.one_of(st.integers(1, 40), st.integers(32, 96 if not LONG else 320)),
    dtype=st.sampled_from(["uint8", "float32", "float64"]),
    seed=st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([-1, 2**64, 1.5, "3", True])),
    difficulty=st.sampled_from([1, 2, 3, 0, 4, None]),
)
def test_fuzz_perturb(name: str, side: int, dtype: str, seed: object, difficulty: object) -> None:
    """``perturb`` over every perturbation: a finite sequence in range, or a typed error; order independent."""
    from shiftbench.perturbations import perturb

    CASES["count"] += 1
    rng = np.random.default_rng(side)
    x = rng.integers(0, 256, (side, side + 1, 3), dtype=np.uint8)
    if dtype != "uint8":
        x = (x / 255).astype(dtype)
    kwargs = {"seed": seed} if difficulty is None else {"seed": seed, "difficulty": difficulty}
    try:
        y = perturb(x, name, **kwargs)  # type: ignore[arg-type]
    except errors.ShiftbenchError:
        return
    arr = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    assert arr.ndim >= 4 and np.isfinite(arr.astype(np.float64)).all()
    _recheck(lambda: perturb(x, name, **kwargs), y, ("perturb", name, side, seed, difficulty), x)  # type: ignore[arg-type]


def _image_bytes(data: st.DataObject, tmp: Path) -> Path:
    """A file that is an image of a random mode and depth, possibly cut short or with bytes flipped."""
    from PIL import Image

    mode = data.draw(st.sampled_from(["L", "LA", "RGB", "RGBA", "P", "1", "CMYK", "I;16", "I", "F", "LAB", "YCbCr"]))
    h, w = data.draw(st.integers(1, 70)), data.draw(st.integers(1, 70))
    rng = np.random.default_rng(h * 131 + w)
    if mode == "I;16":
        im = Image.fromarray(rng.integers(0, 65536, (h, w), dtype=np.uint16))
    elif mode == "I":
        im = Image.fromarray(rng.integers(data.draw(st.sampled_from([0, -5])), 70000, (h, w), dtype=np.int32))
    elif mode == "F":
        im = Image.fromarray((rng.random((h, w)) * data.draw(st.sampled_from([1.0, 1.0, 300.0, float("nan")]))).astype(np.float32))
    else:
        im = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).convert(mode)
    ext = data.draw(st.sampled_from([".png", ".tif", ".bmp", ".jpg", ".webp", ".ppm"]))
    f = tmp / f"img{ext}"
    try:
        im.save(f)
    except (OSError, ValueError, KeyError):
        f = tmp / "img.tif"
        try:
            im.save(f)
        except (OSError, ValueError, KeyError):
            f.write_bytes(b"")
    raw = bytearray(f.read_bytes())
    how = data.draw(st.sampled_from(["as is", "as is", "cut", "flip", "zero"]))
    if how == "cut" and raw:
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    elif how == "flip" and raw:
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= data.draw(st.integers(1, 255))
    elif how == "zero":
        raw = bytearray(len(raw))
    f.write_bytes(bytes(raw))
    return f


@settings(settings.get_profile(PROFILE), max_examples=40 if not LONG else int(os.environ.get("SHIFTBENCH_FUZZ_EXAMPLES", "300")))
@given(data=st.data())
def test_fuzz_image_reader(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """The one image reader on images of every mode, cut short or with flipped bytes: 8-bit RGB, or a typed error /
    one of the decode errors every reader counts as an unreadable file."""
    from shiftbench.io import DECODE_ERRORS, load_image_rgb

    CASES["count"] += 1
    f = _image_bytes(data, tmp_path_factory.mktemp("img"))
    try:
        im = load_image_rgb(f)
    except (errors.ShiftbenchError, *DECODE_ERRORS):
        return
    a = np.asarray(im)
    assert im.mode == "RGB" and a.dtype == np.uint8 and a.ndim == 3 and a.shape[2] == 3


@settings(settings.get_profile(PROFILE), max_examples=40 if not LONG else int(os.environ.get("SHIFTBENCH_FUZZ_EXAMPLES", "300")))
@given(data=st.data())
def test_fuzz_array_reader(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """``generate --src`` arrays (.npy, .npz, CIFAR batches) of any dtype, range, shape and label list: exact 8-bit
    images with one integer label each, or a typed error."""
    import pickle

    from shiftbench.sources import load_array_source

    CASES["count"] += 1
    tmp = tmp_path_factory.mktemp("arr")
    n = data.draw(st.integers(0, 5))
    shape = data.draw(st.sampled_from([(n, 32, 32, 3), (n, 3072), (n, 8, 8), (n, 32, 32, 4), (n,)]))
    dtype = data.draw(st.sampled_from(["uint8", "uint16", "int64", "float32", "float64", "bool", "complex64", "object"]))
    rng = np.random.default_rng(n)
    scale = data.draw(st.sampled_from([1.0, 255.0, 400.0, -3.0, float("nan"), float("inf")]))
    import warnings

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        a = rng.random(shape) * scale
        a = a.astype(dtype) if dtype not in ("uint8", "uint16", "int64", "bool") else np.nan_to_num(a).astype(dtype)
    labels: object = data.draw(st.sampled_from([None, "ok", "short", "float", "strings", "negative"]))
    lab = {"ok": list(range(n)), "short": list(range(max(n - 1, 0))), "float": [0.5] * n, "strings": ["a"] * n,
           "negative": [-1] * n, None: None}[labels]  # type: ignore[index]
    kind = data.draw(st.sampled_from(["npy", "npz", "cifar", "cifar100"]))
    if kind == "npy":
        f = tmp / "x.npy"
        np.save(f, a, allow_pickle=True)
    elif kind == "npz":
        f = tmp / "x.npz"
        arrays = {"images": a} if lab is None else {"images": a, "labels": np.asarray(lab, dtype=object if labels == "strings" else None)}
        np.savez(f, **arrays)
    else:
        f = tmp / ("test_batch" if kind == "cifar" else "test")
        d = {b"data": a}
        if kind == "cifar" and lab is not None:
            d[b"labels"] = lab
        elif lab is not None:
            d[b"fine_labels"] = lab
            d[b"coarse_labels"] = [0] * len(lab)
        f.write_bytes(pickle.dumps(d, protocol=2))
    try:
        src = load_array_source(f)
    except errors.ShiftbenchError:
        return
    assert src.images.dtype == np.uint8 and src.images.ndim == 4 and src.images.shape[-1] == 3
    assert src.labels.dtype == np.int64 and src.labels.shape == (len(src.images),) and (src.labels >= 0).all()


STORE_TAMPERING = [
    None,
    "CREATE TRIGGER t AFTER INSERT ON records BEGIN SELECT 1; END",
    "CREATE VIEW v AS SELECT 1",
    "UPDATE evaluations SET options='{'",
    "UPDATE evaluations SET seed=1.5",
    "UPDATE runs SET n_expected='x'",
    "UPDATE meta SET value='abc' WHERE key='schema_version'",
    "UPDATE meta SET value='99' WHERE key='schema_version'",
    "DROP TABLE records",
    "DELETE FROM meta",
    "UPDATE label_spaces SET classes='[]'",
    "UPDATE models SET name=x'ff00'",
]


@settings(settings.get_profile(PROFILE), max_examples=12 if not LONG else int(os.environ.get("SHIFTBENCH_FUZZ_EXAMPLES", "300")))
@given(
    fixture=st.sampled_from(["v1_imagenet_c.sqlite", "v2_all.sqlite", "v3_all.sqlite"]),
    sql=st.sampled_from(STORE_TAMPERING),
    damage=st.sampled_from(["none", "none", "flip", "cut", "zero page"]),
    where=st.integers(0, 2**20),
)
def test_fuzz_store_opener(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], fixture: str,
                           sql: str | None, damage: str, where: int) -> None:  # fmt: skip
    """Opening a tampered or damaged store for reading: it lists its results or is refused with one typed line, and
    the file is never changed."""
    import hashlib
    import shutil
    import sqlite3

    from shiftbench.evaluation.store import ResultsStore

    CASES["count"] += 1
    tmp = tmp_path_factory.mktemp("store")
    store = tmp / "s.sqlite"
    shutil.copyfile(Path(__file__).resolve().parent / "fixtures" / "stores" / fixture, store)
    if sql is not None:
        db = sqlite3.connect(store)
        try:
            db.executescript(sql)
        except sqlite3.Error:
            pass
        db.close()
    raw = bytearray(store.read_bytes())
    if damage == "flip":
        raw[where % len(raw)] ^= 0xA5
    elif damage == "cut":
        raw = raw[: where % len(raw)]
    elif damage == "zero page":
        page = (where % max(len(raw) // 4096, 1)) * 4096
        raw[page : page + 4096] = bytes(len(raw[page : page + 4096]))
    store.write_bytes(bytes(raw))
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    names = sorted(p.name for p in tmp.iterdir())
    try:
        with ResultsStore(store, create=False) as db:
            for ev in db.evaluations():
                db.runs(ev.id)
    except errors.ShiftbenchError:
        pass
    except sqlite3.DatabaseError:
        pass  # damage past the schema check (a record page): the command line turns it into one line, below
    rc = main(["results", "--store", str(store)])
    err = capsys.readouterr().err
    assert rc in (0, 1, 2) and "Traceback" not in err, err
    if rc:
        assert len([ln for ln in err.splitlines() if ln.startswith("Error")]) == 1, err
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp.iterdir()) == names


CONFIG_KEYS = {
    "study": ["name", "seed", "output", "device", "bogus"],
    "data": ["image_size", "limit_train", "limit_test", "test_fraction", "dataset"],
    "model": ["arch", "width"],
    "train": ["epochs", "batch_size", "lr", "momentum", "weight_decay", "milestones", "gamma", "hflip",
              "corrupted_fraction", "num_workers", "cpu_threads", "mode"],
}
CONFIG_VALUES = [0, 1, -5, 2**70, 1.5, float("nan"), float("inf"), "abc", "false", True, False, None, [], [0], [1, 2],
                 {"a": 1}, "../../ESCAPED", "x" * 300, 10**6, 0.5]


@settings(settings.get_profile(PROFILE), max_examples=60 if not LONG else int(os.environ.get("SHIFTBENCH_FUZZ_EXAMPLES", "300")))
@given(
    changes=st.lists(st.tuples(st.sampled_from(sorted(CONFIG_KEYS)), st.integers(0, 20), st.sampled_from(CONFIG_VALUES)),
                     min_size=1, max_size=3),
)
def test_fuzz_overlap_config(tmp_path_factory: pytest.TempPathFactory, changes: list[tuple[str, int, object]]) -> None:
    """Overlap-study configs with values of any type in any key: a checked config, or a typed error."""
    from shiftbench.overlap.harness import config_from_dict

    CASES["count"] += 1
    tmp = tmp_path_factory.mktemp("cfg")
    doc: dict[str, dict[str, object]] = {
        "study": {"name": "ci", "output": str(tmp / "out"), "seed": 0},
        "data": {"dataset": "tensors", "image_size": 32},
        "model": {"arch": "small_cnn", "width": 8},
        "train": {"epochs": 1},
        "corruptions": {"train": ["noc_hue"]},
    }
    for section, k, value in changes:
        keys = CONFIG_KEYS[section]
        doc[section][keys[k % len(keys)]] = value
    if doc["study"].get("output") is None or not isinstance(doc["study"].get("output"), str):
        doc["study"]["output"] = str(tmp / "out")
    try:
        cfg = config_from_dict(doc)
    except errors.ShiftbenchError:
        return
    assert isinstance(cfg.seed, int) and 0 <= cfg.seed < 2**64 and isinstance(cfg.train.hflip, bool)
    assert isinstance(cfg.train.epochs, int) and cfg.train.epochs >= 1 and 32 <= cfg.data.image_size <= 1024
    assert "/" not in cfg.name and not cfg.name.startswith(".")


@pytest.mark.slow
def test_fuzz_fresh_recomputation(tmp_path: Path) -> None:
    """The long profile's kept outputs recomputed in a fresh interpreter (nothing cached from earlier calls)."""
    if not LONG:
        pytest.skip("set SHIFTBENCH_FUZZ=long")
    import pickle
    import subprocess
    import sys

    # the kept closures hold their inputs; the fresh interpreter gets them pickled (plain arrays and names)
    payload = []
    for fn, want, label in KEPT:
        free = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ()), strict=True))
        payload.append((label, want, {k: v for k, v in free.items() if k in ("x", "name", "severity", "seed", "kwargs")}))
    f = tmp_path / "cases.pkl"
    f.write_bytes(pickle.dumps(payload))
    code = (
        "import pickle, sys, hashlib, numpy as np, torch, shiftbench\n"
        "from shiftbench.perturbations import perturb\n"
        "from tests.test_fuzz import _digest\n"
        "bad = 0\n"
        "for label, want, v in pickle.load(open(sys.argv[1], 'rb')):\n"
        "    y = perturb(v['x'], v['name'], **v['kwargs']) if 'kwargs' in v else shiftbench.corrupt(v['x'], v['name'], v['severity'], seed=v['seed'])\n"
        "    bad += _digest(y) != want\n"
        "print(len(pickle.load(open(sys.argv[1], 'rb'))), bad)\n"
    )
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo / "src") + os.pathsep + str(repo)}
    r = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, text=True, env=env, cwd=repo,
                       timeout=1800, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    n, bad = map(int, r.stdout.split()[-2:])
    print(f"fresh recomputation: {n} outputs, {bad} differ")
    assert bad == 0 and n == len(payload)


@pytest.mark.slow
def test_fuzz_long_run_budget() -> None:
    """Run with SHIFTBENCH_FUZZ=long -m slow; reports the number of cases exercised."""
    if not LONG:
        pytest.skip("set SHIFTBENCH_FUZZ=long")
    print(f"fuzz cases: {CASES['count']}; outputs recomputed after later calls that differed: {len(DIFFERS)}")
