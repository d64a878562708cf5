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


AUTHORS = Path(__file__).with_name("fixtures") / "authors" / "structural_recipes_lines.txt"


def _authors_blocks() -> dict[str, str]:
    """``{"<path> lines A-B": text}`` of the copy of the authors' script lines (provenance in its header)."""
    text = AUTHORS.read_text(encoding="utf-8")
    assert "commit e0377d46411fa30c01a9559017bdb6a5f78d4abf" in text
    blocks: dict[str, str] = {}
    for part in text.split("\n== ")[1:]:
        head, _, body = part.partition("\n")
        blocks[head] = body
    return blocks


def _defaults(text: str) -> dict[str, float]:
    import re

    return {m[0]: float(m[1]) for m in re.findall(r"add_argument\('--([a-z_]+)'.*?default=([0-9.e-]+)", text)}


def test_recipes_are_the_authors_scripts() -> None:
    """The default recipes re-read against the authors' scripts (tests/fixtures/authors/structural_recipes_lines.txt)."""
    import re

    b = _authors_blocks()
    icons_args = _defaults(b["old/Icons-50/train.py lines 20-26"])
    icons = get_recipe("icons50-wrn-16-4").recipe
    assert (icons.epochs, icons.lr, icons.batch_size, icons.momentum, icons.weight_decay) == (
        icons_args["epochs"], icons_args["learning_rate"], icons_args["batch_size"], icons_args["momentum"], icons_args["decay"])
    assert icons_args["valid_size"] == 0  # no validation share kept out of training
    tf = b["old/Icons-50/train.py lines 65-71"]
    assert "Normalize" not in tf and "RandomCrop(32, padding=4)" in tf and "RandomHorizontalFlip" in tf
    assert icons.mean == (0.0, 0.0, 0.0) and icons.std == (1.0, 1.0, 1.0) and icons.crop_padding == 4 and icons.hflip
    assert "1e-6 / args.learning_rate" in b["old/Icons-50/train.py lines 215-226"] and icons.lr_min == 1e-6

    c_args = _defaults(b["old/auxiliary/CIFAR100/train.py lines 21-26"])
    cifar = get_recipe("cifar100-wrn-40-2").recipe
    assert (cifar.epochs, cifar.lr, cifar.batch_size, cifar.momentum, cifar.weight_decay) == (
        c_args["epochs"], c_args["learning_rate"], c_args["batch_size"], c_args["momentum"], c_args["decay"])
    stats = b["old/auxiliary/CIFAR100/train.py lines 49-55"]
    mean, std = (tuple(float(v) / 255 for v in re.search(rf"{k} = \[x / 255 for x in \[([^\]]+)\]\]", stats)[1].split(","))  # type: ignore[index]
                 for k in ("mean", "std"))
    assert cifar.mean == pytest.approx(mean) and cifar.std == pytest.approx(std)
    assert "nesterov=True" in b["old/auxiliary/CIFAR100/train.py lines 157-159"] and cifar.nesterov
    mixing = b["old/auxiliary/CIFAR100/train.py lines 167-179"]
    assert "np.random.beta(1,1, size=data.size(0))" in mixing and "t * data + (1 - t) * data[perm]" in mixing
    assert cifar.mix == "beta"
    assert "lr_min = 0" in b["old/auxiliary/CIFAR100/train.py lines 186-192"] and cifar.lr_min == 0.0

    i_args = _defaults(b["old/auxiliary/ImageNet22K/train.py lines 25-31"])
    spec = get_recipe("imagenet22k-head")
    r = spec.recipe
    assert (r.epochs, r.lr, r.batch_size, r.momentum, r.weight_decay) == (
        i_args["epochs"], i_args["learning_rate"], i_args["batch_size"], i_args["momentum"], i_args["decay"])
    tf = b["old/auxiliary/ImageNet22K/train.py lines 738-744"]
    assert "trn.Resize(256), trn.RandomCrop(224), trn.RandomHorizontalFlip()" in tf and "trn.CenterCrop(224)" in tf
    assert (spec.image_size, r.crop_size, r.crop_padding, r.hflip, spec.finetune) == (256, 224, 0, True, "head")
    assert "0.485, 0.456, 0.406" in tf and r.mean == (0.485, 0.456, 0.406) and r.std == (0.229, 0.224, 0.225)
    assert "nesterov=True" in b["old/auxiliary/ImageNet22K/train.py lines 938-940"] and r.nesterov
    assert "lr_min = 0" in b["old/auxiliary/ImageNet22K/train.py lines 986-992"] and r.lr_min == 0.0 and r.schedule == "cosine"
    # the variants keep what the paper text states, with shiftbench's former inputs
    assert get_recipe("cifar100-wrn-40-2-paper").recipe.mix == "" and get_recipe("icons50-wrn-16-4-paper").recipe.mean == (0.5,) * 3
    assert get_recipe("finetune-head").recipe.epochs == 10 and "earlier default" in get_recipe("finetune-head").source


