"""The ImageNet-D class mapping: DomainNet classes -> ImageNet-1k classes, one to many.

Package data, written by ``tools/build_imagenet_d_mapping.py`` from the WordNet 3.0
noun hierarchy plus a hand-curated corrections table (``tools/imagenet_d_corrections.tsv``,
a reason on every entry); nothing here needs WordNet at run time.

* ``shiftbench/data/domainnet_classes.txt``: DomainNet's 345 classes in the label
  order of its official list files.
* ``shiftbench/data/imagenet_classes.txt``: ``index, wnid, names`` of the 1000
  ImageNet-1k classes.
* ``shiftbench/data/imagenet_d_mapping.json``: for each ImageNet-D class, the
  ImageNet-1k indices accepted as correct, with the WordNet senses and
  corrections that produced them.

A prediction (an ImageNet-1k index) is correct for an image of DomainNet class
``c`` when it is one of ``mapping.targets[c]`` (all 59 bird species for ``bird``,
all three clocks for ``clock``, ...; Rusak et al., ImageNet-D, section 1).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from .._validate import suggest
from ..errors import UnknownNameError

__all__ = [
    "DOMAINS",
    "PAPER_TABLE1",
    "ImageNetClass",
    "ImageNetDMapping",
    "domainnet_classes",
    "imagenet_classes",
    "load_mapping",
]

DOMAINS: tuple[str, ...] = ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")
"""DomainNet's six domains (folder names of the download)."""

PAPER_TABLE1: dict[int, int] = {1: 102, 2: 32, 3: 13, 4: 3, 5: 5, 6: 1, 7: 1, 8: 2, 13: 1, 28: 2, 39: 1, 132: 1}
"""Rusak et al., ImageNet-D, Table 1: number of ImageNet classes an ImageNet-D class maps to -> how many classes."""


def _text(name: str) -> str:
    return resources.files("shiftbench").joinpath(f"data/{name}").read_text(encoding="utf-8")


def _lines(name: str) -> list[str]:
    return [ln for ln in _text(name).splitlines() if ln.strip() and not ln.startswith("#")]


@lru_cache(maxsize=1)
def domainnet_classes() -> tuple[str, ...]:
    """DomainNet's 345 class names; index = the label in the official list files."""
    return tuple(ln.strip() for ln in _lines("domainnet_classes.txt"))


@dataclass(frozen=True)
class ImageNetClass:
    """One ImageNet-1k class: output index of ImageNet models, WordNet id, WordNet 3.0 lemmas."""

    index: int
    wnid: str
    names: tuple[str, ...]

    @property
    def name(self) -> str:
        """The first lemma (e.g. ``"analog clock"``)."""
        return self.names[0]


@lru_cache(maxsize=1)
def imagenet_classes() -> tuple[ImageNetClass, ...]:
    """The 1000 ImageNet-1k classes in index order."""
    out = []
    for ln in _lines("imagenet_classes.txt"):
        idx, wnid, names = ln.split("\t")
        out.append(ImageNetClass(int(idx), wnid, tuple(n.strip() for n in names.split(", "))))
    return tuple(out)


@dataclass(frozen=True, eq=False)
class ImageNetDMapping:
    """The one-to-many mapping of ImageNet-D.

    Attributes:
        classes: ImageNet-D's DomainNet classes, in DomainNet label order.
        targets: for each of them, the accepted ImageNet-1k indices (sorted).
        excluded: DomainNet classes left out on purpose, with the reason.
        provenance: per class, the WordNet senses and corrections that built it.
        digest: SHA-256 of the mapping file (identifies it in the results store).
    """

    classes: tuple[str, ...]
    targets: Mapping[str, tuple[int, ...]]
    excluded: Mapping[str, str]
    provenance: Mapping[str, Mapping[str, Any]]
    digest: str

    @property
    def imagenet_indices(self) -> frozenset[int]:
        """Every ImageNet-1k class some ImageNet-D class maps to ("inside ImageNet-D")."""
        return frozenset(i for t in self.targets.values() for i in t)

    def accepts(self, domainnet_class: str, prediction: int) -> bool:
        """True when ``prediction`` (an ImageNet-1k index) is correct for an image of ``domainnet_class``."""
        return int(prediction) in self._sets()[self._check(domainnet_class)]

    def correct(self, labels: Sequence[str], predictions: Sequence[int]) -> list[bool]:
        """Per image: is the prediction one of the label's ImageNet classes."""
        sets = self._sets()
        return [int(p) in sets[self._check(c)] for c, p in zip(labels, predictions, strict=True)]

    def to_domainnet(self, prediction: int) -> tuple[str, ...]:
        """The ImageNet-D classes an ImageNet-1k prediction maps back to (empty: outside ImageNet-D)."""
        return self._reverse().get(int(prediction), ())

    def statistics(self) -> dict[int, int]:
        """Number of ImageNet classes per ImageNet-D class -> number of such classes (004 Table 1)."""
        c = Counter(len(t) for t in self.targets.values())
        return dict(sorted(c.items()))

    def _check(self, name: str) -> str:
        if name not in self.targets:
            choices = list(self.classes)
            raise UnknownNameError("domainnet_class", name, choices, suggest(name, choices))
        return name

    def __post_init__(self) -> None:
        rev: dict[int, list[str]] = {}
        for c in self.classes:
            for i in self.targets[c]:
                rev.setdefault(i, []).append(c)
        object.__setattr__(self, "_set_cache", {c: frozenset(t) for c, t in self.targets.items()})
        object.__setattr__(self, "_rev_cache", {i: tuple(v) for i, v in rev.items()})

    def _sets(self) -> dict[str, frozenset[int]]:
        return self._set_cache  # type: ignore[attr-defined,no-any-return]

    def _reverse(self) -> dict[int, tuple[str, ...]]:
        return self._rev_cache  # type: ignore[attr-defined,no-any-return]


@lru_cache(maxsize=1)
def load_mapping() -> ImageNetDMapping:
    """The shipped ImageNet-D mapping."""
    text = _text("imagenet_d_mapping.json")
    raw = json.loads(text)
    order = {c: i for i, c in enumerate(domainnet_classes())}
    classes = tuple(sorted(raw["classes"], key=order.__getitem__))
    targets = {c: tuple(int(i) for i in raw["classes"][c]["imagenet"]) for c in classes}
    provenance = {
        c: {k: v for k, v in raw["classes"][c].items() if k not in ("imagenet", "domainnet_index")} for c in classes
    }
    return ImageNetDMapping(
        classes=classes,
        targets=targets,
        excluded=dict(raw.get("excluded", {})),
        provenance=provenance,
        digest=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )
