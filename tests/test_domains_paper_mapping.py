"""ImageNet-D's published mapping ("paper", the default): 004's class count and Table 1, the merged classes.

004 = Rusak et al., "ImageNet-D: A new challenging robustness dataset inspired by domain adaptation". Its
mapping is the authors' rule (word match + hand edits + merged ambiguous classes), implemented on its own
in tools/build_imagenet_d_paper_mapping.py. Where the authors' code and 004's Table 1 disagree, the tests
below say so; the shipped data follows the code (004 section 1: "the full mapping dictionary can be found in
our code online").
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from shiftbench.domains import PAPER_TABLE1, domainnet_classes, imagenet_classes, load_mapping
from shiftbench.domains.mapping import DEFAULT_MAPPING, MAPPINGS
from shiftbench.errors import UnknownNameError

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "tools" / "build_imagenet_d_paper_mapping.py"

# The histogram of the de-duplicated lists, i.e. the sets a prediction is scored against (the authors' code).
CODE_SETS = {1: 109, 2: 27, 3: 12, 4: 2, 5: 5, 6: 1, 7: 2, 8: 1, 9: 1, 17: 1, 20: 1, 38: 1, 120: 1}


def _builder():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("build_imagenet_d_paper_mapping", BUILD)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _list_length_before_dedup(prov: dict) -> int:  # type: ignore[type-arg]
    """Length of a class's list with repeated entries, recomputed from the provenance in the shipped file."""
    n = len(prov["word_match"])
    for e in prov["edits"]:
        if e["action"] == "cut":
            n -= len(e["removed"])
        elif e["action"] == "set":
            n = len(e["imagenet"])
        elif e["action"] == "add":
            n += len(e["imagenet"])
    return n


def test_paper_is_the_default_and_names_are_checked() -> None:
    assert DEFAULT_MAPPING == "paper" and MAPPINGS == ("paper", "wordnet")
    assert load_mapping() is load_mapping("paper")
    assert load_mapping().name == "paper" and load_mapping("wordnet").name == "wordnet"
    assert load_mapping().digest != load_mapping("wordnet").digest
    with pytest.raises(UnknownNameError, match="wordnet"):
        load_mapping("wordnett")


def test_class_count_is_the_papers() -> None:
    m = load_mapping()
    assert len(m.classes) == 164 == sum(PAPER_TABLE1.values())  # 004 section 1: "164 overlap with IN"
    assert len(m.folder_names) == 181  # 17 more DomainNet folders are read and scored as a merged class
    assert set(m.classes) <= set(m.folder_names) <= set(domainnet_classes())


def test_table1_counts_list_entries_before_deduplication() -> None:
    """004 Table 1 is the histogram of the authors' lists *with repeated entries*, bar one edit of `dog`.

    A class's list repeats an ImageNet class when the word match found it and a hand edit added it again:
    `monkey` is 20 classes listed 28 times (the 8 word-matched monkeys come back with the added range
    365-384), `snake` 17 classes listed 28 times, `bird` 38 listed 39 times (indigo bunting, matched by the
    word "bird", is re-added with 7-23). Those are 004's "28", "28" and "39". `dog` is listed 131 times here
    and 132 in 004: the code's edit "cut dog -1" removes hotdog (934) from dog; without it the count is 132,
    so 004 counted before that edit was made. Scoring uses the sets (CODE_SETS), as the code does.
    """
    m = load_mapping()
    lengths = {c: _list_length_before_dedup(dict(m.provenance[c])) for c in m.classes}
    hist = Counter(lengths.values())
    paper = Counter(PAPER_TABLE1)
    assert hist - paper == Counter({131: 1}) and paper - hist == Counter({132: 1})  # the one difference
    assert lengths["dog"] == 131 and len(m.targets["dog"]) == 120
    dog_cuts = [e for e in m.provenance["dog"]["edits"] if e["action"] == "cut"]
    assert [e["removed"] for e in dog_cuts] == [[934]]  # the edit that explains 132 -> 131
    assert (lengths["monkey"], len(m.targets["monkey"])) == (28, 20)
    assert (lengths["snake"], len(m.targets["snake"])) == (28, 17)
    assert (lengths["bird"], len(m.targets["bird"])) == (39, 38)
    assert m.statistics() == CODE_SETS
    assert sum(k * v for k, v in PAPER_TABLE1.items()) == sum(lengths.values()) + 1 == 511


def test_imagenet_class_count_463_vs_464() -> None:
    """004 says 463 ImageNet classes; the code's sets hold 464 distinct ones, none in two classes.

    463 is what a count of mapped entries greater than zero gives when ImageNet-D labels are positions in the
    sorted class list: aircraft carrier (403) maps to label 0 and is missed. That is an observation, not a
    documented cause; shiftbench accepts all 464.
    """
    m = load_mapping()
    assert len(m.imagenet_indices) == 464 == sum(len(t) for t in m.targets.values())  # disjoint sets
    order = sorted(m.classes)  # code-point order, the authors' label order
    labels = {i: order.index(c) for c in m.classes for i in m.targets[c]}
    assert sum(1 for v in labels.values() if v > 0) == 463 and m.targets[order[0]] == (403,)