def test_icons50_splits_train_on_all_the_seen_data_as_the_authors_script() -> None:
    """The authors' ICONS-50 script keeps no validation share (``--valid_size`` 0, re-read from the copy of its
    lines) and trains on every image whose path lacks the held-out style: the default split is exactly that; the
    seen-test share is a named variant (``SEEN_TEST_SHARE``, ``--seen-test-share``)."""
    from shiftbench.benchmarks import get_benchmark
    from shiftbench.structural import SEEN_TEST_SHARE, subtype_holdout

    b = _authors_blocks()
    assert _defaults(b["old/Icons-50/train.py lines 20-26"])["valid_size"] == 0
    rule = b["old/Icons-50/train.py lines 133-155"]
    # the training set is every sample whose path lacks the style, and goes straight to the loader
    assert "if args.test_style not in img_name:" in rule and "if args.test_style in img_name:" in rule
    assert rule.index("train_data.samples = filtered_imgs[:]") < rule.index("train_loader = torch.utils.data.DataLoader(\n    train_data,")
    assert "valid" not in rule
    data = toy_styles()
    files = np.array([f"Icons-50/{data.classes[y]}/{st}_{sub}_{i}.png"
                      for i, (y, st, sub) in enumerate(zip(data.labels, data.styles, data.subtypes))])
    data = LabelledImages(data.name, data.images, data.labels, data.classes, data.subtypes, data.styles, {"file": files})
    want_train = [i for i, f in enumerate(files) if "blue" not in f]  # the authors' rule, replayed on the paths
    want_test = [i for i, f in enumerate(files) if "blue" in f]
    split = style_holdout(data, "blue", match="paper")
    assert split.train_idx.tolist() == want_train and split.heldout_idx.tolist() == want_test
    assert len(split.seen_test_idx) == 0 and split.info["seen_test_fraction"] == 0.0
    assert len(subtype_holdout(data, ["0-red"]).seen_test_idx) == 0
    variant = style_holdout(data, "blue", match="paper", seen_test_fraction=SEEN_TEST_SHARE)
    assert SEEN_TEST_SHARE == 0.1 and len(variant.seen_test_idx) == 6  # 10 % of each of the two 32-image classes
    assert sorted([*variant.train_idx.tolist(), *variant.seen_test_idx.tolist()]) == want_train
    # the benchmarks: the same default, the share as an option
    for name in ("icons-50-style", "icons-50-subtype"):
        bench = get_benchmark(name)
        assert bench.Settings().seen_test_share == 0.0 and "seen_test_share" in bench.options
        hold = "blue" if name == "icons-50-style" else "0-red"
        assert len(bench.splits(data, bench.settings(holdout=hold))[0].seen_test_idx) == 0
        assert len(bench.splits(data, bench.settings(holdout=hold, seen_test_share=0.1))[0].seen_test_idx) > 0
        with pytest.raises(InvalidArgumentError, match="seen_test_share"):
            bench.splits(data, bench.settings(holdout=hold, seen_test_share=1.0))
    # scored without a seen share: held-out accuracy only
    h = ItemPredictions("held_out", split.heldout_idx, data.labels[split.heldout_idx], data.labels[split.heldout_idx],
                        data.styles[split.heldout_idx])
    none = np.zeros(0, np.int64)
    sc = score(split, h, ItemPredictions("seen_test", none, none, none, np.zeros(0, str)))
    assert sc.heldout_accuracy == 1.0 and sc.seen_accuracy is None and sc.gap is None and sc.n_seen == 0


def test_beta_mixing_loss_is_the_authors(tmp_path: Path) -> None:
    """One batch, one step: the stored loss is mean(t CE(y)) + mean((1 - t) CE(y[perm])) of the mixed inputs."""
    import torch.nn.functional as F

    from shiftbench.training.loop import fit, normaliser, stream_id, tensor_batches

    torch.manual_seed(0)
    x = torch.randint(0, 256, (8, 3, 4, 4), dtype=torch.uint8)
    y = torch.arange(8) % 3
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 3))
    start = {k: v.clone() for k, v in net.state_dict().items()}
    r = Recipe(epochs=1, batch_size=8, lr=0.01, hflip=False, crop_padding=0, mix="beta", mean=(0.4,) * 3, std=(0.3,) * 3)
    res = fit(net, n_train=8, batches=tensor_batches(x, y, 8), recipe=r, seed=5, stream=stream_id("m"),
              checkpoint=tmp_path / "mix.pt")
    order = np.random.default_rng([5, 0, stream_id("m")]).permutation(8)
    mixer = np.random.default_rng([5, 0, stream_id("m"), 3])
    t = torch.from_numpy(mixer.beta(1.0, 1.0, size=8).astype(np.float32))
    perm = torch.from_numpy(mixer.permutation(8))
    xn = normaliser(r.mean, r.std)(x[torch.from_numpy(order)])
    yb = y[torch.from_numpy(order)]
    ref = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 3))
    ref.load_state_dict(start)
    logits = ref(t.view(-1, 1, 1, 1) * xn + (1 - t.view(-1, 1, 1, 1)) * xn[perm])
    want = (t * F.cross_entropy(logits, yb, reduction="none")).mean() + ((1 - t) * F.cross_entropy(logits, yb[perm], reduction="none")).mean()
    assert res.history[0]["loss"] == pytest.approx(float(want.detach()), rel=1e-5)


