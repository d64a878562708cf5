#!/usr/bin/env python3
"""Ship the ImageNet-22K seen / unseen subclass lists of Hendrycks & Dietterich's own scripts as package data.

The authors ran the ImageNet-22K experiment (Hendrycks & Dietterich, 2018, Section 4.3, Appendix G) with two hard-coded tuples of
25 wnid tuples each, one per superclass, in ``old/auxiliary/ImageNet22K/train.py`` and ``test.py`` of
https://github.com/hendrycks/robustness: ``im1k_classes`` (the seen subclasses, ImageNet-1K classes) and
``im22k_classes`` (the unseen ones, ImageNet-22K only; each starts with the superclass synset itself). Each
tuple is preceded by a comment naming the superclass and its wnid. This script reads both files (a local
copy: ``git show <commit>:<path>``), checks that they hold the same lists, and writes
``src/shiftbench/data/imagenet22k_authors.json``: per superclass its name, wnid and the two lists in the
authors' order with repeats inside a list removed (the count of removed repeats is kept), plus provenance.

The scripts map a wnid to the first superclass whose tuple holds it (``break`` after the first match), so a
wnid listed under two superclasses belongs to the earlier one; :func:`shiftbench.structural.imagenet22k_wnids`
does the same.

    git -C robustness show e0377d46411fa30c01a9559017bdb6a5f78d4abf:old/auxiliary/ImageNet22K/train.py > train.py
    git -C robustness show e0377d46411fa30c01a9559017bdb6a5f78d4abf:old/auxiliary/ImageNet22K/test.py > test.py
    python tools/build_imagenet22k_authors_split.py --train train.py --test test.py [--check]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "shiftbench" / "data" / "imagenet22k_authors.json"
WORDNET_SPLIT = REPO / "src" / "shiftbench" / "data" / "imagenet22k_subclasses.json"
COMMIT = "e0377d46411fa30c01a9559017bdb6a5f78d4abf"
_COMMENT = re.compile(r"^\s*#\s*([a-z][a-z ]*?)\s+(n\d{8})\s*$")


def read_lists(text: str) -> dict[str, list[tuple[str, str, list[str]]]]:
    """``{"im1k_classes": [(name, wnid, [wnids...]), ...], "im22k_classes": [...]}`` from the script's source."""
    tree = ast.parse(text)
    lines = text.splitlines()
    out: dict[str, list[tuple[str, str, list[str]]]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if name not in ("im1k_classes", "im22k_classes"):
            continue
        groups = ast.literal_eval(node.value)
        assert node.end_lineno is not None
        heads = [m.groups() for m in (_COMMENT.match(ln) for ln in lines[node.lineno - 1 : node.end_lineno]) if m]
        if len(heads) != len(groups):
            raise SystemExit(f"{name}: {len(groups)} tuples but {len(heads)} '# <superclass> <wnid>' comments")
        out[name] = [(h[0], h[1], list(g)) for h, g in zip(heads, groups)]
    if set(out) != {"im1k_classes", "im22k_classes"}:
        raise SystemExit(f"found {sorted(out)}; expected im1k_classes and im22k_classes")
    return out


def _unique(seq: list[str]) -> list[str]:
    return list(dict.fromkeys(seq))


def build(train: dict[str, list[tuple[str, str, list[str]]]]) -> dict[str, object]:
    seen, unseen = train["im1k_classes"], train["im22k_classes"]
    # the class names (Appendix G's, as the WordNet-built split spells them), by superclass wnid
    names = {s["wnid"]: s["name"] for s in json.loads(WORDNET_SPLIT.read_text(encoding="utf-8"))["superclasses"]}
    supers = []
    for (n1, w1, s), (n2, w2, u) in zip(seen, unseen):
        if (n1, w1) != (n2, w2):
            raise SystemExit(f"superclass order differs: {n1} {w1} vs {n2} {w2}")
        supers.append({
            "name": names[w1],
            "wnid": w1,
            "comment": f"{n1} {w1}",
            "seen": _unique(s),
            "unseen": _unique(u),
            "repeats_removed": {"seen": len(s) - len(set(s)), "unseen": len(u) - len(set(u))},
        })
    all_seen = [w for s in supers for w in s["seen"]]
    all_unseen = [w for s in supers for w in s["unseen"]]
    return {
        "description": "ImageNet-22K seen (ImageNet-1K) and unseen (ImageNet-22K only) subclasses of the 25 superclasses "
        "of Hendrycks & Dietterich, Section 4.3 and Appendix G, as their own scripts list them",
        "rule": "the authors' tuples im1k_classes (seen) and im22k_classes (unseen) in their order, repeats inside a list "
        "removed; a wnid listed under two superclasses belongs to the first (the scripts stop at the first match)",
        "superclasses": supers,
        "totals": {
            "seen": len(all_seen), "seen_distinct": len(set(all_seen)),
            "unseen": len(all_unseen), "unseen_distinct": len(set(all_unseen)),
        },
        "provenance": {
            "repository": "https://github.com/hendrycks/robustness",
            "paths": ["old/auxiliary/ImageNet22K/train.py", "old/auxiliary/ImageNet22K/test.py"],
            "commit": COMMIT,
            "variables": ["im1k_classes", "im22k_classes"],
            "tool": "tools/build_imagenet22k_authors_split.py",
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, type=Path, help="old/auxiliary/ImageNet22K/train.py (a local copy)")
    ap.add_argument("--test", type=Path, default=None, help="old/auxiliary/ImageNet22K/test.py, checked to hold the same lists")
    ap.add_argument("--check", action="store_true", help="exit 1 if the shipped file differs")
    args = ap.parse_args(argv)
    train = read_lists(args.train.read_text(encoding="utf-8"))
    if args.test is not None and read_lists(args.test.read_text(encoding="utf-8")) != train:
        raise SystemExit("train.py and test.py list different classes")
    doc = build(train)
    text = json.dumps(doc, indent=1) + "\n"
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{OUT} differs")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}: {doc['totals']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
