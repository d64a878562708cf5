"""Registry of the ImageNet-P perturbations: names, kinds, splits, editions, frame schedules.

Static facts (noise or temporal, test or validation, the papers' order) live in
:data:`_FACTS`; the per-edition frame schedules are package data
(``shiftbench/data/imagenet_p_params.json``) and are read once.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..editions import get_edition
from ..errors import InvalidArgumentError
from ..params import load_json
from ..registry import Registry
from ._errors import InvalidDifficultyError, UnknownPerturbationError

__all__ = [
    "Perturbation",
    "KINDS",
    "SPLITS",
    "P_EDITIONS",
    "TEST_PERTURBATIONS",
    "VALIDATION_PERTURBATIONS",
    "get_perturbation",
    "list_perturbations",
    "resolve_p_edition",
    "check_difficulty",
]

KINDS = ("noise", "temporal")
SPLITS = ("test", "validation")
P_EDITIONS = ("224", "299", "64", "32")
DIFFICULTIES = (1, 2, 3)

# name -> (kind, split); insertion order is the papers' order
_FACTS: dict[str, tuple[str, str]] = {
    "gaussian_noise": ("noise", "test"),
    "shot_noise": ("noise", "test"),
    "motion_blur": ("temporal", "test"),
    "zoom_blur": ("temporal", "test"),
    "snow": ("temporal", "test"),
    "brightness": ("temporal", "test"),
    "translate": ("temporal", "test"),
    "rotate": ("temporal", "test"),
    "tilt": ("temporal", "test"),
    "scale": ("temporal", "test"),
    "speckle_noise": ("noise", "validation"),
    "gaussian_blur": ("temporal", "validation"),
    "spatter": ("temporal", "validation"),
    "shear": ("temporal", "validation"),
}

TEST_PERTURBATIONS: tuple[str, ...] = tuple(n for n, (_, s) in _FACTS.items() if s == "test")
"""The 10 perturbations of the benchmark (mFR and mT5D average over these), in the papers' order."""

VALIDATION_PERTURBATIONS: tuple[str, ...] = tuple(n for n, (_, s) in _FACTS.items() if s == "validation")
"""The 4 validation perturbations."""


@dataclass(frozen=True)
class Perturbation:
    """One ImageNet-P perturbation.

    Attributes:
        name: folder name of the released data, e.g. ``"gaussian_noise"``.
        kind: ``"noise"`` (frame 0 is the clean image, every frame is compared
            with it; difficulties 2 and 3 are stronger noise, separate data) or
            ``"temporal"`` (neighbouring frames are compared; difficulty d
            compares frames d apart of the same sequence).
        split: ``"test"`` (the 10 of mFR/mT5D) or ``"validation"``.
        params: per-edition schedule (frame count and per-frame parameters).
        order: position in the papers' order.
    """

    name: str
    kind: str
    split: str
    params: Mapping[str, Mapping[str, Any]]
    order: int

    @property
    def noise(self) -> bool:
        """True for the noise sequences (compared with frame 0)."""
        return self.kind == "noise"

    @property
    def editions(self) -> tuple[str, ...]:
        """Editions this perturbation is defined for."""
        return tuple(self.params)

    def frames(self, edition: str | int = "224") -> int:
        """Number of frames of one sequence in ``edition``."""
        return int(self.edition_params(edition)["frames"])

    def edition_params(self, edition: str | int) -> Mapping[str, Any]:
        """The schedule of ``edition`` (raises for an edition without one)."""
        ed = resolve_p_edition(edition)
        if ed not in self.params:
            raise InvalidArgumentError("edition", edition, f"one of {list(self.params)} for {self.name}")
        return self.params[ed]

    def difficulties(self, edition: str | int = "224") -> tuple[int, ...]:
        """Difficulty levels: 1..3 for every perturbation (noise: stronger noise; temporal: frame stride)."""
        self.edition_params(edition)
        return DIFFICULTIES

    def generation_level(self, difficulty: int) -> int:
        """The level that selects the frames: the difficulty for noise, always 1 for temporal sequences."""
        return int(difficulty) if self.noise else 1

    def comparisons(self, edition: str | int, difficulty: int) -> int:
        """Frame pairs compared per video: T - 1 for noise, T - d for temporal sequences."""
        t = self.frames(edition)
        return t - 1 if self.noise else t - int(difficulty)


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return {k: _freeze(x) for k, x in v.items()}
    return v


