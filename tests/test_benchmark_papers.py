"""Every benchmark names its paper (authors, title, venue, year) and its full evaluation set; the report notes an
evaluation on fewer images than that set, for every benchmark that has a size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shiftbench.benchmarks import get_benchmark, list_benchmarks
from shiftbench.benchmarks.papers import PAPERS
from shiftbench.cli import main
from shiftbench.evaluation.protocol import Section
from shiftbench.report.build import compare_models

BUILT_IN = ("imagenet-c", "imagenet-p", "imagenet-noc", "imagenet-d", "imagenet-c-style", "icons-50-style",
            "icons-50-subtype", "cifar-100-subclass", "imagenet-22k-subclass", "border-obstruction")
AUTHORS = Path(__file__).with_name("fixtures") / "authors" / "imagenet_p_generator_lines.txt"


def test_every_benchmark_names_its_paper_and_full_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(BUILT_IN) <= set(list_benchmarks())
    for name in BUILT_IN:
        b = get_benchmark(name)
        assert b.paper is not None and b.paper in PAPERS, name
        assert all((b.paper.authors, b.paper.title, b.paper.venue)) and 2017 <= b.paper.year <= 2022
        assert b.full_set and b.paper.authors.split(",")[0].split(" &")[0] in b.full_set, (name, b.full_set)
    assert main(["list", "benchmarks", "--results-format", "json"]) == 0
    docs = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    for name in BUILT_IN:
        d, p = docs[name], get_benchmark(name).paper
        assert d["paper"] == {"authors": p.authors, "title": p.title, "venue": p.venue, "year": p.year}
        assert d["citation"] == f"{p.authors} ({p.year}). {p.title}. {p.venue}."
        assert d["full_set"] == get_benchmark(name).full_set
    assert docs["imagenet-noc"]["paper"]["authors"] == "Laugros, Caplier & Ospici"
    assert docs["imagenet-d"]["paper"]["year"] == 2022 and docs["imagenet-p"]["paper"]["venue"] == "ICLR"
    assert main(["list", "benchmarks"]) == 0
    out = capsys.readouterr().out
    assert "paper" in out and "full set" in out


def test_the_papers_are_the_ones_the_published_tables_cite() -> None:
    from shiftbench.zoo.tables import tables

    refs = {(t.reference["authors"], t.reference["title"], t.reference["venue"], t.reference["year"])
            for t in tables().values() if t.reference}
    mine = {(p.authors, p.title, p.venue, p.year) for p in PAPERS}
    assert refs <= mine and len(refs) == 5  # every paper with a published table, cited the same way


def test_full_set_sizes() -> None:
    from shiftbench.evaluation.models import imagenet_wnids

    val = 50 * len(imagenet_wnids())  # ImageNet's validation set: 50 images of each of its 1,000 classes
    assert val == 50_000
    sizes = {n: get_benchmark(n).full_images for n in BUILT_IN}
    assert sizes == {"imagenet-c": val, "imagenet-p": val, "imagenet-noc": val, "border-obstruction": val,
                     "imagenet-c-style": val, "imagenet-d": None, "icons-50-style": None, "icons-50-subtype": None,
                     "cifar-100-subclass": None, "imagenet-22k-subclass": None}
    # ImageNet-P: the authors' generator makes a video of every image of every validation class folder
    text = AUTHORS.read_text(encoding="utf-8")
    assert "commit e0377d46411fa30c01a9559017bdb6a5f78d4abf" in text
    assert "imagenet_val_folder = '/share/data/vision-greg/ImageNet/clsloc/images/val/'" in text
    assert "for index, folder in enumerate(sorted(os.listdir(imagenet_val_folder))):" in text
    assert "    for img_loc in os.listdir(imagenet_val_folder + folder):" in text
    assert get_benchmark("imagenet-p").full_unit == "videos"
    # CIFAR-100: 100 test images of each fine class; k held-out subclasses of each of the 20 superclasses
    cifar = get_benchmark("cifar-100-subclass")
    assert cifar.coverage({"split": "cifar100:k=2", "n_heldout": 120}) == (120, 4_000)
    assert cifar.coverage({"split": "cifar100:k=1", "n_heldout": 2_000}) == (2_000, 2_000)
    assert cifar.coverage({"split": "style:apple", "n_heldout": 3}) is None


def _record(name: str, n: int) -> dict[str, Any]:
    rec: dict[str, Any] = {"model": "m", "evaluation": 1, "n_images": n, "split": "cifar100:k=1", "n_heldout": n}
    return rec


@pytest.mark.parametrize("name", BUILT_IN)
def test_the_report_notes_fewer_images_than_the_full_set(name: str) -> None:
    bench = get_benchmark(name)
    few = compare_models([(bench, Section("x", [_record(name, 20)], lambda: "", lambda c: None))])[1]
    cov = bench.coverage(_record(name, 20))
    if cov is None:  # no fixed size (the user's data is the set): nothing to flag
        assert few[0]["small"] == [] and bench.full_set
        return
    assert few[0]["small"] == [f"{name}: 20 of {cov[1]:,} {bench.full_unit}"]
    full = compare_models([(bench, Section("x", [_record(name, cov[1])], lambda: "", lambda c: None))])[1]
    assert full[0]["small"] == []
