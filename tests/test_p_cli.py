"""``shiftbench evaluate --benchmark imagenet-p``: end to end, stored rows, resume, schema migration, bad input.

A cheap deterministic model (the toy ColourNet of ``_eval_toys``) stands in
for EfficientNet-Lite0: ``load_model`` of the pipeline is patched to return it,
everything else (option parsing, data, sequences, the store, the reports) is
the real CLI path.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import shiftbench.perturbations.pipeline as PP
from shiftbench.cli import main
from shiftbench.evaluation.store import ResultsStore, decode_top5
from shiftbench.perturbations import TEST_PERTURBATIONS, alexnet_p_baseline, evaluate_sequences, get_perturbation
from shiftbench.perturbations import video as V

from ._eval_toys import evaluate_p, image_folder, toy_classifier

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every model name resolves to the toy classifier (weights fixed by its seed)."""
    clf = toy_classifier("toy-p")
    import shiftbench.evaluation.driver as driver

    real = driver.load_model
    monkeypatch.setattr(driver, "load_model", lambda model, weights=None, device=None: real(clf, device=device))
    return clf


def _folder(tmp_path: Path, n_classes: int = 2, n_per_class: int = 1) -> Path:
    return image_folder(tmp_path / "data", n_per_class=n_per_class, n_classes=n_classes)


def _stored(store: Path) -> dict[tuple[str, int], dict[str, tuple[int, np.ndarray]]]:
    """Raw rows of the store, decoded without the library's readers: (perturbation, level) -> video -> (label, top5)."""
    db = sqlite3.connect(store)
    out: dict[tuple[str, int], dict[str, tuple[int, np.ndarray]]] = {}
    for rid, name, level, frames in db.execute("SELECT id, condition, level, frames FROM runs WHERE frames > 1"):
        rows = db.execute("SELECT item, label, frames_top5 FROM records WHERE run_id=?", (rid,)).fetchall()
        assert len(rows) == len({r[0] for r in rows})  # exactly one row per (run, video)
        out[(name, level)] = {
            v: (lab, np.frombuffer(blob, dtype="<u2").astype(np.int64).reshape(frames, 5)) for v, lab, blob in rows
        }
    db.close()
    return out


def _fp_ut5d(top5: np.ndarray, noise: bool, d: int = 1) -> tuple[float, float]:
    """Flip probability and uT5D by the definitions of the spec (section 4.4), written out plainly."""
    flips: list[float] = []
    dists: list[float] = []
    for video in top5:
        vf: list[int] = []
        vd: list[int] = []
        step = 1 if noise else d
        for start in range(step):
            chain = list(range(start, len(video), step))
            for a, b in zip(chain, chain[1:]):
                ref = video[chain[0]] if noise else video[a]
                cmp = video[b]
                vf.append(int(ref[0] != cmp[0]))
                ranks = {int(c): k + 1 for k, c in enumerate(cmp)}
                vd.append(sum(abs(k + 1 - min(ranks.get(int(c), 6), 6)) for k, c in enumerate(ref)))
        flips.append(float(np.mean(vf)))
        dists.append(float(np.mean(vd)))
    return float(np.mean(flips)), float(np.mean(dists))