def test_merged_ambiguous_classes_are_scored_as_their_class() -> None:
    m = load_mapping()
    merged = {f: m.class_of(f) for f in m.folder_names if m.class_of(f) != f}
    assert merged == {
        "alarm_clock": "clock", "baseball_bat": "baseball", "ceiling_fan": "fan", "cell_phone": "telephone",
        "coffee_cup": "cup", "couch": "bed", "hot_tub": "bathtub", "keyboard": "computer",
        "laptop": "computer", "lollipop": "ice_cream", "mug": "cup", "pickup_truck": "truck", "police_car": "car",
        "popsicle": "ice_cream", "school_bus": "bus", "swan": "bird", "van": "truck",
    }  # fmt: skip
    # The reference code lists firetruck with truck, but merges only folders its first pass kept, and the
    # word "firetruck" is in no ImageNet label ("fire engine, fire truck"): firetruck images are not read.
    assert "firetruck" not in m.folder_names
    # A mug image is scored as cup: right for "cup" and "measuring cup", wrong for "coffee mug" (504), whose
    # label has no whole word "cup" (the second pass matches the merged name only).
    assert m.accepts("mug", 968) and m.accepts("coffee_cup", 647) and not m.accepts("mug", 504)
    assert m.targets["bed"] == (831,)  # studio couch, day bed: a couch image is right for it, a bed image too
    assert m.accepts("laptop", 527) and m.accepts("keyboard", 681)  # desktop computer, notebook
    assert m.correct(["couch", "van", "swan"], [m.targets["bed"][0], 569, 100]) == [True, True, True]
    assert set(m.targets["truck"]) == {555, 569, 717, 864, 867}  # fire engine, garbage, pickup, tow, trailer


def test_worked_examples_of_the_rule() -> None:
    m = load_mapping()
    names = {c.index: c.name for c in imagenet_classes()}
    assert set(m.targets["clock"]) == {409, 530, 892}  # 004 section 1: analog, digital, wall clock
    assert {487, 528} <= set(m.targets["telephone"])  # cellular and dial telephone
    assert 365 in m.targets["monkey"]  # orangutan, added by hand (004 section 1)
    assert set(m.targets["dog"]) == set(range(151, 269)) | {275, 537}  # + African hunting dog, dogsled
    assert [names[i] for i in m.targets["hot_dog"]] == ["hot pot", "hotdog"]  # the dogs are cut (004 section 1)
    assert set(m.targets["cat"]) == {281, 282, 283, 284, 285}
    for gone in ("mouse", "fish", "mountain", "apple", "The_Great_Wall_of_China"):  # dropped by hand
        assert gone not in m.folder_names and gone in m.excluded
    assert "anvil" not in m.folder_names and "anvil" not in m.excluded  # no word match at all
    assert m.to_domainnet(917) == ("book",)  # comic book is inside ImageNet-D under this mapping
    assert load_mapping("wordnet").to_domainnet(917) == ()


def test_word_match_rule() -> None:
    b = _builder()
    labels = [", ".join(c.names) for c in imagenet_classes()]
    assert b.word_match("hot_dog", labels)[:2] == [926, 934]  # "hot" first, then every "dog"
    assert 934 in b.word_match("hot_dog", labels)[2:]  # hotdog again, via "dog": duplicates stay
    assert b.word_match("t-shirt", labels) == []  # case-sensitive: "T-shirt" does not match
    assert b.word_match("car", labels) == sorted(b.word_match("car", labels))  # one part: index order
    assert 511 not in b.word_match("car", labels)  # convertible: no whole word "car"
    assert {436, 565, 817} <= set(b.word_match("car", labels))  # beach wagon (estate car), freight car, sports car


def test_build_script_reproduces_the_shipped_file() -> None:
    r = subprocess.run([sys.executable, str(BUILD), "--check"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout


def test_edits_table_rejects_a_position_outside_a_list(tmp_path: Path) -> None:
    b = _builder()
    dn = list(domainnet_classes())
    labels = [", ".join(c.names) for c in imagenet_classes()]
    bad = tmp_path / "edits.tsv"
    bad.write_text("cut\tzebra\t5\n", encoding="utf-8")
    with pytest.raises(b.BuildError, match="position outside"):
        b.build(dn, labels, b.read_edits(bad, set(dn)))
    bad.write_text("cut\tzebraa\t0\n", encoding="utf-8")
    with pytest.raises(b.BuildError, match="not a DomainNet class"):
        b.read_edits(bad, set(dn))
