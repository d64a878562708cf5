#!/usr/bin/env python3
"""Build ImageNet-D's published class mapping (the paper's 164 classes) from the class names alone.

ImageNet-D (Rusak et al., "ImageNet-D: A new challenging robustness dataset inspired by
domain adaptation", section 1) maps DomainNet classes to ImageNet-1k classes "by comparing
the class labels in DomainNet and the synset labels on IN", then cleans the result by hand,
and says "the full mapping dictionary can be found in our code online" (github.com/bethgelab/
robustness, ``examples/imagenet_d/map_files.py``, commit 67abe10ca5dbca833c3777a42e920ac2a95a141a).
This script is an independent implementation of that rule; the hand edits are data, in
``tools/imagenet_d_paper_edits.tsv``. Inputs are the two name lists shipped with shiftbench:
``src/shiftbench/data/domainnet_classes.txt`` and the label strings of
``src/shiftbench/data/imagenet_classes.txt`` (the synset lemmas joined by ", ": the usual
ImageNet-1k label strings, e.g. ``"tench, Tinca tinca"``).

The rule, one pass:

1. Folders are taken in code-point order (``sorted``: ``The_Eiffel_Tower`` before ``aircraft_carrier``).
2. Word match: the folder name is split at ``_``; for each part in turn, every ImageNet-1k class
   whose label string contains that part as a whole word (regular-expression ``\\b``, case-sensitive)
   is appended, in index order. Duplicates stay until step 4, because the edits of step 3 address
   list positions.
3. The edits of the table, in file order: ``drop`` a class, ``cut`` positions out of a list,
   ``set`` a list, ``add`` to a list.
4. Each list is de-duplicated; a folder with an empty list is not part of ImageNet-D.

Then the ambiguous DomainNet classes are merged (``merge`` lines: couch -> bed, mug and coffee_cup ->
cup, keyboard and laptop -> computer, van, firetruck and pickup_truck -> truck, ...): every DomainNet
folder that survived the first pass is renamed to its merge target, and **the pass is run again on
the merged names**. The second pass gives the ImageNet-D classes and their ImageNet-1k classes; the
first gives the DomainNet folders that are read and the class each one is scored as. (The authors'
code does the same through a symlink tree whose class folders are the merged names.)

The reference code scores a prediction through a vector that maps each ImageNet-1k class to one
ImageNet-D class; that equals shiftbench's "prediction in the class's set" only while no ImageNet-1k
class belongs to two ImageNet-D classes. The build checks that (it holds for the published edits).

Output: ``src/shiftbench/data/imagenet_d_paper_mapping.json`` (``--check``: exit 1 if it differs).
Byte-reproducible: no clock, no environment, sorted keys where order carries no meaning.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "src" / "shiftbench" / "data"
EDITS = Path(__file__).resolve().with_name("imagenet_d_paper_edits.tsv")
OUTPUT = "imagenet_d_paper_mapping.json"
PREVIOUS_DIGESTS = ("760e381769456ddffbbd7a9f4a1fa44321f7f4e34354a04099cdb101deed7f2b",)
"""SHA-256 of earlier texts of the output with the same classes (only notes reworded): ImageNet-D evaluations stored
with them are still this mapping's (``ImageNetDMapping.previous_digests``)."""
SOURCE = {
    "paper": "Rusak et al., ImageNet-D: A new challenging robustness dataset inspired by domain adaptation, section 1",
    "repository": "https://github.com/bethgelab/robustness",
    "path": "examples/imagenet_d/map_files.py",
    "commit": "67abe10ca5dbca833c3777a42e920ac2a95a141a",
}
ACTIONS = ("drop", "cut", "set", "add", "merge")


class BuildError(Exception):
    """The edits table does not fit the class lists (a position or class that does not exist)."""


def read_lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]


def read_names() -> tuple[list[str], list[str]]:
    """DomainNet folder names (label order) and the 1000 ImageNet-1k label strings (index order)."""
    domainnet = [ln.strip() for ln in read_lines(DATA / "domainnet_classes.txt")]
    labels = [ln.split("\t")[2] for ln in read_lines(DATA / "imagenet_classes.txt")]
    if len(domainnet) != 345 or len(labels) != 1000:
        raise BuildError("expected 345 DomainNet classes and 1000 ImageNet-1k classes")
    return domainnet, labels


