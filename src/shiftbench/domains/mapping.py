"""The ImageNet-D class mappings: DomainNet classes -> ImageNet-1k classes, one to many.

Two mappings ship as package data; nothing here needs WordNet at run time.

* ``"paper"`` (the default): ImageNet-D as published, 164 classes read from 181 DomainNet
  folders. Built by ``tools/build_imagenet_d_paper_mapping.py``, an independent
  implementation of the authors' rule (a word match of the class names, hand edits in
  ``tools/imagenet_d_paper_edits.tsv``, ambiguous DomainNet classes merged: couch is
  scored as bed, mug and coffee_cup as cup, ...), from the reference code of Rusak et al.
  (github.com/bethgelab/robustness, examples/imagenet_d/map_files.py, commit 67abe10).
  File: ``shiftbench/data/imagenet_d_paper_mapping.json``.
* ``"wordnet"``: a curated variant, 192 classes, each DomainNet class on its own, derived
  from the WordNet 3.0 hierarchy plus ``tools/imagenet_d_corrections.tsv`` by
  ``tools/build_imagenet_d_mapping.py``. File: ``shiftbench/data/imagenet_d_wordnet_mapping.json``.

The name lists they share: ``shiftbench/data/domainnet_classes.txt`` (DomainNet's 345
classes in the label order of its official list files) and
``shiftbench/data/imagenet_classes.txt`` (``index, wnid, names`` of the 1000 ImageNet-1k
classes).

A prediction (an ImageNet-1k index) is correct for an image of DomainNet folder ``f``
when it is one of ``mapping.targets[mapping.class_of(f)]`` (all dog breeds for ``dog``,
all three clocks for ``clock``, ...; Rusak et al., ImageNet-D, section 1).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from ..checks import suggest
from ..errors import InvalidArgumentError, UnknownNameError

__all__ = [
    "DEFAULT_MAPPING",
    "DOMAINS",
    "MAPPINGS",
    "PAPER_TABLE1",
    "ImageNetClass",
    "ImageNetDMapping",
    "domainnet_classes",
    "imagenet_classes",
    "benchmark_name",
    "load_mapping",
    "resolve_mapping",
]

DOMAINS: tuple[str, ...] = ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")
"""DomainNet's six domains (folder names of the download)."""

MAPPINGS: tuple[str, ...] = ("paper", "wordnet")
"""The shipped mappings: ImageNet-D as published, and the WordNet-curated variant."""

DEFAULT_MAPPING = "paper"

