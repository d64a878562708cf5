"""icons-50-style on the benchmark protocol, on the real emoji-styles data with a tiny model: end to end through
`shiftbench evaluate` and `shiftbench results`, accuracies checked against plain SQL and an independent prediction
of the trained network, resumption, a given checkpoint, bad inputs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch

from shiftbench.cli import main
from shiftbench.structural import predict, read_emoji_styles, style_holdout
from shiftbench.training.recipes import get_recipe, load_trained, train_classifier

from ._eval_toys import SHARED

EMOJI = SHARED / "data" / "emoji-styles"
TINY = "icons50-wrn-16-4:arch=small_cnn,epochs=1"
pytestmark = pytest.mark.skipif(not (EMOJI / "emoji-styles-32.npz").is_file(), reason="shared emoji-styles data absent")


def _spread(idx: np.ndarray, n: int) -> np.ndarray:
    return idx if len(idx) <= n else idx[np.linspace(0, len(idx) - 1, n).round().astype(np.int64)]


def test_icons_50_style_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    args = ["evaluate", "--benchmark", "icons-50-style", "--data", str(EMOJI), "--store", str(store), "--no-progress",
            "--recipe", TINY, "--limit", "120", "--results-format", "json", "--seen-test-share", "0.1"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    (rec,) = doc["splits"]
    assert rec["split"] == "style:fluent-emoji-high-contrast" and rec["n_heldout"] == 120 and rec["n_seen"] == 120
    assert rec["gap"] == pytest.approx(rec["seen_accuracy"] - rec["heldout_accuracy"])
    # the same accuracies from the store by plain SQL
    db = sqlite3.connect(store)
    for part, key in (("held_out", "heldout_accuracy"), ("seen_test", "seen_accuracy")):
        n, right = db.execute("SELECT COUNT(*), SUM(p.top1 = p.label) FROM records p JOIN runs r ON r.id=p.run_id "
                              "WHERE r.condition LIKE ? AND p.skipped IS NULL", (part + ":%",)).fetchone()
        assert n == 120 and right / n == pytest.approx(rec[key])
        assert db.execute("SELECT COUNT(*) FROM records WHERE top5 IS NULL").fetchone()[0] == 0
    db.close()
    # an independent prediction with the trained network (structural.predict) on the held-out items
    model = load_trained(rec["checkpoint"])
    data = read_emoji_styles(EMOJI)
    split = style_holdout(data, seen_test_fraction=0.1)
    held = data.subset(_spread(split.heldout_idx, 120))
    r = model.spec.recipe
    acc = float((predict(model.net, held, mean=r.mean, std=r.std, image_size=32) == held.labels).mean())
    assert acc == pytest.approx(rec["heldout_accuracy"])
    # the checkpoint is the recipe trained on the split's training part (seeded): the same weights from the harness
    own = train_classifier(split.train_source.subset(_spread(split.train_idx, 120)), get_recipe(TINY.split(":")[0],
                           arch="small_cnn", epochs=1), tmp_path / "own", run_name=Path(rec["checkpoint"]).stem)
    sd = model.net.state_dict()
    assert all(np.array_equal(v.numpy(), sd[k].numpy()) for k, v in own.net.state_dict().items())
    # run again: resumed from the store and the finished checkpoint, same numbers
    mtime = Path(rec["checkpoint"]).stat().st_mtime_ns
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)["splits"][0]
    assert again["evaluation"] == rec["evaluation"] and again["heldout_accuracy"] == rec["heldout_accuracy"]
    assert Path(rec["checkpoint"]).stat().st_mtime_ns == mtime
    # a checkpoint given with --model
    assert main([*args[:-2], "--model", str(own.checkpoint), "--results-format", "json"]) == 0
    given = json.loads(capsys.readouterr().out)["splits"][0]
    assert given["heldout_accuracy"] == pytest.approx(rec["heldout_accuracy"]) and given["evaluation"] != rec["evaluation"]
    # results: every format
    assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
    stored = json.loads(capsys.readouterr().out)["icons_50_style"]
    assert [s["heldout_accuracy"] for s in stored] == pytest.approx([rec["heldout_accuracy"]] * 2)
    assert main(["results", "--store", str(store)]) == 0
    assert "ICONS-50 style hold-out" in capsys.readouterr().out
    assert main(["results", "--store", str(store), "--results-format", "csv"]) == 0
    assert capsys.readouterr().out.count("icons-50-style") == 2


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--holdout", "comic-sans"], ["style", "comic-sans"]),
        (["--recipe", "icons50-wrn-99"], ["recipe", "icons50-wrn-16-4"]),
        (["--recipe", "icons50-wrn-16-4:epochs"], ["recipe", "key=value"]),
        (["--model", "no-such.pt"], ["model", "train_classifier"]),
        (["--severities", "2"], ["--severities does not apply to icons-50-style"]),
    ],
)
def test_bad_inputs_one_line_exit_2(extra: list[str], words: list[str], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["evaluate", "--benchmark", "icons-50-style", "--data", str(EMOJI), "--store", str(tmp_path / "s.sqlite"),
               "--no-progress", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err


def test_missing_data_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--benchmark", "icons-50-style", "--store", str(tmp_path / "s.sqlite"), "--no-progress"]) == 2
    assert "data" in capsys.readouterr().err


def test_cifar_100_subclass_without_data_is_refused_by_both_readers() -> None:
    """The training images and the test images are both read from --data: either read without it is a typed error
    naming data (not a TypeError from the reader)."""
    from shiftbench.benchmarks import get_benchmark
    from shiftbench.errors import InvalidArgumentError

    bench = get_benchmark("cifar-100-subclass")
    settings = bench.Settings()
    for read in (lambda: bench.read(settings), lambda: bench.splits(None, settings)):
        with pytest.raises(InvalidArgumentError, match="cifar-100-python folder") as e:
            read()
        assert e.value.argument == "data"


def test_leave_one_style_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--benchmark", "icons-50-style", "--data", str(EMOJI), "--store", str(tmp_path / "s.sqlite"),
                 "--no-progress", "--recipe", TINY, "--limit", "30", "--holdout", "all", "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    styles = sorted(set(read_emoji_styles(EMOJI).styles.tolist()))
    assert [r["held_out"] for r in doc["splits"]] == [[s] for s in styles]
    # the authors' protocol (the default): all the seen data trains, so no seen accuracy and no gap
    assert all(r["n_seen"] == 0 and r["seen_accuracy"] is None for r in doc["splits"])
    assert doc["mean"]["gap"] is None and doc["mean"]["seen_accuracy"] is None
    assert doc["mean"]["heldout_accuracy"] == pytest.approx(np.mean([r["heldout_accuracy"] for r in doc["splits"]]))
    assert len({r["checkpoint"] for r in doc["splits"]}) == len(styles)  # one model per split


def test_icons_50_subtype_random_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from shiftbench.structural import subtype_holdout

    data = read_emoji_styles(EMOJI)
    base = ["evaluate", "--benchmark", "icons-50-subtype", "--data", str(EMOJI), "--store", str(tmp_path / "s.sqlite"),
            "--no-progress", "--recipe", TINY, "--limit", "40", "--results-format", "json"]
    assert main([*base, "--holdout", "random", "--seed", "3"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)["splits"]
    assert rec["held_out"] == list(subtype_holdout(data, "random", seed=3).held_out) and rec["n_heldout"] == 40
    named = ",".join(sorted(set(data.subtypes.tolist()))[:2])
    assert main([*base, "--holdout", named]) == 0
    (rec2,) = json.loads(capsys.readouterr().out)["splits"]
    assert rec2["held_out"] == named.split(",") and rec2["checkpoint"] != rec["checkpoint"]
    assert main([*base, "--holdout", "no-such-subtype"]) == 2
    assert "subtypes" in capsys.readouterr().err


def test_cifar_100_subclass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from shiftbench.structural import cifar100_subclass_split, read_cifar100

    from .test_structural_data import write_cifar100

    imgs = read_emoji_styles(EMOJI).images  # real 32 x 32 images standing in for CIFAR-100's, fine labels cycled
    write_cifar100(tmp_path, imgs[:400], [i % 100 for i in range(400)], "train")
    write_cifar100(tmp_path, imgs[400:700], [i % 100 for i in range(300)], "test")
    data = str(tmp_path / "cifar-100-python")
    args = ["evaluate", "--benchmark", "cifar-100-subclass", "--data", data, "--store", str(tmp_path / "s.sqlite"),
            "--no-progress", "--recipe", "cifar100-wrn-40-2:arch=small_cnn,epochs=1", "--results-format", "json"]
    assert main([*args, "--holdout", "2"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)["splits"]
    split = cifar100_subclass_split(read_cifar100(data, "train"), read_cifar100(data, "test"), 2)
    assert rec["n_heldout"] == len(split.heldout_idx) == 120 and rec["n_seen"] == len(split.seen_test_idx) == 180
    assert rec["held_out"] == list(split.held_out)
    for k in ("0", "4", "x"):
        assert main([*args, "--holdout", k]) == 2
        err = capsys.readouterr().err
        assert "holdout" in err and "1, 2 or 3" in err and err.count("\n") == 1


class _StopAfter:
    """A progress display that interrupts the evaluation (as Ctrl-C would) after ``n`` stored batches."""

    def __init__(self, n: int) -> None:
        self.n = n

    def start(self, total: int, description: str) -> None:
        pass

    def advance(self, n: int, description: str) -> None:
        self.n -= 1
        if self.n <= 0:
            raise KeyboardInterrupt

    def stop(self) -> None:
        pass


def test_interrupted_evaluation_resumes_without_lost_or_duplicated_items(tmp_path: Path) -> None:
    from shiftbench.benchmarks import get_benchmark

    bench = get_benchmark("icons-50-style")
    settings = {"data": str(EMOJI), "recipe": TINY, "limit": 40, "batch_size": 16, "store": str(tmp_path / "a.sqlite"),
                "seen_test_share": 0.1}
    with pytest.raises(KeyboardInterrupt):
        bench.evaluate(settings, _StopAfter(2))
    db = sqlite3.connect(tmp_path / "a.sqlite")
    assert db.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 32  # two batches of the first part
    assert db.execute("SELECT COUNT(*) FROM runs WHERE status='complete'").fetchone()[0] == 0
    db.close()
    resumed = json.loads(bench.evaluate(settings, None).json())["splits"][0]
    whole = json.loads(bench.evaluate({**settings, "store": str(tmp_path / "b.sqlite")}, None).json())["splits"][0]
    for k in ("heldout_accuracy", "seen_accuracy", "n_heldout", "n_seen"):
        assert resumed[k] == whole[k]
    db = sqlite3.connect(tmp_path / "a.sqlite")
    assert db.execute("SELECT COUNT(*), COUNT(DISTINCT run_id || '/' || item) FROM records").fetchone() == (80, 80)
    db.close()


@pytest.mark.slow  # fine-tunes EfficientNet-Lite0's head at 224 px: over 30 s on a shared 2-core machine
def test_imagenet_22k_subclass_on_a_small_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from shiftbench.structural import imagenet22k_superclasses, imagenet22k_wnids

    from ._eval_toys import SAMPLE_DIR

    seen, unseen = imagenet22k_wnids("seen"), imagenet22k_wnids("unseen")
    tree = tmp_path / "tree"
    photos = sorted(SAMPLE_DIR.glob("*.JPEG"))
    mine = [p for p in photos if p.name.split("_")[0] in seen]
    for p in mine:  # the shared ImageNet-1K photos of the Appendix G superclasses: seen subclasses
        (tree / p.name.split("_")[0]).mkdir(parents=True, exist_ok=True)
        shutil.copy(p, tree / p.name.split("_")[0] / p.name)
    supers = sorted({seen[p.name.split("_")[0]] for p in mine})[:2]
    for s in supers:  # an unseen subclass of two of those superclasses, holding photos of the superclass
        w = next(w for w in sorted(unseen) if unseen[w] == s)
        (tree / w).mkdir()
        for p in [p for p in mine if seen[p.name.split("_")[0]] == s][:2]:
            shutil.copy(p, tree / w / p.name)
    rc = main(["evaluate", "--benchmark", "imagenet-22k-subclass", "--data", str(tree), "--store", str(tmp_path / "s.sqlite"),
               "--no-progress", "--recipe", "finetune-head:epochs=1,batch_size=16", "--results-format", "json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    (rec,) = json.loads(out.out)["splits"]
    assert rec["split"] == "imagenet22k:unseen" and len(rec["held_out"]) == 2
    assert rec["n_heldout"] == sum(len(list((tree / w).iterdir())) for w in rec["held_out"])
    assert 0 <= rec["heldout_accuracy"] <= 1
    # the authors measure seen accuracy on ImageNet-1K validation images of the seen classes: without --seen-data
    # there is none, and no gap
    assert rec["seen_accuracy"] is None and rec["gap"] is None
    assert len(imagenet22k_superclasses()) == 25
    # a tree without unseen subclasses is refused in one line
    for w in rec["held_out"]:
        shutil.rmtree(tree / w)
    assert main(["evaluate", "--benchmark", "imagenet-22k-subclass", "--data", str(tree), "--store", str(tmp_path / "s.sqlite"),
                 "--no-progress"]) == 2
    assert "0 unseen" in capsys.readouterr().err


def test_imagenet_22k_subclass_as_the_authors_ran_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Default protocol: the authors' lists, a new head over the frozen network for 1 epoch on every seen image of
    --data (Resize(256) + random 224 crops), the seen accuracy on --seen-data; --holdout wordnet the variant."""
    import shutil

    from shiftbench.evaluation import driver as mod  # the driver loads every model
    from shiftbench.evaluation.models import Classifier, InputTransform, imagenet_wnids
    from shiftbench.structural import imagenet22k_wnids

    from ._eval_toys import SAMPLE_DIR

    def tiny(*args: object, **kw: object) -> Classifier:
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000))
        return Classifier(net, name="tiny", transform=InputTransform(None, (0.0,) * 3, (1.0,) * 3, 255.0),
                          classes=imagenet_wnids(), checksum="tiny")

    monkeypatch.setattr(mod, "load_model", tiny)
    seen, unseen = imagenet22k_wnids("seen"), imagenet22k_wnids("unseen")
    tree, val = tmp_path / "tree", tmp_path / "val"
    mine = [p for p in sorted(SAMPLE_DIR.glob("*.JPEG")) if p.name.split("_")[0] in seen]
    for p in mine:
        for root in (tree, val):
            (root / p.name.split("_")[0]).mkdir(parents=True, exist_ok=True)
            shutil.copy(p, root / p.name.split("_")[0] / p.name)
    supers = sorted({seen[p.name.split("_")[0]] for p in mine})[:2]
    for s in supers:  # the superclass synset itself: an unseen class of the authors' lists, not of WordNet's
        w = next(w for w in unseen if unseen[w] == s)
        (tree / w).mkdir()
        for p in [p for p in mine if seen[p.name.split("_")[0]] == s][:2]:
            shutil.copy(p, tree / w / p.name)
    store = tmp_path / "s.sqlite"
    rc = main(["evaluate", "--benchmark", "imagenet-22k-subclass", "--data", str(tree), "--seen-data", str(val),
               "--store", str(store), "--no-progress", "--results-format", "json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    (rec,) = json.loads(out.out)["splits"]
    assert rec["split"] == "imagenet22k:unseen" and rec["n_seen"] == len(mine)  # the --seen-data images
    assert rec["n_heldout"] == sum(len(list((tree / w).iterdir())) for w in rec["held_out"])
    ckpt = Path(rec["checkpoint"])
    assert ckpt.name == f"imagenet22k-head-n{len(mine)}.pt"  # the recipe, trained on every seen image of --data
    ck = torch.load(ckpt, weights_only=True)
    assert ck["spec"]["recipe"]["crop_size"] == 224 and ck["spec"]["image_size"] == 256 and ck["epoch"] == 1
    # the WordNet lists do not hold the superclass synsets: no unseen folder is left, refused in one line
    rc = main(["evaluate", "--benchmark", "imagenet-22k-subclass", "--data", str(tree), "--holdout", "wordnet",
               "--store", str(store), "--no-progress"])
    assert rc == 2 and "0 unseen" in capsys.readouterr().err
    rc = main(["evaluate", "--benchmark", "imagenet-22k-subclass", "--data", str(tree), "--holdout", "wn",
               "--store", str(store), "--no-progress"])
    assert rc == 2 and "wordnet" in capsys.readouterr().err