def parse_indices(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    return out


def parse_position(text: str) -> slice:
    if ":" in text:
        a, b = text.split(":")
        return slice(int(a) if a else None, int(b) if b else None)
    i = int(text)
    return slice(i, i + 1 if i != -1 else None)


def read_edits(path: Path, folders: set[str]) -> list[tuple[str, str, str, str]]:
    edits = []
    for n, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not ln.strip() or ln.startswith("#"):
            continue
        parts = ln.split("\t")
        if len(parts) < 3 or parts[0] not in ACTIONS:
            raise BuildError(f"{path.name}:{n}: expected 'action<TAB>class<TAB>argument[<TAB>note]', got {ln!r}")
        action, cls, arg = parts[:3]
        if cls not in folders:
            raise BuildError(f"{path.name}:{n}: {cls!r} is not a DomainNet class")
        if action == "merge" and arg not in folders:
            raise BuildError(f"{path.name}:{n}: merge target {arg!r} is not a DomainNet class")
        edits.append((action, cls, arg, parts[3] if len(parts) > 3 else ""))
    return edits


def word_match(folder: str, labels: list[str]) -> list[int]:
    """Step 2: per ``_``-separated part, every label string holding it as a whole word (case-sensitive)."""
    out: list[int] = []
    for part in folder.split("_"):
        word = re.compile(r"\b" + re.escape(part) + r"\b")
        out.extend(i for i, s in enumerate(labels) if word.search(s))
    return out


def one_pass(
    folders: list[str], labels: list[str], edits: list[tuple[str, str, str, str]]
) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, list[dict[str, object]]]]:
    """Steps 1-4 on ``folders``: (final lists, raw word-match lists, edits applied per class)."""
    raw = {f: word_match(f, labels) for f in sorted(folders)}
    lists = {f: list(v) for f, v in raw.items() if v}
    applied: dict[str, list[dict[str, object]]] = {}
    for action, cls, arg, note in edits:
        if action == "merge":
            continue
        if action == "drop":
            if lists.pop(cls, None) is not None:
                applied.setdefault(cls, []).append({"action": "drop", "note": note})
            continue
        if cls not in folders:  # an edit of a class merged away: it is applied in the pass that has the class
            continue
        if action == "set":
            lists[cls] = parse_indices(arg)
            entry: dict[str, object] = {"action": "set", "imagenet": lists[cls]}
        elif cls not in lists:
            raise BuildError(f"{action} {cls} {arg}: {cls!r} has no word match to edit")
        elif action == "cut":
            pos = parse_position(arg)
            removed = lists[cls][pos]
            if not removed:
                raise BuildError(f"cut {cls} {arg}: position outside its {len(lists[cls])}-entry list")
            del lists[cls][pos]
            entry = {"action": "cut", "position": arg, "removed": removed}
        else:
            lists[cls].extend(parse_indices(arg))
            entry = {"action": "add", "imagenet": parse_indices(arg)}
        if note:
            entry["note"] = note
        applied.setdefault(cls, []).append(entry)
    return {f: sorted(set(v)) for f, v in lists.items()}, raw, applied


def build(domainnet: list[str], labels: list[str], edits: list[tuple[str, str, str, str]]) -> dict[str, object]:
    merge = {cls: arg for action, cls, arg, _ in edits if action == "merge"}
    first, _, first_edits = one_pass(domainnet, labels, edits)
    scored_as = {f: merge.get(f, f) for f in first}
    final, raw, final_edits = one_pass(sorted(set(scored_as.values())), labels, edits)
    lost = sorted(c for c in set(scored_as.values()) if c not in final)
    if lost:
        raise BuildError(f"merged class(es) {lost} have no ImageNet class in the second pass")
    owners = Counter(i for v in final.values() for i in v)
    shared = sorted(i for i, n in owners.items() if n > 1)
    if shared:
        raise BuildError(
            f"ImageNet classes {shared} belong to several ImageNet-D classes; the reference scoring would "
            "count each for one class only, which set membership does not reproduce"
        )
    order = {c: i for i, c in enumerate(domainnet)}
    classes: dict[str, object] = {}
    for c in sorted(final, key=order.__getitem__):
        members = sorted((f for f, t in scored_as.items() if t == c), key=order.__getitem__)
        edits_here = final_edits.get(c, [])
        classes[c] = {
            "domainnet_index": order[c],
            "imagenet": final[c],
            "names": [labels[i].split(", ")[0] for i in final[c]],
            "folders": members,
            "word_match": raw[c],
            "edits": [{**e, "removed_names": [labels[i].split(", ")[0] for i in e["removed"]]}  # type: ignore[union-attr]
                      if e["action"] == "cut" else e for e in edits_here],
        }
    left_out = {
        f: "dropped by the hand edits" + (f" ({first_edits[f][0]['note']})" if first_edits[f][0].get("note") else "")
        for f in sorted(first_edits, key=order.__getitem__)
        if any(e["action"] == "drop" for e in first_edits[f])
    }
    sizes = Counter(len(v) for v in final.values())
    return {
        "format": 1,
        "name": "paper",
        "description": (
            "ImageNet-D as published (Rusak et al.): DomainNet classes mapped one-to-many to ImageNet-1k class "
            "indices by the authors' word-match rule with their hand edits and merged ambiguous classes. "
            "An image of DomainNet folder f is scored as class folders[f]; a prediction is correct when its "
            "ImageNet-1k index is in that class's 'imagenet' list."
        ),
        "built_by": "tools/build_imagenet_d_paper_mapping.py from tools/imagenet_d_paper_edits.tsv",
        "source": SOURCE,
        "edits_sha256": hashlib.sha256(EDITS.read_bytes()).hexdigest(),
        "previous_digests": list(PREVIOUS_DIGESTS),
        "n_classes": len(final),
        "n_folders": len(scored_as),
        "n_imagenet_classes": len(owners),
        "statistics": {str(k): sizes[k] for k in sorted(sizes)},
        "folders": {f: scored_as[f] for f in sorted(scored_as, key=order.__getitem__)},
        "classes": classes,
        "left_out": left_out,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(DATA), help=f"output folder (default {DATA})")
    ap.add_argument("--check", action="store_true", help="compare with the file in --out instead of writing")
    args = ap.parse_args(argv)
    try:
        domainnet, labels = read_names()
        mapping = build(domainnet, labels, read_edits(EDITS, set(domainnet)))
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(mapping, indent=1) + "\n"
    target = Path(args.out) / OUTPUT
    if args.check:
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            print(f"out of date: {target} (run tools/build_imagenet_d_paper_mapping.py)", file=sys.stderr)
            return 1
        print(f"up to date: {target}")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(
        f"{mapping['n_classes']} ImageNet-D classes ({mapping['n_folders']} DomainNet folders) -> "
        f"{mapping['n_imagenet_classes']} ImageNet-1k classes; sizes {mapping['statistics']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
