"""Hold-out splits of the structural-robustness experiments, as data and plain functions.

A :class:`Split` says which images train the model, which seen images test it
(a held-out share of the seen part, for the in-distribution accuracy) and which
images are *held out* (an unseen style, unseen subtypes or subclasses).

The ICONS-50 splits train on *all* the seen images by default, as the authors' script
does (``hendrycks/robustness``, ``old/Icons-50/train.py``: ``--valid_size`` defaults to 0
and is never used; the training set is every image not held out). Keeping a share of each
seen class out of training to measure the in-distribution accuracy is the named variant
``seen_test_fraction=SEEN_TEST_SHARE`` (10 %, shiftbench's earlier default); without it
the seen accuracy and the gap are not measured.

Matching is exact on metadata fields: a held-out subtype ``books`` takes the
images whose subtype is ``books`` and nothing else. The authors' script
(``hendrycks/robustness``, ``Icons-50/train.py``) instead tests whether the name
occurs anywhere in the file path, so ``books`` and ``monkey`` also take every
image of the classes Books and Monkey, and a style name takes every file whose
path contains it. ``match="paper"`` reproduces that behaviour for comparison.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, UnknownNameError
from ..io import CIFAR100_COARSE_TO_FINE
from ..registry import close_matches
from .readers import CIFAR100_COARSE, CIFAR100_FINE, LabelledImages

__all__ = [
    "Split",
    "PAPER_HELD_OUT_SUBTYPES",
    "CIFAR100_COARSE_TO_FINE",
    "MATCH_MODES",
    "SEEN_TEST_SHARE",
    "default_style",
    "style_holdout",
    "leave_one_style_out",
    "subtype_holdout",
    "random_subtypes",
    "paper_subtypes_for",
    "cifar100_held_out",
    "cifar100_subclass_split",
    "IMAGENET22K_SPLITS",
    "imagenet22k_superclasses",
    "imagenet22k_wnids",
]

MATCH_MODES = ("exact", "paper")

SEEN_TEST_SHARE = 0.1
"""The seen-test variant's share of each seen class kept out of training (shiftbench's earlier default; the
authors' script keeps none: ``seen_test_fraction=0``, the default)."""

# The 50 subtypes held out in the paper's ICONS-50 subtype experiment (Section 4.3), as
# listed in the authors' training script (hendrycks/robustness, Icons-50/train.py,
# ``test_subclasses``), in its order. They are ICONS-50 subtype names (Emojipedia slugs).
PAPER_HELD_OUT_SUBTYPES: tuple[str, ...] = (
    "small_airplane", "top_with_upwards_arrow_above", "soccer_ball", "duck", "hatching_chick",
    "crossed_swords", "passenger_ship", "ledger", "books", "derelict_house_building", "convenience_store",
    "rabbit_face", "cartwheel_type_6", "mantelpiece_clock", "watch", "sun_behind_cloud_with_rain",
    "wine_glass", "face_throwing_a_kiss", "e_mail_symbol", "family_man_boy", "family_man_girl",
    "family_man_boy_boy", "family_man_girl_boy", "family_man_girl_girl", "monorail", "leopard",
    "chequered_flag", "tulip", "womans_sandal", "victory_hand", "womans_hat", "broken_heart",
    "unified_ideograph_5408", "circled_ideograph_accept", "closed_lock_with_key",
    "open_mailbox_with_lowered_flag", "shark", "military_medal", "banknote_with_dollar_sign", "monkey",
    "crescent_moon", "mount_fuji", "mobile_phone_off", "no_smoking_symbol", "glowing_star", "evergreen_tree",
    "umbrella_with_rain_drops", "racing_car", "factory_worker", "pencil",
)  # fmt: skip

# CIFAR-100 coarse label -> its five fine labels, in the order of the authors' subclass
# script (hendrycks/robustness, old/auxiliary/CIFAR100/train.py: the order in which each
# fine class first appears in the training set). Holding out k subclasses per superclass
# takes the first k of each list ("original" order); the script shows k = 1 (index 0 held
# out), and k = 2, 3 extend it to the first two and three. The readers check labels against it,
# so it lives with them in shiftbench.io.

