"""The shared harness with the structural recipes: kill -9 resume, schedules, evaluation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from shiftbench.errors import DataError, InvalidArgumentError, UnknownNameError
from shiftbench.structural import LabelledImages, evaluate_split, plot_seen_unseen, score, style_holdout
from shiftbench.structural.evaluate import ItemPredictions
from shiftbench.training import Recipe, WideResNet, load_checkpoint, lr_at, random_crop
from shiftbench.training.recipes import RECIPES, get_recipe, load_trained, train_classifier

CHILD = Path(__file__).with_name("_structural_child.py")
SRC = Path(__file__).resolve().parents[1] / "src"


def run_child(recipe: str, out: Path, pause: bool) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(CHILD), recipe, str(out), *(["--pause"] if pause else [])], env=env)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_recipe_resumes_after_kill_9_with_the_same_result(tmp_path: Path, recipe: str) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    whole.mkdir(), killed.mkdir()
    p = run_child(recipe, killed, pause=True)
    ref = run_child(recipe, whole, pause=False)
    t0 = time.time()
    while not (killed / "paused").exists():
        assert p.poll() is None, "child ended before pausing"
        assert time.time() - t0 < 240, "child did not reach epoch 2"
        time.sleep(0.1)
    os.kill(p.pid, signal.SIGKILL)  # a real kill -9 in the middle of epoch 2
    p.wait()
    assert not (killed / "done").exists()
    assert load_checkpoint(killed / "run.pt")["epoch"] == 1
    assert not [f for f in killed.iterdir() if f.name.endswith(".tmp")]  # nothing half-written
    assert ref.wait(timeout=300) == 0
    again = run_child(recipe, killed, pause=False)
    assert again.wait(timeout=300) == 0
    a, b = load_checkpoint(killed / "run.pt"), load_checkpoint(whole / "run.pt")
    assert a["epoch"] == b["epoch"] == 2
    for k, v in b["model"].items():
        assert torch.equal(a["model"][k], v), k
    assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]


def test_recipes_are_the_papers() -> None:
    icons, cifar = get_recipe("icons50-wrn-16-4"), get_recipe("cifar100-wrn-40-2")
    assert (icons.arch, icons.dropout, icons.recipe.epochs, icons.image_size) == ("wrn-16-4", 0.3, 50, 32)
    assert (cifar.arch, cifar.dropout, cifar.recipe.epochs, cifar.recipe.batch_size, cifar.recipe.lr) == ("wrn-40-2", 0.3, 100, 128, 0.1)
    for s in (icons, cifar):
        assert s.recipe.nesterov and s.recipe.schedule == "cosine" and s.recipe.hflip and s.recipe.crop_padding == 4
    # WRN-16-4 and WRN-40-2 have the published parameter counts (2.7 M and 2.2 M for 100 classes)
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert abs(n(WideResNet(16, 4, 100)) / 1e6 - 2.75) < 0.05 and abs(n(WideResNet(40, 2, 100)) / 1e6 - 2.24) < 0.05
    with pytest.raises(UnknownNameError):
        get_recipe("wrn-16-4")
    with pytest.raises(InvalidArgumentError, match="epochz"):
        get_recipe("icons50-wrn-16-4", epochz=3)
    with pytest.raises(InvalidArgumentError, match="recipe.epochs"):
        get_recipe("icons50-wrn-16-4", epochs=0)


def test_cosine_and_step_schedules() -> None:
    r = Recipe(epochs=10, lr=0.1, schedule="cosine", lr_min=0.0)
    assert lr_at(r, 0, 0, 5) == pytest.approx(0.1)
    assert lr_at(r, 5, 0, 5) == pytest.approx(0.05)
    assert lr_at(r, 9, 4, 5) == pytest.approx(0.1 * 0.5 * (1 + np.cos(np.pi * 49 / 50)))
    s = Recipe(epochs=40, lr=0.1, schedule="step", milestones=[20, 30], gamma=0.1)
    assert [lr_at(s, e) for e in (0, 19, 20, 30)] == pytest.approx([0.1, 0.1, 0.01, 0.001])


def test_random_crop_is_a_shifted_window() -> None:
    x = torch.arange(2 * 1 * 4 * 4, dtype=torch.float32).view(2, 1, 4, 4)
    c = random_crop(x, np.array([[2, 2], [0, 4]]), 2)
    assert torch.equal(c[0], x[0])  # offset (p, p): the original
    assert torch.equal(c[1, 0, 2:, :2], x[1, 0, :2, 2:]) and (c[1, 0, :2] == 0).all() and (c[1, 0, :, 2:] == 0).all()


def toy_styles() -> LabelledImages:
    """Two classes (a bright bar at the top or at the bottom: flips keep them apart), three styles (colours)."""
    rng = np.random.default_rng(1)
    n = 96
    y = np.arange(n) % 2
    st = np.array(["red", "green", "blue"])[(np.arange(n) // 2) % 3]
    x = rng.integers(0, 40, (n, 32, 32, 3), dtype=np.uint8)
    for i in range(n):
        ch = {"red": 0, "green": 1, "blue": 2}[st[i]]
        x[i, (2 if y[i] == 0 else 18) : (14 if y[i] == 0 else 30), 4:28, ch] = 255
    return LabelledImages("toy", x, y.astype(np.int64), ("top", "bottom"), np.array([f"{c}-{s}" for c, s in zip(y, st)]), st)


def test_train_evaluate_and_reload(tmp_path: Path) -> None:
    data = toy_styles()
    split = style_holdout(data, "blue", seen_test_fraction=0.25)
    spec = get_recipe("icons50-wrn-16-4", arch="wrn-10-1", epochs=12, batch_size=16, lr=0.05)
    torch.set_num_threads(1)
    model = train_classifier(split.train_data(), spec, tmp_path)
    sc, parts = evaluate_split(model, split)
    assert sc.n_heldout == 32 and sc.n_seen == len(split.seen_test_idx)
    assert sc.seen_accuracy > 0.9  # the task is easy in distribution
    assert sc.gap == pytest.approx(sc.seen_accuracy - sc.heldout_accuracy)
    assert set(sc.per_group) == {"blue"} and sc.per_group["blue"] == pytest.approx(sc.heldout_accuracy)
    assert len(parts["held_out"].rows()) == 32
    again = load_trained(model.checkpoint)
    sc2, _ = evaluate_split(again, split)
    assert sc2.to_dict() == sc.to_dict()
    # calling again with the finished checkpoint returns at once with the same weights
    same = train_classifier(split.train_data(), spec, tmp_path)
    assert same.result.resumed_from == 12
    # other data into the same folder is refused instead of silently resumed
    with pytest.raises(DataError, match="another run"):
        train_classifier(split.heldout_data(), spec, tmp_path)


def test_score_by_hand() -> None:
    data = toy_styles()
    split = style_holdout(data, "red", seen_test_fraction=0.25)
    h = ItemPredictions("held_out", split.heldout_idx, data.labels[split.heldout_idx], data.labels[split.heldout_idx].copy(), data.styles[split.heldout_idx])
    h.predicted[: len(h.predicted) // 4] ^= 1
    s = ItemPredictions("seen_test", split.seen_test_idx, data.labels[split.seen_test_idx], data.labels[split.seen_test_idx], data.styles[split.seen_test_idx])
    sc = score(split, h, s)
    assert sc.heldout_accuracy == pytest.approx(0.75) and sc.seen_accuracy == 1.0 and sc.gap == pytest.approx(0.25)
    with pytest.raises(InvalidArgumentError, match="predictions"):
        score(split, s, h)


def test_seen_unseen_figure(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = [
        {"model": "resnet18", "imagenet_accuracy": 0.70, "seen": 0.93, "unseen": 0.75},
        {"model": "resnet50", "imagenet_accuracy": 0.76, "seen": 0.95, "unseen": 0.80},
    ]
    p = plot_seen_unseen(rows, tmp_path / "fig.png")
    assert p.stat().st_size > 5000
    with pytest.raises(InvalidArgumentError):
        plot_seen_unseen([{"model": "x"}], tmp_path / "bad.png")
