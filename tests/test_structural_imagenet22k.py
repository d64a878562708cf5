"""The ImageNet-22K subclass splits (Hendrycks & Dietterich, Appendix G): the authors' own lists (the default),
checked against a copy of their script's lines, and the WordNet-built variant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shiftbench.errors import InvalidArgumentError
from shiftbench.structural import imagenet22k_superclasses, imagenet22k_wnids

REPO = Path(__file__).resolve().parents[1]
APPENDIX_G = {
    "Amphibian": "n01627424", "Appliance": "n02729837", "Aquatic Mammal": "n02062017", "Bird": "n01503061",
    "Bear": "n02131653", "Beverage": "n07881800", "Big cat": "n02127808", "Building": "n02913152",
    "Cat": "n02121620", "Clothing": "n03051540", "Dog": "n02084071", "Electronic Equipment": "n03278248",
    "Fish": "n02512053", "Footwear": "n03380867", "Fruit": "n13134947", "Fungus": "n12992868",
    "Geological Formation": "n09287968", "Hoofed Animal": "n02370806", "Insect": "n02159955",
    "Musical Instrument": "n03800933", "Primate": "n02469914", "Reptile": "n01661091", "Utensil": "n04516672",
    "Vegetable": "n07707451", "Vehicle": "n04576211",
}  # fmt: skip


def in1k() -> set[str]:
    lines = (REPO / "src" / "shiftbench" / "data" / "imagenet_wnids.txt").read_text().splitlines()
    return {x for x in lines if x.startswith("n")}


def test_split_counts_and_disjointness() -> None:
    sup = imagenet22k_superclasses("wordnet")
    assert {s["name"]: s["wnid"] for s in sup} == APPENDIX_G
    seen, unseen = imagenet22k_wnids("seen", "wordnet"), imagenet22k_wnids("unseen", "wordnet")
    assert len(seen) == 543 and len(unseen) == 5045  # the counts documented in docs/structural-robustness.md
    assert not set(seen) & set(unseen)
    assert set(seen) <= in1k() and not set(unseen) & in1k()
    all_subs = [w for s in sup for w in s["seen"] + s["unseen"]]
    assert len(all_subs) == len(set(all_subs))  # no subclass under two superclasses
    by = {s["name"]: s for s in sup}
    assert "n02085620" in by["Dog"]["seen"]  # Chihuahua, an ImageNet-1K class
    assert "n02123045" in by["Cat"]["seen"] and "n02129165" in by["Big cat"]["seen"]  # tabby; lion
    assert all(len(s["seen"]) >= 4 and len(s["unseen"]) >= 7 for s in sup)
    with pytest.raises(InvalidArgumentError, match="part='train'"):
        imagenet22k_wnids("train")
    with pytest.raises(InvalidArgumentError, match="split='imagenet'"):
        imagenet22k_wnids("seen", "imagenet")


AUTHORS_LINES = REPO / "tests" / "fixtures" / "authors" / "imagenet22k_train_py_lines.txt"


def _authors_lists() -> dict[str, list[tuple[str, str, list[str]]]]:
    """The two tuples of the authors' script, re-read from the copy of its lines (with its provenance header)."""
    import ast
    import re

    text = AUTHORS_LINES.read_text(encoding="utf-8")
    assert "Commit: e0377d46411fa30c01a9559017bdb6a5f78d4abf" in text and "old/auxiliary/ImageNet22K/train.py" in text
    out = {}
    lines = text.splitlines()
    for node in ast.parse(text).body:
        assert isinstance(node, ast.Assign) and node.end_lineno is not None
        heads = [re.match(r"\s*#\s*([a-z ]+?)\s+(n\d{8})\s*$", ln) for ln in lines[node.lineno - 1 : node.end_lineno]]
        heads = [h.groups() for h in heads if h]
        out[node.targets[0].id] = [(n, w, list(g)) for (n, w), g in zip(heads, ast.literal_eval(node.value))]  # type: ignore[union-attr]
    return out


def test_default_split_is_the_authors_lists() -> None:
    lists = _authors_lists()
    sup = imagenet22k_superclasses()
    assert sup == imagenet22k_superclasses("authors")
    assert [s["wnid"] for s in sup] == [w for _, w, _ in lists["im1k_classes"]] == list(APPENDIX_G.values())
    for s, (_, _, seen), (_, _, unseen) in zip(sup, lists["im1k_classes"], lists["im22k_classes"]):
        assert s["seen"] == list(dict.fromkeys(seen)) and s["unseen"] == list(dict.fromkeys(unseen))
        assert s["repeats_removed"] == {"seen": len(seen) - len(set(seen)), "unseen": len(unseen) - len(set(unseen))}
        assert s["unseen"][0] == s["wnid"]  # the authors list the superclass synset itself as an unseen class
    # the script maps a wnid to the first superclass listing it
    first: dict[str, str] = {}
    for (_, _, seen), s in zip(lists["im1k_classes"], sup):
        for w in seen:
            first.setdefault(w, s["name"])
    assert imagenet22k_wnids("seen") == first
    seen, unseen = imagenet22k_wnids("seen"), imagenet22k_wnids("unseen")
    assert len(seen) == 542 and len(unseen) == 5017 and not set(seen) & set(unseen)
    assert set(seen) <= in1k() and not set(unseen) & in1k()


def test_the_two_splits_differ_as_documented() -> None:
    """docs/structural-robustness.md counts the differences: Bird's seen list, the 25 superclass synsets, 53 WNIDs."""
    a, w = imagenet22k_superclasses("authors"), imagenet22k_superclasses("wordnet")
    differ_seen = [x["name"] for x, y in zip(a, w) if set(x["seen"]) != set(y["seen"])]
    assert differ_seen == ["Bird"] and set(w[3]["seen"]) - set(a[3]["seen"]) == {"n01855032"}
    assert all(set(x["unseen"]) != set(y["unseen"]) for x, y in zip(a, w))
    ua, uw = set(imagenet22k_wnids("unseen")), set(imagenet22k_wnids("unseen", "wordnet"))
    assert len(ua - uw) == 25 and ua - uw == {s["wnid"] for s in a}  # the superclass synsets
    assert len(uw - ua) == 53


def test_build_script_regenerates_the_authors_split() -> None:
    """The tool reads the authors' script (here: the copy of its lines) and gives the shipped file."""
    tool = REPO / "tools" / "build_imagenet22k_authors_split.py"
    r = subprocess.run([sys.executable, str(tool), "--train", str(AUTHORS_LINES), "--check"], capture_output=True, text=True)
    assert r.returncode == 0 and "up to date" in r.stdout, r.stdout + r.stderr