_DEFAULT_STYLES = ("microsoft", "fluent-emoji-high-contrast")


@dataclass(frozen=True)
class Split:
    """A hold-out split: indices into ``train_source`` (training, seen test) and ``test_source`` (held out).

    For single-pool datasets (ICONS-50, emoji-styles) both sources are the same
    object; for CIFAR-100 the training part is the train set and both test parts
    come from the test set.

    Attributes:
        name: e.g. ``"style:microsoft"``, ``"subtype:paper"``, ``"cifar100:k=2"``.
        kind: ``"style"``, ``"subtype"`` or ``"subclass"``.
        held_out: the held-out styles, subtypes or subclass names.
        train_idx / seen_test_idx: into ``train_source`` / ``seen_source``.
        heldout_idx: into ``test_source``.
        info: how the split was made (match mode, seed, fraction...), for result files.
    """

    name: str
    kind: str
    held_out: tuple[str, ...]
    train_source: LabelledImages
    test_source: LabelledImages
    train_idx: np.ndarray
    seen_test_idx: np.ndarray
    heldout_idx: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    seen_source: LabelledImages | None = None

    def train_data(self) -> LabelledImages:
        return self.train_source.subset(self.train_idx)

    def seen_test_data(self) -> LabelledImages:
        return (self.seen_source or self.train_source).subset(self.seen_test_idx)

    def heldout_data(self) -> LabelledImages:
        return self.test_source.subset(self.heldout_idx)

    @property
    def classes(self) -> tuple[str, ...]:
        return self.train_source.classes

    def counts(self) -> dict[str, int]:
        return {"train": len(self.train_idx), "seen_test": len(self.seen_test_idx), "held_out": len(self.heldout_idx)}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "held_out": list(self.held_out), **self.counts(), **self.info}


def _unknown(argument: str, value: str, choices: Iterable[str]) -> UnknownNameError:
    ch = sorted(set(choices))
    return UnknownNameError(argument, value, ch, close_matches(str(value), ch, n=3, cutoff=0.5, substrings=False))


