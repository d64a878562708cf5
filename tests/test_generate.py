"""Dataset generation: layouts, resume after interruption, manifest, bad files."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import shiftbench
from shiftbench.cli import main
from shiftbench.editions import preprocess
from shiftbench.sources import load_image_rgb

from .conftest import sample_paths


def _make_src(tmp: Path, n_per_class: int = 2, classes: int = 2) -> Path:
    src = tmp / "src"
    paths = sample_paths()
    k = 0
    for c in range(classes):
        d = src / f"n0000000{c}"
        d.mkdir(parents=True)
        for _ in range(n_per_class):
            shutil.copy(paths[k], d / paths[k].name)
            k += 1
    return src


def _tree(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*.JPEG"))
    }


def test_generate_folder_layout_matches_api(tmp_path: Path) -> None:
    src = _make_src(tmp_path)
    out = tmp_path / "out"
    rc = main(["generate", "imagenet-c", "--src", str(src), "--out", str(out), "--corruptions", "contrast,gaussian_noise",
               "--severities", "2", "--workers", "1", "--seed", "4"])
    assert rc == 0
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.JPEG"))
    assert len(files) == 8 and files[0].startswith("contrast/2/n00000000/")
    one = next(iter(sorted((src / "n00000000").iterdir())))
    clean = np.asarray(preprocess(load_image_rgb(one), "224"))
    expect = shiftbench.corrupt(clean, "gaussian_noise", 2, seed=4, release=True)
    got = np.asarray(load_image_rgb(out / "gaussian_noise" / "2" / "n00000000" / one.name))
    assert np.array_equal(got, expect)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["files"] == 8 and manifest["config"]["seed"] == 4 and "torch" in manifest["versions"]
    lines = (out / "checksums.sha256").read_text().splitlines()
    assert len(lines) == 8
    h, rel = lines[0].split("  ")
    assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == h


def test_generate_refuses_other_settings(tmp_path: Path) -> None:
    src = _make_src(tmp_path, 1, 1)
    out = tmp_path / "out"
    base = ["generate", "imagenet-c", "--src", str(src), "--out", str(out), "--corruptions", "contrast", "--severities", "1", "--workers", "1"]
    assert main(base) == 0
    assert main(base + ["--seed", "9"]) != 0


def test_generate_reports_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _make_src(tmp_path, 1, 1)
    (src / "n00000000" / "broken.JPEG").write_bytes(b"not a jpeg")
    good = next(p for p in (src / "n00000000").iterdir() if p.name != "broken.JPEG")
    (src / "n00000000" / "truncated.JPEG").write_bytes(good.read_bytes()[:2000])
    out = tmp_path / "out"
    rc = main(["generate", "imagenet-c", "--src", str(src), "--out", str(out), "--corruptions", "contrast", "--severities", "1", "--workers", "1"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "broken.JPEG" in err and "truncated.JPEG" in err
    assert len(list(out.rglob("*.JPEG"))) == 1
    assert len(json.loads((out / "manifest.json").read_text())["failed"]) == 2


def test_generate_missing_src(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "imagenet-c", "--src", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) != 0
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["generate", "imagenet-c", "--src", str(tmp_path / "empty"), "--out", str(tmp_path / "o2")]) != 0
    assert main(["generate", "imagenet-c", "--src", str(tmp_path / "empty"), "--out", str(tmp_path / "o3"), "--severities", "7"]) != 0


def test_generate_resumes_after_kill(tmp_path: Path) -> None:
    src = _make_src(tmp_path, 3, 2)
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    args = ["--src", str(src), "--corruptions", "gaussian_noise,contrast,jpeg_compression", "--workers", "1", "--batch-size", "1"]
    cmd = [sys.executable, "-m", "shiftbench.cli", "generate", "imagenet-c"]
    p = subprocess.Popen(cmd + ["--out", str(out_a)] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(out_a.rglob("*.JPEG"))) < 10:
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    partial = len(list(out_a.rglob("*.JPEG")))
    assert 0 < partial < 90
    assert subprocess.run(cmd + ["--out", str(out_a)] + args, capture_output=True).returncode == 0
    assert subprocess.run(cmd + ["--out", str(out_b)] + args, capture_output=True).returncode == 0
    ta, tb = _tree(out_a), _tree(out_b)
    assert len(ta) == 90 and ta == tb
    assert not list((out_a / ".shiftbench" / "tmp").glob("*")) if (out_a / ".shiftbench" / "tmp").exists() else True
    assert len((out_a / "checksums.sha256").read_text().splitlines()) == 90


def test_generate_cifar_layout(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    imgs = photos32 = np.stack([np.asarray(load_image_rgb(p).resize((32, 32))) for p in sample_paths()[:6]])
    labels = np.arange(6) % 3
    np.savez(tmp_path / "cifar.npz", images=photos32, labels=labels)
    out = tmp_path / "c"
    rc = main(["generate", "imagenet-c", "--src", str(tmp_path / "cifar.npz"), "--out", str(out), "--edition", "32",
               "--corruptions", "gaussian_noise,contrast", "--workers", "1"])
    assert rc == 0
    arr = np.load(out / "gaussian_noise.npy")
    assert arr.shape == (30, 32, 32, 3) and arr.dtype == np.uint8
    assert np.array_equal(np.load(out / "labels.npy"), np.tile(labels, 5).astype(np.uint8))
    # severity-major: block s-1 holds severity s
    assert np.array_equal(arr[12:18], shiftbench.corrupt(imgs, "gaussian_noise", 3, seed=0, edition="32"))
    assert not (out / ".shiftbench" / "parts").exists() or not list((out / ".shiftbench" / "parts").iterdir())
    del rng


def test_generate_device_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _make_src(tmp_path, 1, 1)
    base = ["generate", "imagenet-c", "--src", str(src), "--corruptions", "fog", "--severities", "1", "--workers", "1"]
    assert main(base + ["--out", str(tmp_path / "a"), "--device", "tpu"]) != 0
    err = capsys.readouterr().err
    assert "--device" in err and "tpu" in err and "cuda:N" in err
    assert not (tmp_path / "a").exists()  # refused before anything is written
    if not torch.cuda.is_available():
        assert main(base + ["--out", str(tmp_path / "b"), "--device", "cuda"]) != 0
        assert "no CUDA device" in capsys.readouterr().err
    assert main(base + ["--out", str(tmp_path / "c"), "--device", "cpu"]) == 0
    assert json.loads((tmp_path / "c" / "manifest.json").read_text())["config"]["device"] == "cpu"


@pytest.mark.gpu
def test_generate_on_cuda_writes_the_cpu_files(tmp_path: Path) -> None:
    """Corrupting on the GPU gives the same pixels, hence byte-identical JPEG files and CIFAR arrays."""
    src = _make_src(tmp_path, 2, 2)
    base = ["generate", "imagenet-c", "--src", str(src), "--corruptions", "gaussian_noise,fog,jpeg_compression,glass_blur",
            "--severities", "1,5", "--workers", "2"]
    assert main(base + ["--out", str(tmp_path / "cpu")]) == 0
    assert main(base + ["--out", str(tmp_path / "gpu"), "--device", "cuda"]) == 0
    assert _tree(tmp_path / "cpu") == _tree(tmp_path / "gpu") and len(_tree(tmp_path / "cpu")) == 4 * 2 * 4
    arr = np.random.default_rng(0).integers(0, 256, (6, 32, 32, 3)).astype(np.uint8)
    np.save(tmp_path / "x.npy", arr)
    np.save(tmp_path / "y.npy", np.arange(6))
    cifar = ["generate", "imagenet-c", "--src", str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"), "--edition", "32",
             "--corruptions", "snow,pixelate", "--workers", "1"]
    assert main(cifar + ["--out", str(tmp_path / "c1")]) == 0
    assert main(cifar + ["--out", str(tmp_path / "c2"), "--device", "cuda"]) == 0
    for name in ("snow", "pixelate"):
        assert np.array_equal(np.load(tmp_path / "c1" / f"{name}.npy"), np.load(tmp_path / "c2" / f"{name}.npy"))


def _whole_tree(out: Path) -> dict[str, str]:
    """Every file outside the state folder (images, arrays, manifest.json, checksums.sha256) by content."""
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and ".shiftbench" not in p.relative_to(out).parts
    }


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["folder", "cifar"])
def test_concurrent_jobs_into_one_out_equal_one_job(tmp_path: Path, layout: str) -> None:
    """The job-array pattern: one corruption per job, all into one --out, at the same time; then one
    job killed with SIGKILL and rerun. Same tree, manifest and checksums as one sequential job."""
    names = ["contrast", "brightness", "gaussian_noise"]
    if layout == "folder":
        src = _make_src(tmp_path, 2, 1)
        extra = ["--severities", "1,3"]
    else:
        imgs = np.stack([np.asarray(load_image_rgb(p).resize((32, 32))) for p in sample_paths()[:4]])
        np.savez(tmp_path / "cifar.npz", images=imgs, labels=np.arange(4) % 2)
        src = tmp_path / "cifar.npz"
        extra = ["--edition", "32"]
    cmd = [sys.executable, "-m", "shiftbench.cli", "generate", "imagenet-c", "--src", str(src), "--workers", "1", *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    one = tmp_path / "one"
    r = subprocess.run(cmd + ["--out", str(one), "--corruptions", ",".join(names)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    many = tmp_path / "many"
    jobs = [subprocess.Popen(cmd + ["--out", str(many), "--corruptions", n], stderr=subprocess.PIPE, text=True, env=env) for n in names]
    for j in jobs:
        _, err = j.communicate(timeout=600)
        assert j.returncode == 0, err
    assert _whole_tree(many) == _whole_tree(one)
    assert len(_whole_tree(one)) > len(names)
    # kill -9 one job of a fresh array mid-run, rerun it: still the same
    killed = tmp_path / "killed"
    jobs = [subprocess.Popen(cmd + ["--out", str(killed), "--corruptions", n], stderr=subprocess.DEVNULL, env=env) for n in names]
    time.sleep(1.0)
    os.kill(jobs[0].pid, signal.SIGKILL)
    for j in jobs:
        j.wait(timeout=600)
    r = subprocess.run(cmd + ["--out", str(killed), "--corruptions", names[0]], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert _whole_tree(killed) == _whole_tree(one)
    assert not [p for p in (killed / ".shiftbench" / "tmp").rglob("*") if p.is_file()]
