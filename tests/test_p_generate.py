"""ImageNet-P on disk and exact: ``generate imagenet-p`` (released layouts, resume after kill -9, files equal to
``perturb()``'s frames), ``perturb(..., draws=...)``, the 64x64 squashed edition, the 299 clean crop through
shiftbench's own resize on portrait and landscape photos, and CIFAR-P spatter's black frames."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from shiftbench.cli import main
from shiftbench.errors import InvalidArgumentError
from shiftbench.perturbations import perturb, prepare
from shiftbench.perturbations.sequences import sample_sequence_draws
from shiftbench.perturbations.video import encode_video, read_video

from .conftest import REPO, SAMPLE_DIR

LANDSCAPE = "n01440764_tench"  # 500 x 375
PORTRAIT = "n01820546_lorikeet"  # 371 x 500
PORTRAIT_2 = "n02417914_ibex"  # 375 x 500
SMALL = "n03825788_nipple"  # 106 x 150: upsampled to 64 x 64 and 299 x 299
PHOTOS = [LANDSCAPE, PORTRAIT, PORTRAIT_2]


def _photo(name: str) -> Path:
    return SAMPLE_DIR / f"{name}.JPEG"


def _pillow_major() -> int:
    import PIL

    return int(PIL.__version__.split(".")[0])


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("p-src") / "src"
    for name in PHOTOS:
        d = root / name.split("_")[0]
        d.mkdir(parents=True)
        (d / f"{name}.JPEG").symlink_to(_photo(name))
    return root


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env["OMP_NUM_THREADS"] = "1"
    return env


def _cmd(src: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "shiftbench.cli", "generate", "imagenet-p", "--src", str(src), "--out", str(out),
            "--edition", "64", "--perturbations", "gaussian_noise,rotate,spatter", "--preset", "ultrafast",
            "--batch-size", "1", "--workers", "1", *extra]


# ----------------------------------------------------------------------------- the 299 crop and the 64x64 edition


@pytest.mark.parametrize("name", [LANDSCAPE, PORTRAIT, PORTRAIT_2, SMALL])
def test_299_clean_crop_is_frame_zero_of_translate_and_rotate(name: str) -> None:
    """The clean crop goes through the same resize as the perturbed frames (Pillow <= 12's pass order), so the
    untransformed frames equal it, whatever Pillow is installed."""
    from shiftbench.perturbations._warp import pil_resize

    a = np.asarray(Image.open(_photo(name)).convert("RGB"))
    prep = prepare(a, "299")
    h, w = a.shape[:2]
    ch, cw = int(0.875 * h), int(0.875 * w)
    top, left = int(round((h - ch) / 2)), int(round((w - cw) / 2))
    window = torch.from_numpy(np.ascontiguousarray(a[top : top + ch, left : left + cw].transpose(2, 0, 1)))
    assert torch.equal(prep.crops[0], pil_resize(window, 299, 299).to(torch.uint8))
    if _pillow_major() <= 12:  # the emulation is Pillow's own resize there
        pil = np.asarray(Image.fromarray(a[top : top + ch, left : left + cw]).resize((299, 299), Image.BILINEAR))
        assert np.array_equal(prep.crops[0].permute(1, 2, 0).numpy(), pil)
    assert torch.equal(perturb(prep, "translate")[0, 20], prep.crops[0])  # shift 0 px
    assert torch.equal(perturb(prep, "rotate")[0, 15], prep.crops[0])  # 0 degrees


def test_64x64_edition_is_the_squashed_photo() -> None:
    a = np.asarray(Image.open(_photo(PORTRAIT)).convert("RGB"))
    sq = prepare(a, "64x64")
    tiny = prepare(a, "64")
    assert sq.edition == tiny.edition == "64" and sq.recipe == "64x64" and tiny.recipe == ""
    assert not torch.equal(sq.crops, tiny.crops)  # squash vs Resize(64) + CenterCrop(64) of a portrait photo
    from shiftbench.perturbations._warp import pil_resize

    want = pil_resize(torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1))), 64, 64).to(torch.uint8)
    assert torch.equal(sq.crops[0], want)
    rot = perturb(sq, "rotate")
    assert torch.equal(rot[0, 15], sq.crops[0])
    # no context around the squashed photo: rotated frames are black in the corners (Tiny's show the photo)
    assert int(rot[0, 0, :, 0, 0].max()) == 0 and int(perturb(tiny, "rotate")[0, 0, :, 0, 0].max()) > 0
    with pytest.raises(InvalidArgumentError, match="64x64"):
        prepare(tiny, "64x64")


# ----------------------------------------------------------------------------- draws


@pytest.mark.parametrize(("name", "edition"), [("gaussian_noise", "64"), ("shot_noise", "32"), ("snow", "64"),
                                                ("spatter", "32"), ("rotate", "32")])
def test_perturb_replays_recorded_draws(name: str, edition: str) -> None:
    photos = [str(_photo(LANDSCAPE)), str(_photo(PORTRAIT))]
    want = perturb(photos, name, 2 if name == "gaussian_noise" else 1, seed=5, edition=edition)
    draws = sample_sequence_draws(photos, name, 2 if name == "gaussian_noise" else 1, seed=5, edition=edition)
    got = perturb(photos, name, 2 if name == "gaussian_noise" else 1, seed=77, edition=edition, draws=draws)
    assert torch.equal(got, want)  # the seed no longer matters: the frames follow from the draws


def test_given_draws_decide_the_frames() -> None:
    x = prepare(str(_photo(LANDSCAPE)), "32")
    zero = [{"z": np.zeros((30, 32, 32, 3), np.float32)}]
    frames = perturb(x, "gaussian_noise", draws=zero)
    assert torch.equal(frames[0], x.crops.expand(31, -1, -1, -1))  # no noise: every frame is the clean crop
    # an empty liquid layer: the reference divides 0 by 0 and np.uint8 writes black
    black = perturb(x, "spatter", draws=[{"layer": np.zeros((32, 32))}])
    assert int(black.max()) == 0
    with pytest.raises(InvalidArgumentError, match=r"draws\[0\]\['z'\]"):
        perturb(x, "gaussian_noise", draws=[{"z": np.zeros((29, 32, 32, 3), np.float32)}])
    with pytest.raises(InvalidArgumentError, match=r"draws\[0\]"):
        perturb(x, "snow", draws=[{"z": np.zeros((32, 32))}])
    with pytest.raises(InvalidArgumentError, match="draws"):
        perturb(x, "snow", draws=[])


def test_cifar_p_spatter_writes_black_frames_once_the_layer_runs_off() -> None:
    """CIFAR-P's kernel [0.2, 0.8] drains the layer within 31 frames: the reference's frames turn black then."""
    frames = perturb(str(_photo("n01530575_brambling")), "spatter", edition="32", seed=0)[0]
    black = [int(f) for f in torch.nonzero(frames.flatten(1).amax(1) == 0).flatten()]
    assert black and black[0] > 0 and 0 not in black
    assert int(frames[0].max()) > 0


# ----------------------------------------------------------------------------- generate imagenet-p


def _listing(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file() and ".shiftbench" not in p.parts}


@pytest.fixture(scope="module")
def whole_run(src: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("p-whole") / "out"
    r = subprocess.run(_cmd(src, out), env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "15 files written, 0 videos already done" in r.stdout  # 3 photos x (gaussian_noise x 3 + rotate + spatter)
    return out


def test_generate_writes_the_released_layout_with_perturb_frames(whole_run: Path) -> None:
    files = _listing(whole_run)
    videos = sorted(f for f in files if f.endswith(".mp4"))
    folders = sorted({v.split("/")[0] for v in videos})
    assert folders == ["gaussian_noise", "gaussian_noise_2", "gaussian_noise_3", "rotate", "spatter"]
    assert "rotate/n01820546/n01820546_lorikeet.mp4" in videos and len(videos) == 15
    sums = dict(reversed(line.split("  ")) for line in (whole_run / "checksums.sha256").read_text().splitlines())
    assert sums == {v: files[v] for v in videos}
    manifest = json.loads((whole_run / "manifest.json").read_text())
    assert manifest["dataset"] == "Tiny-ImageNet-P" and manifest["files"] == 15
    assert manifest["video"]["noise"]["tune"] == "grain" and manifest["video"]["temporal"]["crf"] == 20
    # each file is the encoding of perturb()'s frames of that photo
    for rel, name, d, err in [("rotate/n01820546/n01820546_lorikeet.mp4", "rotate", 1, 3),
                              ("gaussian_noise_3/n01440764/n01440764_tench.mp4", "gaussian_noise", 3, 8)]:
        frames = perturb(str(SAMPLE_DIR / Path(rel).with_suffix(".JPEG").name), name, d, seed=0, edition="64")[0]
        data = encode_video(frames, noise=name == "gaussian_noise", preset="ultrafast")
        assert hashlib.sha256(data).hexdigest() == files[rel]
        decoded = read_video(whole_run / rel, frames=31, size=(64, 64))
        assert np.abs(decoded.astype(int) - frames.permute(0, 2, 3, 1).numpy().astype(int)).mean() < err  # H.264 (lossy)


def _journal_rows(out: Path) -> int:
    db = out / ".shiftbench" / "journal.sqlite"
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT count(*) FROM files").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_generate_killed_then_rerun_gives_the_same_files(src: Path, whole_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = subprocess.Popen(_cmd(src, out), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while _journal_rows(out) < 4:
        assert p.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() - t0 < 300
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    assert 4 <= _journal_rows(out) < 15 and not (out / "manifest.json").exists()
    r = subprocess.run(_cmd(src, out), env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and " 0 videos already done" not in r.stdout, r.stdout + r.stderr
    assert _listing(out) == _listing(whole_run)  # files, manifest and checksums
    assert not list((out / ".shiftbench" / "tmp").iterdir())
    r = subprocess.run(_cmd(src, out), env=_env(), capture_output=True, text=True, timeout=600)
    assert "0 files written, 15 videos already done" in r.stdout


def test_generate_cifar_p_arrays_equal_perturb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (5, 32, 32, 3), dtype=np.uint8)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.arange(5))
    args = ["generate", "imagenet-p", "--src", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"),
            "--out", str(tmp_path / "out"), "--edition", "32", "--perturbations", "shot_noise,translate",
            "--difficulties", "1,3", "--workers", "1"]
    assert main(args) == 0
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("*.npy")) == ["labels.npy", "shot_noise.npy", "shot_noise_3.npy", "translate.npy"]
    t = np.load(out / "translate.npy")
    assert t.shape == (5, 16, 32, 32, 3)
    assert np.array_equal(t, perturb(x, "translate", edition="32").permute(0, 1, 3, 4, 2).numpy())
    assert np.array_equal(np.load(out / "shot_noise_3.npy"), perturb(x, "shot_noise", 3, edition="32").permute(0, 1, 3, 4, 2).numpy())
    assert np.array_equal(np.load(out / "labels.npy"), np.arange(5))
    assert main(args) == 0 and "0 files written" in capsys.readouterr().out


def test_generate_refuses_bad_settings_before_writing(src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    for extra, word in ((["--edition", "65"], "edition"), (["--difficulties", "4"], "--difficulties"),
                        (["--preset", "quick"], "--preset"), (["--perturbations", "rotat"], "perturbation")):
        rc = main(["generate", "imagenet-p", "--src", str(src), "--out", str(out), *extra])
        assert rc == 2 and word in capsys.readouterr().err
    rc = main(["generate", "imagenet-p", "--src", str(src), "--out", str(out), "--perturbations", "rotate", "--difficulties", "2"])
    assert rc == 2 and "temporal" in capsys.readouterr().err
    assert not out.exists()