_FILES = {"paper": "imagenet_d_paper_mapping.json", "wordnet": "imagenet_d_wordnet_mapping.json"}

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
        name: ``"paper"``, ``"wordnet"``, or a name of your own.
        folders: DomainNet folder -> the ImageNet-D class its images are scored as, for
            every folder read (merged ambiguous classes: ``couch -> bed``); empty means
            each class is its own single folder.
        previous_digests: digests of earlier texts of the same mapping (the same classes, only its notes
            reworded): evaluations stored with them are still read as this mapping's.
    """

    classes: tuple[str, ...]
    targets: Mapping[str, tuple[int, ...]]
    excluded: Mapping[str, str]
    provenance: Mapping[str, Mapping[str, Any]]
    digest: str
    name: str = "custom"
    folders: Mapping[str, str] = field(default_factory=dict)
    previous_digests: tuple[str, ...] = ()

    @property
    def folder_names(self) -> tuple[str, ...]:
        """The DomainNet folders whose images are part of ImageNet-D, in DomainNet label order."""
        return self._folder_order  # type: ignore[attr-defined,no-any-return]

    def class_of(self, folder: str) -> str:
        """The ImageNet-D class the images of a DomainNet folder are scored as (``couch`` -> ``bed``)."""
        return self._check(folder)

    @property
    def imagenet_indices(self) -> frozenset[int]:
        """Every ImageNet-1k class some ImageNet-D class maps to ("inside ImageNet-D")."""
        return frozenset(i for t in self.targets.values() for i in t)

    def accepts(self, domainnet_class: str, prediction: int) -> bool:
        """True when ``prediction`` (an ImageNet-1k index) is correct for an image of ``domainnet_class``.

        ``domainnet_class`` is an ImageNet-D class or a DomainNet folder merged into one.
        """
        return int(prediction) in self._sets()[self._check(domainnet_class)]

    def correct(self, labels: Sequence[str], predictions: Sequence[int]) -> list[bool]:
        """Per image: is the prediction one of the label's ImageNet classes."""
        sets = self._sets()
        return [int(p) in sets[self._check(c)] for c, p in zip(labels, predictions, strict=True)]

    def to_domainnet(self, prediction: int) -> tuple[str, ...]:
        """The ImageNet-D classes an ImageNet-1k prediction maps back to (empty: outside ImageNet-D)."""
        return self._reverse().get(int(prediction), ())

    def statistics(self) -> dict[int, int]:
        """Number of ImageNet classes per ImageNet-D class -> number of such classes (Rusak et al., 2022, Table 1)."""
        c = Counter(len(t) for t in self.targets.values())
        return dict(sorted(c.items()))

    def _check(self, name: str) -> str:
        resolved = self._folder_cache.get(name)  # type: ignore[attr-defined]
        if resolved is None:
            choices = list(self._folder_order)  # type: ignore[attr-defined]
            raise UnknownNameError("domainnet_class", name, choices, suggest(name, choices))
        return resolved  # type: ignore[no-any-return]

    def __post_init__(self) -> None:
        folders = dict(self.folders) or {c: c for c in self.classes}
        for c in self.classes:
            folders.setdefault(c, c)
        bad = sorted(f for f, c in folders.items() if c not in self.targets)
        if bad:
            raise InvalidArgumentError("folders", bad, "DomainNet folders scored as classes of the mapping")
        order = {c: i for i, c in enumerate(domainnet_classes())}
        object.__setattr__(self, "_folder_cache", folders)
        object.__setattr__(
            self, "_folder_order", tuple(sorted(folders, key=lambda f: (order.get(f, len(order)), f)))
        )
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


def load_mapping(name: str = DEFAULT_MAPPING) -> ImageNetDMapping:
    """A shipped ImageNet-D mapping: ``"paper"`` (as published, the default) or ``"wordnet"``.

    Raises:
        UnknownNameError: ``name`` is not one of :data:`MAPPINGS`.
    """
    if name not in _FILES:
        raise UnknownNameError("mapping", name, list(MAPPINGS), suggest(str(name), list(MAPPINGS)))
    return _load(name)


def benchmark_name(mapping: str) -> str:
    """The benchmark name results are ranked under: ``imagenet-d`` (paper mapping) or ``imagenet-d:<mapping>``."""
    return "imagenet-d" if mapping == DEFAULT_MAPPING else f"imagenet-d:{mapping}"


def resolve_mapping(mapping: str | ImageNetDMapping | None) -> ImageNetDMapping:
    """A mapping object from a name (``"paper"``, ``"wordnet"``), an object, or None (the default)."""
    if mapping is None:
        return load_mapping()
    if isinstance(mapping, ImageNetDMapping):
        return mapping
    if isinstance(mapping, str):
        return load_mapping(mapping)
    raise InvalidArgumentError("mapping", mapping, f"one of {', '.join(MAPPINGS)} or an ImageNetDMapping")


@lru_cache(maxsize=4)
def _load(name: str) -> ImageNetDMapping:
    text = _text(_FILES[name])
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
        excluded=dict(raw.get("excluded", raw.get("left_out", {}))),
        provenance=provenance,
        digest=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        name=name,
        folders=dict(raw.get("folders", {})),
        previous_digests=tuple(str(d) for d in raw.get("previous_digests", ())),
    )