def test_stability_training_loss_and_clahe_inputs(tmp_path: Path) -> None:
    """One batch, one step: the stored loss is CE + weight * CE(softmax(clean) -> softmax(clean + U(-n, n))); with
    ``preprocess="clahe"`` the network sees the CLAHE-processed batch."""
    import torch.nn.functional as F

    from shiftbench.evaluation.testtime import clahe
    from shiftbench.training.loop import fit, normaliser, stability_loss, stream_id, tensor_batches

    torch.manual_seed(0)
    x = torch.randint(0, 256, (6, 3, 16, 16), dtype=torch.uint8)
    y = torch.arange(6) % 3
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(768, 3))
    start = {k: v.clone() for k, v in net.state_dict().items()}
    r = Recipe(epochs=1, batch_size=6, lr=0.01, hflip=False, crop_padding=0, stability=(0.1, 0.5), mean=(0.5,) * 3, std=(0.25,) * 3)
    res = fit(net, n_train=6, batches=tensor_batches(x, y, 6), recipe=r, seed=2, stream=stream_id("s"), checkpoint=tmp_path / "s.pt")
    order = torch.from_numpy(np.random.default_rng([2, 0, stream_id("s")]).permutation(6))
    u = torch.from_numpy(np.random.default_rng([2, 0, stream_id("s"), 4]).uniform(-0.1, 0.1, size=(6, 3, 16, 16)).astype(np.float32))
    ref = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(768, 3))
    ref.load_state_dict(start)
    norm = normaliser(r.mean, r.std)
    xb = x[order]
    clean = ref(norm(xb))
    noisy = ref(norm((xb.float() / 255 + u).clamp(0, 1)))
    want = F.cross_entropy(clean, y[order]) + 0.5 * -(torch.softmax(clean, 1) * torch.log_softmax(noisy, 1)).sum(1).mean()
    assert res.history[0]["loss"] == pytest.approx(float(want.detach()), rel=1e-5)
    with torch.no_grad():
        assert float(stability_loss(clean, clean)) == pytest.approx(float(-(torch.softmax(clean, 1) * torch.log_softmax(clean, 1)).sum(1).mean()))

    seen: list[torch.Tensor] = []

    class Spy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(768, 3)

        def forward(self, t: torch.Tensor) -> torch.Tensor:
            seen.append(t.detach().clone())
            return self.lin(t.flatten(1))

    rc = Recipe(epochs=1, batch_size=6, lr=0.01, hflip=False, crop_padding=0, preprocess="clahe", mean=(0.5,) * 3, std=(0.25,) * 3)
    fit(Spy(), n_train=6, batches=tensor_batches(x, y, 6), recipe=rc, seed=2, stream=stream_id("c"), checkpoint=tmp_path / "c.pt")
    order = torch.from_numpy(np.random.default_rng([2, 0, stream_id("c")]).permutation(6))
    assert torch.allclose(seen[0], norm(clahe(x[order])))
    assert get_recipe("clahe-finetune").recipe.preprocess == "clahe" and get_recipe("clahe-finetune").recipe.epochs == 5
    assert get_recipe("stability-finetune").recipe.stability == (0.05, 0.05)
    with pytest.raises(InvalidArgumentError, match="stability"):
        Recipe(stability=(0.1, -1.0)).check()


def test_random_and_centre_crops() -> None:
    from shiftbench.training.loop import crop_at
    from shiftbench.training.recipes import CentreCrop

    x = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).view(2, 1, 6, 6)
    c = crop_at(x, np.array([[0.0, 0.0], [0.999, 0.5]]), 4)
    assert torch.equal(c[0], x[0, :, :4, :4]) and torch.equal(c[1], x[1, :, 2:, 1:5])
    with pytest.raises(InvalidArgumentError, match="crop_size"):
        crop_at(x, np.zeros((2, 2)), 7)
    net = CentreCrop(4, torch.nn.Identity())
    assert torch.equal(net(x), x[..., 1:5, 1:5]) and torch.equal(net(c), c)


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
    spec = get_recipe("icons50-wrn-16-4-paper", arch="wrn-10-1", epochs=12, batch_size=16, lr=0.05)  # normalised inputs
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