def _stratified_take(labels: np.ndarray, pool: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A seeded share ``fraction`` of ``pool`` per class (at least one image per class with two or more)."""
    out: list[np.ndarray] = []
    for c in np.unique(labels[pool]):
        ids = rng.permutation(pool[labels[pool] == c])
        k = int(round(len(ids) * fraction))
        if k == 0 and len(ids) >= 2 and fraction > 0:
            k = 1
        out.append(ids[:k])
    return np.sort(np.concatenate(out)) if out else np.zeros(0, np.int64)


def _check_fraction(fraction: float) -> float:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction < 1:
        raise InvalidArgumentError("seen_test_fraction", fraction, "a number in [0, 1)")
    return float(fraction)


def _finish(
    name: str,
    kind: str,
    held: Sequence[str],
    data: LabelledImages,
    heldout_mask: np.ndarray,
    fraction: float,
    seed: int,
    info: dict[str, Any],
) -> Split:
    rng = np.random.default_rng([int(seed), 0x5E11])
    seen = np.flatnonzero(~heldout_mask)
    seen_test = _stratified_take(data.labels, seen, _check_fraction(fraction), rng)
    train = np.setdiff1d(seen, seen_test)
    info = {**info, "seed": int(seed), "seen_test_fraction": fraction}
    return Split(name, kind, tuple(held), data, data, train, seen_test, np.flatnonzero(heldout_mask), info)


def _style_column(data: LabelledImages, field_name: str) -> np.ndarray:
    if field_name == "style":
        if data.styles is None:
            raise InvalidArgumentError("field", field_name, "a dataset with styles (ICONS-50, emoji-styles)")
        return data.styles
    if field_name in data.extra:
        return data.extra[field_name]
    raise InvalidArgumentError("field", field_name, f"'style' or one of the metadata columns {sorted(data.extra)}")


def default_style(data: LabelledImages) -> str:
    """The paper's held-out style: ``microsoft`` (ICONS-50); emoji-styles: ``fluent-emoji-high-contrast``.

    The high-contrast Fluent set (thick black outlines) is the emoji-styles set closest to
    the Microsoft icons the paper describes; elsewhere the first style in sorted order.
    """
    if data.styles is None:
        raise InvalidArgumentError("data", data.name, "a dataset with styles (ICONS-50, emoji-styles)")
    have = set(data.styles.tolist())
    for s in _DEFAULT_STYLES:
        if s in have:
            return s
    return sorted(have)[0]


def _path_like(data: LabelledImages) -> np.ndarray:
    """The string the authors' script matched against: the file path (or ``<class>/<style>_<subtype>_<rendition>``)."""
    if "file" in data.extra:
        return data.extra["file"]
    folders = [re.sub(r"\s+", "_", c.lower()) for c in data.classes]
    styles = data.styles if data.styles is not None else np.full(len(data), "")
    rend = data.extra.get("rendition", np.full(len(data), ""))
    return np.array(
        [f"{folders[y]}/{s}_{t}_{r}" for y, s, t, r in zip(data.labels, styles, data.subtypes, rend)], dtype=str
    )


def _check_match(match: str) -> None:
    if match not in MATCH_MODES:
        raise InvalidArgumentError("match", match, "'exact' (metadata fields) or 'paper' (substring of the file path)")


def style_holdout(
    data: LabelledImages,
    style: str | None = None,
    *,
    field: str = "style",
    match: str = "exact",
    seen_test_fraction: float = 0.0,
    seed: int = 0,
) -> Split:
    """Train without one style, test on it (Hendrycks & Dietterich, 2018, Section 4.2).

    Args:
        data: ICONS-50 or emoji-styles.
        style: the held-out style (default :func:`default_style`); with ``field="vendor"``
            a vendor of emoji-styles (``Microsoft`` holds out its three Fluent sets).
        match: ``"exact"`` (the style field equals ``style``) or ``"paper"`` (``style``
            occurs in the file path, as the authors' script tests).
        seen_test_fraction: share of each class of the seen styles kept out of training
            to measure the in-distribution accuracy (seeded); default 0, the authors' script
            (train on all the seen data); :data:`SEEN_TEST_SHARE` is the variant with a share.
    """
    _check_match(match)
    col = _style_column(data, field)
    if style is None:
        style = default_style(data) if field == "style" else sorted(set(col.tolist()))[0]
    if style not in set(col.tolist()):
        raise _unknown(field if field != "style" else "style", style, col.tolist())
    mask = col == style if match == "exact" else np.char.find(_path_like(data).astype(str), style) >= 0
    return _finish(f"{field}:{style}", "style", [style], data, mask, seen_test_fraction, seed, {"match": match, "field": field})


def leave_one_style_out(data: LabelledImages, *, field: str = "style", **kw: Any) -> list[Split]:
    """One :func:`style_holdout` per style (sorted), the same keyword arguments for each."""
    return [style_holdout(data, s, field=field, **kw) for s in sorted(set(_style_column(data, field).tolist()))]


def random_subtypes(data: LabelledImages, *, per_class: int = 1, seed: int = 0, min_left: int = 1) -> list[str]:
    """A seeded choice of ``per_class`` subtypes in every class that keeps ``min_left`` others for training."""
    if isinstance(per_class, bool) or not isinstance(per_class, int) or per_class < 1:
        raise InvalidArgumentError("per_class", per_class, "an integer >= 1")
    rng = np.random.default_rng([int(seed), 0x5B7])
    out: list[str] = []
    for c in range(len(data.classes)):
        subs = sorted(set(data.subtypes[data.labels == c].tolist()))
        if len(subs) >= per_class + min_left:
            out += [subs[i] for i in sorted(rng.choice(len(subs), per_class, replace=False))]
    return out


def _norm_subtype(s: str) -> str:
    return re.sub(r"[\s_\-’']+", " ", s.lower()).strip()


def paper_subtypes_for(data: LabelledImages) -> tuple[list[str], list[str]]:
    """The paper's held-out subtypes that ``data`` has, compared ignoring case, ``_``, ``-`` and apostrophes.

    Returns ``(found, missing)``: the matching subtype names of ``data`` and the paper's
    names with no counterpart (emoji-styles uses CLDR names, ICONS-50 older Emojipedia ones).
    """
    have: dict[str, str] = {}
    for s in sorted(set(data.subtypes.tolist())):
        have.setdefault(_norm_subtype(s), s)
    found, missing = [], []
    for s in PAPER_HELD_OUT_SUBTYPES:
        (found.append(have[_norm_subtype(s)]) if _norm_subtype(s) in have else missing.append(s))
    return found, missing


def subtype_holdout(
    data: LabelledImages,
    subtypes: Sequence[str] | str = "paper",
    *,
    match: str = "exact",
    seen_test_fraction: float = 0.0,
    seed: int = 0,
) -> Split:
    """Train on the other subtypes of every class, test on the held-out ones (Hendrycks & Dietterich, 2018,
    Section 4.3). ``seen_test_fraction`` as :func:`style_holdout` (default 0: all the seen data trains).

    Args:
        subtypes: the held-out subtype names; ``"paper"``: the paper's 50
            (:data:`PAPER_HELD_OUT_SUBTYPES`; on a dataset other than ICONS-50, those of
            them it has, see :func:`paper_subtypes_for`); ``"random"``: one seeded subtype
            per class (:func:`random_subtypes`).
        match: ``"exact"`` (the subtype field equals a held-out name) or ``"paper"`` (a
            held-out name occurs in the file path: ``books`` and ``monkey`` then also take
            the classes Books and Monkey, as in the authors' script).
    """
    _check_match(match)
    have = set(data.subtypes.tolist())
    if isinstance(subtypes, str):
        if subtypes == "paper":
            held = list(PAPER_HELD_OUT_SUBTYPES) if match == "paper" else paper_subtypes_for(data)[0]
            how = "paper"
        elif subtypes == "random":
            held, how = random_subtypes(data, seed=seed), "random"
        else:
            raise InvalidArgumentError("subtypes", subtypes, "'paper', 'random' or a list of subtype names")
    else:
        held, how = list(subtypes), "given"
        if not held:
            raise InvalidArgumentError("subtypes", held, "at least one subtype name")
        for s in held:
            if s not in have:
                raise _unknown("subtypes", s, have)
    if not held:
        raise InvalidArgumentError("subtypes", subtypes, "names of which the dataset has at least one")
    if match == "exact":
        mask = np.isin(data.subtypes, np.array(held, dtype=str))
    else:
        path = _path_like(data).astype(str)
        mask = np.zeros(len(data), bool)
        for s in held:
            mask |= np.char.find(path, s) >= 0
    left = set(data.labels[~mask].tolist())
    info = {"match": match, "subtypes": how, "classes_without_training_images": [data.classes[c] for c in sorted(set(data.labels.tolist()) - left)]}
    return _finish(f"subtype:{how}", "subtype", held, data, mask, seen_test_fraction, seed, info)


def cifar100_held_out(k: int, *, order: str = "original", seed: int = 0) -> dict[int, tuple[int, ...]]:
    """Coarse label -> the ``k`` held-out fine labels (``order="original"``: the first k of
    :data:`CIFAR100_COARSE_TO_FINE`; ``"random"``: k seeded per superclass)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= int(k) <= 3:
        raise InvalidArgumentError("k", k, "1, 2 or 3 held-out subclasses per superclass (the paper's settings)")
    k = int(k)
    if order == "original":
        return {c: f[:k] for c, f in CIFAR100_COARSE_TO_FINE.items()}
    if order == "random":
        rng = np.random.default_rng([int(seed), 0xC100])
        return {c: tuple(int(x) for x in sorted(rng.choice(np.array(f), k, replace=False))) for c, f in CIFAR100_COARSE_TO_FINE.items()}
    raise InvalidArgumentError("order", order, "'original' (the authors' order) or 'random' (seeded)")


def cifar100_subclass_split(
    train: LabelledImages, test: LabelledImages, k: int, *, order: str = "original", seed: int = 0
) -> Split:
    """CIFAR-100 subclass robustness: train the 20-superclass classifier on the train images of the
    seen subclasses; the seen test accuracy on their test images; the held-out accuracy on the test
    images of the ``k`` held-out subclasses per superclass."""
    held = cifar100_held_out(k, order=order, seed=seed)
    for part, d in (("train", train), ("test", test)):
        if "fine_label" not in d.extra or d.classes != CIFAR100_COARSE:
            raise InvalidArgumentError(part, d.name, "CIFAR-100 read by read_cifar100 (coarse labels, fine_label column)")
    out = np.array(sorted(x for f in held.values() for x in f))
    tr_out = np.isin(train.extra["fine_label"], out)
    te_out = np.isin(test.extra["fine_label"], out)
    names = tuple(CIFAR100_FINE[x] for x in out)
    info = {"k": int(k), "order": order, "seed": int(seed)}
    return Split(
        f"cifar100:k={int(k)}",
        "subclass",
        names,
        train,
        test,
        np.flatnonzero(~tr_out),
        np.flatnonzero(~te_out),
        np.flatnonzero(te_out),
        info,
        seen_source=test,
    )


IMAGENET22K_SPLITS = {
    "authors": "imagenet22k_authors.json",
    "wordnet": "imagenet22k_subclasses.json",
}
"""The ImageNet-22K subclass splits: ``authors`` (the default: the lists of Hendrycks & Dietterich's own
scripts, ``old/auxiliary/ImageNet22K/train.py`` and ``test.py``, shipped by
``tools/build_imagenet22k_authors_split.py``) and ``wordnet`` (built from WordNet 3.0 by
``tools/build_imagenet22k_split.py``: the synsets strictly below each superclass; 24 of 25 seen lists equal, the
unseen lists lack the superclass synsets the authors include and add 53 synsets theirs lack)."""


def _check_22k_split(split: str) -> str:
    if split not in IMAGENET22K_SPLITS:
        raise InvalidArgumentError("split", split, f"one of {', '.join(IMAGENET22K_SPLITS)} (authors: Hendrycks & Dietterich's lists)")
    return split


def imagenet22k_superclasses(split: str = "authors") -> list[dict[str, Any]]:
    """The 25 ImageNet-22K superclasses (Appendix G) with their ``seen`` (ImageNet-1K) and ``unseen``
    (ImageNet-22K only) subclass wnids, in the order of :data:`IMAGENET22K_SPLITS` ``[split]``."""
    import json
    from importlib import resources

    name = IMAGENET22K_SPLITS[_check_22k_split(split)]
    doc = json.loads(resources.files("shiftbench").joinpath("data", name).read_text(encoding="utf-8"))
    return list(doc["superclasses"])


def imagenet22k_wnids(part: str, split: str = "authors") -> dict[str, str]:
    """Subclass wnid -> superclass name for ``part`` ``"seen"`` or ``"unseen"`` (for :func:`read_wnid_tree`).

    A wnid listed under two superclasses belongs to the first, as the authors' scripts assign it.
    """
    if part not in ("seen", "unseen"):
        raise InvalidArgumentError("part", part, "'seen' (ImageNet-1K subclasses) or 'unseen' (ImageNet-22K only)")
    out: dict[str, str] = {}
    for s in imagenet22k_superclasses(split):
        for w in s[part]:
            out.setdefault(w, s["name"])
    return out
