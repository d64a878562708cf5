"""The evaluation pipeline end to end: data readers, bad input, label spaces, the CLI, a real model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch

from shiftbench.cli import main
from shiftbench.errors import DataError, InvalidArgumentError
from shiftbench.evaluation import Classifier, imagenet_wnids
from shiftbench.evaluation.data import (
    CLEAN,
    ImageFolderSource,
    ReleasedArraySource,
    foolbox_imagenet,
    open_released,
)
from shiftbench.evaluation.errors import (
    ImageReadError,
    IncompleteDatasetError,
    ModelOutputError,
)
from shiftbench.evaluation.metrics import BENCHMARK_CORRUPTIONS
from shiftbench.evaluation.store import ResultsStore

from ._eval_toys import (
    RAW,
    ColourNet,
    image_folder,
    released_tree,
    toy_classifier,
    truncated_jpeg,
)
from ._eval_toys import (
    evaluate_c as evaluate,
)

WNIDS = imagenet_wnids()


def _no_run_complete(store: Path) -> bool:
    with ResultsStore(store) as db:
        return not any(r.status == "complete" for e in db.evaluations() for r in db.runs(e.id))


# -- data ------------------------------------------------------------------------------------------------


def test_foolbox_demo_images_are_found_without_importing_foolbox() -> None:
    import sys

    src = foolbox_imagenet()
    items = src.items(CLEAN)
    assert len(items) == 20 and len(src.classes) == 1000
    assert [it.label for it in items][:4] == [243, 559, 438, 990]
    assert "foolbox" not in sys.modules


def test_missing_foolbox_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from shiftbench.errors import MissingDependencyError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "foolbox" else real(name, *a))
    with pytest.raises(MissingDependencyError, match=r"pip install --no-deps foolbox==3\.3\.4"):
        foolbox_imagenet()


def test_missing_and_empty_data_folders(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"--data .*does not exist"):
        evaluate(toy_classifier(), data=tmp_path / "nope", store=tmp_path / "s.sqlite")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"--data .*contains no images"):
        evaluate(toy_classifier(), data=tmp_path / "empty", store=tmp_path / "s.sqlite")
    (tmp_path / "flat").mkdir()
    truncated_jpeg(tmp_path / "flat" / "photo.jpg")
    with pytest.raises(DataError, match="no class sub-folders"):
        ImageFolderSource(tmp_path / "flat")


def test_unreadable_images_are_skipped_and_counted(tmp_path: Path) -> None:
    data = image_folder(tmp_path / "data")
    wnid = sorted(p.name for p in data.iterdir())[0]
    truncated_jpeg(data / wnid / "truncated.JPEG")
    (data / wnid / "not_an_image.jpg").write_bytes(b"hello")
    r = evaluate(toy_classifier(), data=data, corruptions="contrast", severities="1", store=tmp_path / "s.sqlite")
    assert all(run.n_skipped == 2 and run.n_predicted == 4 and run.status == "complete" for run in r.runs)
    assert any("could not be read" in n for n in r.notes)


def test_unreadable_images_fail_with_the_flag_and_no_run_is_complete(tmp_path: Path) -> None:
    data = image_folder(tmp_path / "data")
    wnid = sorted(p.name for p in data.iterdir())[-1]
    truncated_jpeg(data / wnid / "zz_truncated.JPEG")
    store = tmp_path / "s.sqlite"
    with pytest.raises(ImageReadError, match="zz_truncated.JPEG"):
        evaluate(
            toy_classifier(),
            data=data,
            corruptions="contrast",
            severities="1",
            store=store,
            bad_images="fail",
            batch_size=16,
        )
    assert _no_run_complete(store)


def test_released_tree_is_read_as_published(tmp_path: Path) -> None:
    classes = list(WNIDS[:3])
    root = released_tree(tmp_path / "Tiny-C", ["fog", "contrast"], [1, 2, 3, 4, 5], classes, n=2, size=64)
    r = evaluate(toy_classifier(), released=root, store=tmp_path / "s.sqlite", corruptions="fog,contrast")
    assert r.settings["edition"] == "64"
    assert r.settings["label_space"] == "data (3 classes)"  # Tiny-ImageNet style: logits restricted to its classes
    assert len(r.runs) == 10 and all(run.n_predicted == 6 and run.status == "complete" for run in r.runs)
    assert r.summary.clean_error is None and r.summary.baseline is None  # no published AlexNet numbers at 64 px
    assert any("no published AlexNet errors exist for edition 64" in n for n in r.notes)


def test_released_sources_keep_only_the_listed_classes(tmp_path: Path) -> None:
    classes = list(WNIDS[:3])
    root = released_tree(tmp_path / "Tiny-C", ["fog"], [1, 2, 3, 4, 5], classes, n=2, size=64)
    src = open_released(root, ["fog"], [1])
    whole = src.identity
    src.select_classes(classes[1:])
    assert src.identity != whole and {it.key.split("/")[0] for it in src.items(("fog", 1))} == set(classes[1:])
    np.save(tmp_path / "labels.npy", np.tile(np.arange(4, dtype=np.uint8), 5))
    np.save(tmp_path / "fog.npy", np.zeros((20, 32, 32, 3), dtype=np.uint8))
    arr = open_released(tmp_path, ["fog"], [1])
    before = arr.identity
    arr.select_classes(arr.classes[:2])
    assert arr.identity != before and {it.label for it in arr.items(("fog", 1))} == {0, 1}


def test_incomplete_released_tree_is_reported(tmp_path: Path) -> None:
    classes = list(WNIDS[:2])
    root = released_tree(tmp_path / "C", ["fog"], [1, 2, 4, 5], classes, size=64)
    released_tree(root, ["snow"], [1, 2, 3, 4, 5], classes[:1], size=64)
    with pytest.raises(IncompleteDatasetError) as e:
        open_released(root, ["fog", "frost"], [1, 2, 3, 4, 5])
    assert e.value.missing == ["fog/3", "frost (whole corruption)"]
    assert "Present corruption folders: fog, snow" in str(e.value)
    with pytest.raises(IncompleteDatasetError, match=r"snow/1 \(1 classes, not 2"):
        open_released(root, ["fog", "snow"], [1, 2])
    store = tmp_path / "s.sqlite"
    with pytest.raises(IncompleteDatasetError):
        evaluate(toy_classifier(), released=root, store=store)  # all 19 corruptions expected by default
    assert not store.exists() or _no_run_complete(store)


def test_cifar_c_arrays(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 4
    np.save(tmp_path / "labels.npy", np.tile(np.arange(n, dtype=np.uint8) % 10, 5))
    np.save(tmp_path / "fog.npy", rng.integers(0, 256, (5 * n, 32, 32, 3), dtype=np.uint8))
    np.save(tmp_path / "snow.npy", rng.integers(0, 256, (3 * n, 32, 32, 3), dtype=np.uint8))
    src = open_released(tmp_path, ["fog"], [1, 5])
    assert isinstance(src, ReleasedArraySource) and src.edition == "32" and len(src.classes) == 10
    with pytest.raises(IncompleteDatasetError, match=r"snow/5 \(12 rows"):
        open_released(tmp_path, ["snow"], [1, 5])
    with pytest.raises(IncompleteDatasetError, match="frost.npy"):
        open_released(tmp_path, ["fog", "frost"], [1])
    clf = Classifier(ColourNet(10), name="cifar-toy", transform=RAW)
    r = evaluate(clf, released=tmp_path, corruptions="fog", severities="1-5", store=tmp_path / "s.sqlite")
    assert r.settings["label_space"] == "identity (10 classes)"
    assert [run.n_predicted for run in r.runs] == [n] * 5


# -- model output ------------------------------------------------------------------------------------------


def test_output_width_must_match_the_class_set(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    wrong = Classifier(ColourNet(10), name="ten-way", transform=RAW, classes=WNIDS)
    with pytest.raises(ModelOutputError, match="1000 logits.*got 10"):
        evaluate(wrong, corruptions="contrast", severities="1", limit=2, store=store)
    unknown = Classifier(ColourNet(10), name="ten-way-unknown", transform=RAW)
    with pytest.raises(ModelOutputError, match="1000 logits"):
        evaluate(unknown, corruptions="contrast", severities="1", limit=2, store=store)
    broken = Classifier(torch.nn.Linear(5, 3), name="wrong-input", transform=RAW)
    with pytest.raises(ModelOutputError, match="forward pass failed.*shape"):
        evaluate(broken, corruptions="contrast", severities="1", limit=2, store=store)
    assert _no_run_complete(store)


def test_nan_logits_are_refused_and_no_run_is_complete(tmp_path: Path) -> None:
    class NaNAfterFirst(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = ColourNet()
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            y = self.net(x)
            if self.calls > 1:
                y[0, 3] = float("nan")
            return y

    store = tmp_path / "s.sqlite"
    clf = Classifier(NaNAfterFirst(), name="nan", transform=RAW, classes=WNIDS)
    with pytest.raises(ModelOutputError, match=r"non-finite logits .* first 'imagenet_"):
        evaluate(clf, corruptions="contrast", severities="1", limit=4, batch_size=2, store=store)
    with ResultsStore(store) as db:
        runs = db.runs(db.evaluations()[0].id)
        assert {r.status for r in runs} == {"failed"} and "non-finite" in (runs[0].error or "")
        assert sum(r.n_predicted for r in runs) == 2  # the first batch was fine and stays for a resume


# -- label spaces --------------------------------------------------------------------------------------------


def test_release_mode_is_its_own_evaluation(tmp_path: Path) -> None:
    kw = dict(corruptions="gaussian_noise", severities="2", limit=2, store=tmp_path / "s.sqlite")
    plain = evaluate(toy_classifier(), **kw)  # type: ignore[arg-type]
    jpeg = evaluate(toy_classifier(), release=True, **kw)  # type: ignore[arg-type]
    assert plain.evaluation_id != jpeg.evaluation_id and jpeg.settings["release"] is True
    assert jpeg.new_predictions == 4
    with pytest.raises(InvalidArgumentError, match="release=True"):
        evaluate(toy_classifier(), release=True, released=tmp_path, store=tmp_path / "s.sqlite")


def test_prefetch_thread_and_inline_corruption_store_the_same_predictions(tmp_path: Path) -> None:
    from shiftbench.evaluation.runner import want_prefetch

    kw = dict(corruptions="gaussian_noise,contrast", severities="1,4", limit=4, batch_size=3)
    a = evaluate(toy_classifier(), prefetch=True, store=tmp_path / "a.sqlite", **kw)  # type: ignore[arg-type]
    b = evaluate(toy_classifier(), prefetch=False, store=tmp_path / "b.sqlite", **kw)  # type: ignore[arg-type]
    assert a.new_predictions == b.new_predictions == 4 * 5

    def rows(p: Path) -> list[tuple[object, ...]]:
        with ResultsStore(p) as db:
            return sorted((r["corruption"], r["severity"], r["image"], r["top5"]) for r in db.rows("predictions"))

    assert rows(tmp_path / "a.sqlite") == rows(tmp_path / "b.sqlite")
    assert want_prefetch("cuda") is True
    assert want_prefetch("cpu") is (torch.get_num_threads() < (__import__("os").cpu_count() or 1))


def test_class_subset_restricts_logits(tmp_path: Path) -> None:
    subset = [WNIDS[243], WNIDS[559], WNIDS[0]]
    r = evaluate(toy_classifier(), classes=subset, severities="1", corruptions="contrast", store=tmp_path / "s.sqlite")
    assert r.settings["label_space"] == "list (3 classes)"
    with ResultsStore(tmp_path / "s.sqlite") as db:
        rows = db.rows("predictions")
    assert {row["image"] for row in rows} == {"imagenet_00_243.jpg", "imagenet_01_559.jpg"}
    assert all(set(map(int, row["top5"].split())) == {0, 1, 2} for row in rows)
    with pytest.raises(InvalidArgumentError, match="class ids among the model's outputs"):
        evaluate(toy_classifier(), classes=["n99999999"], store=tmp_path / "s.sqlite")


def test_bad_arguments_name_argument_value_and_allowed(tmp_path: Path) -> None:
    s = tmp_path / "s.sqlite"
    with pytest.raises(InvalidArgumentError, match=r"severities='0-2'.*1\.\.5"):
        evaluate(toy_classifier(), severities="0-2", store=s)
    with pytest.raises(InvalidArgumentError, match=r"corruptions='fgo'.*Did you mean 'fog'"):
        evaluate(toy_classifier(), corruptions="fgo", store=s)
    with pytest.raises(InvalidArgumentError, match="batch_size=0"):
        evaluate(toy_classifier(), batch_size=0, store=s)
    with pytest.raises(InvalidArgumentError, match="benchmark='imagenet-x'"):
        evaluate(toy_classifier(), benchmark="imagenet-x", store=s)
    with pytest.raises(InvalidArgumentError, match="device='tpu'"):
        evaluate(toy_classifier(), device="tpu", store=s)


# -- real model, stored predictions, CLI -----------------------------------------------------------------------


def test_lite0_numbers_match_a_hand_check_on_the_stored_predictions(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    r = evaluate(corruptions="gaussian_noise", severities="1-5", limit=8, store=store, batch_size=8)
    assert r.model == "efficientnet-lite0" and r.summary.baseline == "AlexNet"
    db = sqlite3.connect(store)
    err = {
        (c, s): wrong / n
        for c, s, wrong, n in db.execute(
            "SELECT r.condition, r.level, SUM(p.top1 != p.label), COUNT(*) FROM runs r "
            "JOIN records p ON p.run_id = r.id WHERE p.skipped IS NULL GROUP BY r.id"
        )
    }
    db.close()
    alex = json.loads((Path(__file__).parents[1] / "src/shiftbench/data/alexnet_imagenet_c.json").read_text())
    a = alex["errors"]["gaussian_noise"]
    ce = sum(err[("gaussian_noise", s)] for s in range(1, 6)) / sum(a)
    rce = sum(err[("gaussian_noise", s)] - err[("clean", 0)] for s in range(1, 6)) / sum(x - 0.4348 for x in a)
    assert r.summary.clean_error == err[("clean", 0)] <= 0.25  # EfficientNet-Lite0 gets most of these right
    score = r.summary.score("gaussian_noise")
    assert score is not None and score.ce == pytest.approx(ce) and score.relative_ce == pytest.approx(rce)
    assert r.summary.mce == pytest.approx(ce) and not r.summary.complete


def test_cli_evaluate_and_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s.sqlite")
    args = [
        "evaluate",
        "--corruptions",
        "contrast",
        "--severities",
        "1,2",
        "--limit",
        "4",
        "--store",
        store,
        "--no-progress",
    ]
    assert main([*args, "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = doc["rows"][-1]
    assert row["model"] == "efficientnet-lite0" and row["settings"]["corruptions"] == ["contrast"]
    assert row["missing_benchmark_corruptions"] == [c for c in BENCHMARK_CORRUPTIONS if c != "contrast"]
    assert doc["rows"][0]["label"] == "AlexNet (baseline)"
    assert main(args) == 0
    out = capsys.readouterr()
    assert "efficientnet-lite0" in out.out and "mCE is partial" in out.out and "already complete" in out.err
    assert main(["results", "--store", store]) == 0
    assert "Leaderboard by mCE" in capsys.readouterr().out
    assert main(["results", "--store", store, "--export", str(tmp_path / "p.csv"), "--table", "predictions"]) == 0
    assert len((tmp_path / "p.csv").read_text().splitlines()) == 1 + 3 * 4
    assert main(["results", "--store", store, "--results-format", "csv"]) == 0
    assert "ce_contrast" in capsys.readouterr().out


def test_cli_ctrl_c_says_how_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from shiftbench.benchmarks import imagenet_c

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(imagenet_c, "corruption_plan", interrupted)
    assert main(["evaluate", "--store", str(tmp_path / "s.sqlite"), "--no-progress"]) == 130
    assert "run the same command again to resume" in capsys.readouterr().err


def test_cli_reports_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--data", str(tmp_path / "missing"), "--store", str(tmp_path / "s.sqlite")]) == 1
    assert "--data" in capsys.readouterr().err
    assert main(["evaluate", "--model", "resnet5O", "--store", str(tmp_path / "s.sqlite")]) != 0
    assert main(["results", "--store", str(tmp_path / "none.sqlite")]) == 1
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_default_command_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """`shiftbench evaluate` with no arguments: 20 images x (1 + 19 x 5) conditions, 2 to 5 minutes on 2 cores."""
    if "slow" not in str(request.config.getoption("markexpr", "")):
        pytest.skip("slow (minutes): run with -m slow")
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "demonstrate the pipeline" in out and "no benchmark" in out
    assert (tmp_path / "shiftbench-workspace" / "results.sqlite").is_file()
    with ResultsStore(tmp_path / "shiftbench-workspace" / "results.sqlite") as db:
        runs = db.runs(1)
        assert all(r.status == "complete" and r.n_predicted == 20 for r in runs)