@cache
def _registry() -> Registry[Perturbation]:
    """The perturbations by name, in the papers' order (a :class:`~shiftbench.registry.Registry`, read on first use)."""
    table = load_json("imagenet_p_params.json")["editions"]
    out: dict[str, Perturbation] = {}
    for order, (name, (kind, split)) in enumerate(_FACTS.items()):
        params = {ed: _freeze(table[ed]["perturbations"][name]) for ed in P_EDITIONS if name in table[ed]["perturbations"]}
        out[name] = Perturbation(name=name, kind=kind, split=split, params=params, order=order)
    return Registry("perturbation", normalise=lambda s: str(s).strip().lower().replace("-", "_").replace(" ", "_"),
                    error=UnknownPerturbationError, cutoff=0.5, entries=out)


def resolve_p_edition(edition: str | int) -> str:
    """``224``/``"tiny"``/``"cifar"``/... -> one of :data:`P_EDITIONS`."""
    return get_edition(edition).name


def get_perturbation(name: str) -> Perturbation:
    """The registered perturbation called ``name`` (case, hyphens and spaces are tolerated).

    Raises:
        UnknownPerturbationError: with the list of names and close matches.
    """
    if not isinstance(name, str):
        raise InvalidArgumentError("perturbation", name, "a perturbation name (str)")
    return _registry().get(name)


def list_perturbations(
    pattern: str | list[str] | tuple[str, ...] | None = None,
    *,
    split: str | None = None,
    kind: str | None = None,
    edition: str | int | None = None,
) -> list[str]:
    """Names of ImageNet-P perturbations in the papers' order.

    Args:
        pattern: fnmatch wildcard(s) such as ``"*noise*"``; ``None`` means all.
            The words ``"all"``, ``"test"``, ``"validation"``, ``"noise"`` and
            ``"temporal"`` select groups.
        split: keep only ``"test"`` (the 10) or ``"validation"`` (the 4).
        kind: keep only ``"noise"`` or ``"temporal"`` sequences.
        edition: keep only perturbations defined for this edition.

    Raises:
        UnknownPerturbationError: a plain name (no wildcard) that is not registered.
        InvalidArgumentError: an unknown split or kind.
    """
    reg = _registry()
    if split is not None and split not in SPLITS:
        raise InvalidArgumentError("split", split, f"one of {SPLITS} or None")
    if kind is not None and kind not in KINDS:
        raise InvalidArgumentError("kind", kind, f"one of {KINDS} or None")
    ed = resolve_p_edition(edition) if edition is not None else None
    if pattern is not None and not isinstance(pattern, (str, list, tuple)):
        raise InvalidArgumentError("pattern", pattern, "a name, a wildcard or a list of them")
    patterns = [pattern] if isinstance(pattern, str) else list(pattern or ["*"])
    selected: set[str] = set()
    for raw in patterns:
        if not isinstance(raw, str):
            raise InvalidArgumentError("pattern", raw, "a name or wildcard (str)")
        pat = raw.strip().lower().replace("-", "_").replace(" ", "_")
        if pat in ("all", "*"):
            hits = list(reg)
        elif pat in SPLITS:
            hits = [n for n, p in reg.items() if p.split == pat]
        elif pat in KINDS:
            hits = [n for n, p in reg.items() if p.kind == pat]
        else:
            hits = [n for n in reg if fnmatch.fnmatchcase(n, pat)]
            if not hits and not any(ch in pat for ch in "*?["):
                get_perturbation(raw)  # raises with suggestions
        selected.update(hits)
    return [
        n
        for n, p in reg.items()
        if n in selected
        and (split is None or p.split == split)
        and (kind is None or p.kind == kind)
        and (ed is None or ed in p.params)
    ]


def check_difficulty(difficulty: Any, argument: str = "difficulty") -> int:
    """``difficulty`` as an int after checking it is an integer in 1..3.

    Raises:
        InvalidDifficultyError: anything else (bools and floats included).
    """
    if isinstance(difficulty, bool) or not hasattr(difficulty, "__index__"):
        raise InvalidDifficultyError(argument, difficulty, "an integer in 1..3")
    d = int(difficulty)
    if d not in DIFFICULTIES:
        raise InvalidDifficultyError(argument, difficulty, "an integer in 1..3")
    return d