def test_cli_end_to_end_stored_rows_recompute_the_printed_metrics(
    tmp_path: Path, toy: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _folder(tmp_path, n_classes=1)  # one photo, 224 edition: the AlexNet numbers apply
    store = tmp_path / "s.sqlite"
    args = ["evaluate", "--benchmark", "imagenet-p", "--data", str(root), "--store", str(store), "--batch-size", "24"]
    assert main([*args, "--no-progress", "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    d1 = doc["difficulties"]["1"]
    assert doc["benchmark"] == "imagenet-p" and doc["n_videos"] == 1 and doc["baseline"] == "AlexNet"
    assert list(d1["perturbations"]) == list(TEST_PERTURBATIONS)

    # Every printed number follows from the raw stored rows.
    rows = _stored(store)
    assert set(rows) == {(n, 1) for n in TEST_PERTURBATIONS}
    alex = alexnet_p_baseline()
    frs, t5ds = [], []
    for name in TEST_PERTURBATIONS:
        videos = rows[(name, 1)]
        assert sorted(videos) == sorted(f"{p.parent.name}/{p.name}" for p in root.glob("*/*.JPEG"))
        top5 = np.stack([videos[v][1] for v in sorted(videos)])
        assert top5.shape == (1, get_perturbation(name).frames("224"), 5)
        fp, ut = _fp_ut5d(top5, get_perturbation(name).noise)
        got = d1["perturbations"][name]
        assert got["fp"] == pytest.approx(fp) and got["ut5d"] == pytest.approx(ut)
        assert got["fr"] == pytest.approx(fp / alex.fp[name]) and got["t5d"] == pytest.approx(ut / alex.ut5d[name])
        frs.append(fp / alex.fp[name])
        t5ds.append(ut / alex.ut5d[name])
    assert d1["mfr"] == pytest.approx(np.mean(frs)) and d1["mt5d"] == pytest.approx(np.mean(t5ds))

    # The stored top-5 lists are those of the library API on the same photos (same frames, same model).
    from shiftbench.sources import load_image_rgb

    photos = [np.asarray(load_image_rgb(p)) for p in sorted(root.glob("*/*.JPEG"))]
    some = ["gaussian_noise", "translate", "rotate"]
    ref = evaluate_sequences(lambda x: toy.logits(x), photos, perturbations=some, batch_size=64)
    for name in some:
        videos = rows[(name, 1)]
        assert np.array_equal(np.stack([videos[v][1] for v in sorted(videos)]), ref.scores[(name, 1)].top5)

    # The table: a rerun reuses the store and prints the same numbers.
    assert main([*args, "--no-progress"]) == 0
    out = capsys.readouterr()
    assert "already complete" in out.err
    assert "FR (%)" in out.out and "T5D (%)" in out.out and "FP (%)" in out.out and "uT5D" in out.out
    assert f"{100 * d1['mfr']:.1f}" in out.out and f"{100 * d1['mt5d']:.1f}" in out.out
    assert "Baseline: AlexNet" in out.out

    # CSV and --results-file.
    csv_file = tmp_path / "r.csv"
    assert main([*args, "--no-progress", "--results-format", "csv", "--results-file", str(csv_file)]) == 0
    lines = csv_file.read_text().splitlines()
    assert lines[0].startswith("model,") and len(lines) == 1 + 10 + 1 and "mean (test)" in lines[-1]

    # shiftbench results lists the run with its mFR / mT5D; the videos export holds one record per video.
    assert main(["results", "--store", str(store)]) == 0
    listing = capsys.readouterr().out
    assert "Leaderboard by mFR: imagenet-p" in listing and f"{100 * d1['mfr']:.1f}" in listing
    assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
    p_rows = json.loads(capsys.readouterr().out)["imagenet_p"]
    assert p_rows[0]["mfr"] == pytest.approx(d1["mfr"]) and p_rows[0]["mt5d"] == pytest.approx(d1["mt5d"])
    export = tmp_path / "videos.json"
    assert main(["results", "--store", str(store), "--export", str(export), "--table", "p_videos"]) == 0
    recs = json.loads(export.read_text())
    assert len(recs) == 10 and all(len(r["top5"].split(";")) == r["frames"] for r in recs)


def test_difficulties_and_validation_perturbations(tmp_path: Path, toy: Any) -> None:
    root = _folder(tmp_path, n_classes=1)
    store = tmp_path / "s.sqlite"
    r = evaluate_p("toy", data=root, edition="64", perturbations="gaussian_noise,rotate,spatter",
                      difficulties="1-3", store=store, batch_size=40)
    rows = _stored(store)
    # noise: one run per difficulty (stronger noise); temporal: one run, scored at strides 1..3
    assert set(rows) == {("gaussian_noise", 1), ("gaussian_noise", 2), ("gaussian_noise", 3), ("rotate", 1), ("spatter", 1)}
    for d in (1, 2, 3):
        for name, level in (("gaussian_noise", d), ("rotate", 1), ("spatter", 1)):
            top5 = np.stack([t for _, t in rows[(name, level)].values()])
            fp, ut = _fp_ut5d(top5, get_perturbation(name).noise, d)
            sc = r.scores[(name, d)]
            assert sc.fp == pytest.approx(fp) and sc.ut5d == pytest.approx(ut)
            assert sc.fr is None  # no AlexNet numbers for the 64 edition
    assert r.summaries[1].mfr is None and any("edition only" in n for n in r.notes)


def _stop_after(clf: Any, n_batches: int) -> Any:
    calls = {"n": 0}
    forward = clf.forward

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] > n_batches:
            raise KeyboardInterrupt
        return forward(x)

    return fn


def test_interrupted_run_resumes_with_one_row_per_video_and_the_same_metrics(
    tmp_path: Path, toy: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _folder(tmp_path, n_classes=3)
    store, fresh = tmp_path / "s.sqlite", tmp_path / "fresh.sqlite"
    args = ["evaluate", "--benchmark", "imagenet-p", "--data", str(root), "--edition", "32", "--batch-size", "16",
            "--no-progress", "--results-format", "json"]
    forward = toy.forward
    toy.forward = _stop_after(toy, 25)  # about 6 frame batches per perturbation: stops inside the 5th one
    assert main([*args, "--store", str(store)]) == 130
    assert "run the same command again to resume" in capsys.readouterr().err
    partial = _stored(store)
    done = sum(len(v) for v in partial.values())
    assert 0 < done < 30 and all(len(v) <= 3 for v in partial.values())
    with ResultsStore(store) as db:
        assert sum(r.status == "complete" for r in db.p_runs(1)) < 10
    toy.forward = forward
    assert main([*args, "--store", str(store)]) == 0
    resumed = json.loads(capsys.readouterr().out)
    rows = _stored(store)
    assert all(len(v) == 3 for v in rows.values()) and len(rows) == 10
    for key, videos in partial.items():  # stored videos were kept, not recomputed differently
        for v, (lab, t5) in videos.items():
            assert rows[key][v][0] == lab and np.array_equal(rows[key][v][1], t5)
    assert main([*args, "--store", str(fresh)]) == 0
    straight = json.loads(capsys.readouterr().out)
    for name in TEST_PERTURBATIONS:
        a, b = resumed["difficulties"]["1"]["perturbations"][name], straight["difficulties"]["1"]["perturbations"][name]
        assert (a["fp"], a["ut5d"], a["videos"]) == (b["fp"], b["ut5d"], b["videos"])
    assert resumed["difficulties"]["1"]["mean_fp"] == straight["difficulties"]["1"]["mean_fp"]


CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from tests._eval_toys import toy_classifier
    from tests._eval_toys import evaluate_p

    clf = toy_classifier("toy-kill")
    forward = clf.forward
    def slow(x):
        time.sleep(0.03)
        return forward(x)
    clf.forward = slow
    clf.checksum = "fixed-for-the-test"

    class Lines:
        def start(self, total, description):
            print("start", total, flush=True)
        def advance(self, n, description):
            print("batch", n, flush=True)
        def stop(self):
            pass

    r = evaluate_p(clf, data=sys.argv[2], edition="32", perturbations="brightness,translate,gaussian_noise",
                   store=sys.argv[1], batch_size=4, progress=Lines())
    print("done", r.summaries[1].mean_fp, flush=True)
    """
)


def test_resume_after_sigkill(tmp_path: Path) -> None:
    root = _folder(tmp_path, n_classes=2)
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    store = tmp_path / "s.sqlite"
    cmd = [sys.executable, str(script), str(store), str(root)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO) as p:
        assert p.stdout is not None
        batches = 0
        for line in p.stdout:
            batches += line.startswith("batch")
            if batches == 20:  # of 2 x (31 + 31 + 16) / 4 ~ 40 batches: inside the second perturbation
                break
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    partial = _stored(store)
    assert 0 < sum(len(v) for v in partial.values()) < 6
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = _stored(store)
    assert len(rows) == 3 and all(len(v) == 2 for v in rows.values())
    mean_fp = float(out.stdout.strip().splitlines()[-1].split()[-1])
    fps = [_fp_ut5d(np.stack([t for _, t in rows[(n, 1)].values()]), get_perturbation(n).noise)[0]
           for n in ("gaussian_noise", "brightness", "translate")]
    assert mean_fp == pytest.approx(np.mean(fps))


def test_released_mp4_tree_and_cifar_p_arrays(tmp_path: Path, toy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from .conftest import sample_paths

    photos = [str(p) for p in sample_paths()[:2]]
    names = [Path(p).name for p in photos]
    wnids = [n.split("_")[0] for n in names]
    tree = tmp_path / "Tiny-ImageNet-P"
    for name in ("brightness", "rotate"):
        V.save_imagenet_p(tree, photos, name, names=names, wnids=wnids, edition="64", preset="ultrafast")
    store = tmp_path / "s.sqlite"
    r = evaluate_p("toy", released=tree, perturbations="brightness,rotate", difficulties="1,2", store=store,
                      batch_size=31)
    assert r.edition == "64" and r.seed is None and r.n_videos == 2 and not r.on_the_fly
    assert {k for k in r.scores} == {("brightness", 1), ("brightness", 2), ("rotate", 1), ("rotate", 2)}
    assert r.scores[("rotate", 1)].frame_accuracy is not None

    # A corrupt video is skipped and counted (or fails with --bad-images fail); a wrong frame count always fails.
    bad = tree / "rotate" / wnids[0] / "broken.mp4"
    bad.write_bytes(b"not a video at all")
    r2 = evaluate_p("toy", released=tree, perturbations="rotate", store=tmp_path / "s2.sqlite", batch_size=31)
    assert r2.skipped[("rotate", 1)] == 1 and r2.n_videos == 2 and any("could not be read" in n for n in r2.notes)
    with pytest.raises(V.CorruptVideoError, match="broken.mp4"):
        evaluate_p("toy", released=tree, perturbations="rotate", store=tmp_path / "s3.sqlite", bad_images="fail")
    bad.unlink()
    V.write_video(tree / "rotate" / wnids[0] / "short.mp4", np.zeros((20, 64, 64, 3), np.uint8), preset="ultrafast")
    with pytest.raises(V.VideoShapeError, match=r"short.mp4: frames is 20, expected 31"):
        evaluate_p("toy", released=tree, perturbations="rotate", store=tmp_path / "s4.sqlite")

    # CIFAR-P: N x T x 32 x 32 x 3 arrays without labels; a 10-class model.
    cifar = tmp_path / "CIFAR-10-P"
    rng = np.random.default_rng(0)
    V.save_cifar_p(cifar / "translate.npy", rng.integers(0, 256, (3, 16, 32, 32, 3), dtype=np.uint8))
    V.save_cifar_p(cifar / "shot_noise.npy", rng.integers(0, 256, (3, 31, 32, 32, 3), dtype=np.uint8))
    ten = toy_classifier("toy-cifar", n_classes=10)
    ten.classes = None
    import shiftbench.evaluation.driver as driver

    monkeypatch.setattr(driver, "load_model", lambda model, weights=None, device=None: ten)
    r3 = evaluate_p("toy", released=cifar, perturbations="translate,shot_noise", store=store, batch_size=20)
    assert r3.edition == "32" and r3.label_space == "identity (10 classes)"
    assert r3.scores[("translate", 1)].top5.shape == (3, 16, 5) and r3.scores[("translate", 1)].frame_accuracy is None
    with pytest.raises(PP.IncompleteDatasetError, match="rotate.npy"):
        evaluate_p("toy", released=cifar, perturbations="translate,rotate", store=store)


def test_top5_blob_round_trip() -> None:
    from shiftbench.evaluation.store import encode_top5

    a = np.arange(31 * 5).reshape(31, 5)
    assert np.array_equal(decode_top5(encode_top5(a), 31), a) and len(encode_top5(a)) == 31 * 5 * 2
    a[3, 2] = 70_000  # beyond uint16: stored as int32
    assert np.array_equal(decode_top5(encode_top5(a), 31), a) and len(encode_top5(a)) == 31 * 5 * 4


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--corruptions", "fog"], "--corruptions"),
        (["--severities", "1,2"], "--severities"),
        (["--release"], "--release"),
        (["--data", "x", "--released", "y"], "--data"),
        (["--perturbations", "rotat"], "Did you mean 'rotate'"),
        (["--difficulties", "4"], "difficulties='4' is not valid"),
        (["--difficulties", "1-x"], "difficulties='1-x'"),
        (["--released", "/nonexistent/ImageNet-P"], "--released '/nonexistent/ImageNet-P' does not exist"),
        (["--data", "/nonexistent/photos"], "--data '/nonexistent/photos' does not exist"),
        (["--edition", "128"], "edition"),
    ],
)
def test_bad_input_is_one_clear_line(
    tmp_path: Path, toy: Any, capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    rc = main(["evaluate", "--benchmark", "imagenet-p", "--store", str(tmp_path / "s.sqlite"), "--no-progress", *extra])
    err = capsys.readouterr().err
    assert rc != 0 and needle in err and "Traceback" not in err, err


def test_missing_released_folders_are_listed(tmp_path: Path, toy: Any, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "P" / "rotate" / "n01440764").mkdir(parents=True)
    rc = main(["evaluate", "--benchmark", "imagenet-p", "--released", str(tmp_path / "P"), "--perturbations",
               "rotate,gaussian_noise", "--difficulties", "1,2", "--store", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert rc == 1 and "gaussian_noise, gaussian_noise_2" in err and "Present folders: rotate" in err


def test_ctrl_c_says_how_to_resume(
    tmp_path: Path, toy: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*a: object, **k: object) -> None:
        raise KeyboardInterrupt

    import shiftbench.benchmarks.imagenet_p as BP

    monkeypatch.setattr(BP, "p_plan", interrupted)
    assert main(["evaluate", "--benchmark", "imagenet-p", "--store", str(tmp_path / "s.sqlite")]) == 130
    assert "run the same command again to resume" in capsys.readouterr().err


@pytest.mark.slow
def test_default_demo_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """`shiftbench evaluate --benchmark imagenet-p`: EfficientNet-Lite0, 20 foolbox photos x 10 sequences (minutes)."""
    if "slow" not in str(request.config.getoption("markexpr", "")):
        pytest.skip("slow (minutes): run with -m slow")
    monkeypatch.chdir(tmp_path)
    t0 = time.perf_counter()
    assert main(["evaluate", "--benchmark", "imagenet-p", "--no-progress", "--batch-size", "32"]) == 0
    out = capsys.readouterr().out
    assert "demonstrate the pipeline" in out and "no benchmark" in out and "FR (%)" in out
    with ResultsStore(tmp_path / "shiftbench-workspace" / "results.sqlite") as db:
        runs = db.p_runs(1)
        assert len(runs) == 10 and all(r.status == "complete" and r.n_scored == 20 for r in runs)
    print(f"demo: {time.perf_counter() - t0:.0f} s")
