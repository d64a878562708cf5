"""ImageNet-D metrics: domain error, DE, mDE, error analysis, filtered evaluation, rank correlation.

Definitions (Rusak et al., ImageNet-D, section 1 and 2):

* **Top-1 error on a domain** ``E_d``: share of images whose arg-max ImageNet-1k
  class is *not* one of the image's accepted classes (one-to-many mapping).
* **Domain Error** ``DE_d = E_d / E_d(AlexNet)`` with AlexNet's errors of Table 2
  (package data ``imagenet_d_alexnet.json``).
* **mDE** = mean of ``DE_d`` over the six domains, in %. (Equation 1 of the paper
  prints the mean of ``E_d``; its Table 3 is the mean of ``DE_d``, which the tests
  recompute.)
* **Error analysis** (Figure 2): the ImageNet-1k classes predicted most often on a
  domain, each flagged as inside ImageNet-D (some ImageNet-D class maps to it) or
  outside.
* **Filtered evaluation** (Table 4): inputs whose prediction maps to no ImageNet-D
  class are rejected; the filtered error is the error on the remaining inputs and
  the rejected share is reported beside it. The plain error then equals
  ``rejected + (1 - rejected) * filtered``.
* **Spearman rank correlation** between benchmarks across models (section 2).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..evaluation.errors import IncompleteResultsError
from .mapping import DOMAINS, ImageNetDMapping, imagenet_classes, resolve_mapping

__all__ = [
    "alexnet_errors",
    "ALEXNET_SOURCE",
    "domain_error",
    "topk_domain_error",
    "domain_errors_normalised",
    "mean_domain_error",
    "PredictionCount",
    "error_analysis",
    "FilteredResult",
    "filtered_evaluation",
    "spearman",
    "rank_correlations",
    "ConfusionMatrix",
    "confusion_matrix",
    "ImageNetRow",
    "imagenet_filtered_evaluation",
]

ALEXNET_SOURCE = "AlexNet top-1 errors on ImageNet-D, Rusak et al., ImageNet-D, Table 2 (not re-measured)"


@lru_cache(maxsize=1)
def alexnet_errors() -> dict[str, float]:
    """AlexNet's top-1 error per domain (fractions), from the paper's Table 2."""
    raw = json.loads(resources.files("shiftbench").joinpath("data/imagenet_d_alexnet.json").read_text("utf-8"))
    return {d: float(raw["errors"][d]) for d in DOMAINS}


def _labels_preds(labels: Sequence[str], predictions: Sequence[int]) -> tuple[list[str], list[int]]:
    lab, pred = list(labels), [int(p) for p in predictions]
    if len(lab) != len(pred):
        raise InvalidArgumentError("predictions", f"{len(pred)} predictions", f"one per label ({len(lab)})")
    if not lab:
        raise InvalidArgumentError("labels", "[]", "at least one image")
    return lab, pred


def domain_error(labels: Sequence[str], predictions: Sequence[int], mapping: str | ImageNetDMapping | None = None) -> float:
    """Top-1 error (fraction) with one-to-many correctness.

    Args:
        labels: DomainNet class name of each image.
        predictions: arg-max ImageNet-1k index of each image.
        mapping: the class mapping (default: the shipped one).
    """
    m = resolve_mapping(mapping)
    lab, pred = _labels_preds(labels, predictions)
    ok = m.correct(lab, pred)
    return 1.0 - sum(ok) / len(ok)


def topk_domain_error(
    labels: Sequence[str], topk: Sequence[Sequence[int]], mapping: str | ImageNetDMapping | None = None
) -> float:
    """Top-k error: no one of the k best ImageNet-1k classes is accepted for the label."""
    m = resolve_mapping(mapping)
    lab = list(labels)
    if len(lab) != len(topk) or not lab:
        raise InvalidArgumentError("topk", f"{len(topk)} rows", f"one row per label ({len(lab)})")
    hits = sum(any(m.accepts(c, p) for p in row) for c, row in zip(lab, topk, strict=True))
    return 1.0 - hits / len(lab)


def _check_errors(errors: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for d, e in errors.items():
        if d not in DOMAINS:
            raise InvalidArgumentError("errors", d, f"domain names among {', '.join(DOMAINS)}")
        if not isinstance(e, (int, float)) or not 0.0 <= float(e) <= 1.0 or math.isnan(float(e)):
            raise InvalidArgumentError(f"errors[{d!r}]", e, "a top-1 error as a fraction in [0, 1]")
        out[d] = float(e)
    return out


def domain_errors_normalised(
    errors: Mapping[str, float], baseline: Mapping[str, float] | None = None
) -> dict[str, float]:
    """DE per domain: ``errors[d] / baseline[d]`` (default baseline: AlexNet, Table 2)."""
    errs = _check_errors(errors)
    base = _check_errors(baseline) if baseline is not None else alexnet_errors()
    missing = [d for d in errs if d not in base or base[d] <= 0]
    if missing:
        raise IncompleteResultsError(
            "baseline", f"no positive baseline error for {', '.join(missing)}", "a baseline error for every domain"
        )
    return {d: errs[d] / base[d] for d in errs}


def mean_domain_error(
    errors: Mapping[str, float], baseline: Mapping[str, float] | None = None, *, partial: bool = False
) -> float:
    """mDE in %: ``100 * mean_d(errors[d] / baseline[d])`` over the six domains.

    Args:
        errors: top-1 error per domain (fractions).
        baseline: the normalising errors (default: AlexNet, Table 2).
        partial: allow fewer than six domains (the result is then not comparable
            with published mDE values).

    Raises:
        IncompleteResultsError: a domain is missing and ``partial`` is False.
    """
    de = domain_errors_normalised(errors, baseline)
    missing = [d for d in DOMAINS if d not in de]
    if missing and not partial:
        raise IncompleteResultsError(
            "errors",
            f"errors for {len(de)} of 6 domains (missing {', '.join(missing)})",
            "the top-1 error of all six domains",
            "Pass partial=True for a mean over the domains present.",
        )
    if not de:
        raise IncompleteResultsError("errors", "{}", "at least one domain")
    return 100.0 * sum(de.values()) / len(de)


@dataclass(frozen=True)
class PredictionCount:
    """One bar of the error analysis: an ImageNet-1k class and how often it was predicted.

    Attributes:
        rank: 1 for the most frequent.
        index: ImageNet-1k index.
        wnid: its WordNet id.
        name: its first WordNet lemma.
        count: number of images predicted as it.
        share: ``count`` / number of images considered.
        inside: True when the class is inside ImageNet-D (maps to an ImageNet-D class).
        maps_to: the ImageNet-D classes it maps to.
    """

    rank: int
    index: int
    wnid: str
    name: str
    count: int
    share: float
    inside: bool
    maps_to: tuple[str, ...]


def error_analysis(
    predictions: Sequence[int],
    *,
    labels: Sequence[str] | None = None,
    errors_only: bool = False,
    top: int = 10,
    mapping: str | ImageNetDMapping | None = None,
) -> list[PredictionCount]:
    """The ImageNet-1k classes predicted most often (Rusak et al., 2022, Figure 2).

    Args:
        predictions: arg-max ImageNet-1k index per image of one domain.
        labels: DomainNet class per image (needed for ``errors_only``).
        errors_only: count only wrong predictions.
        top: how many classes to return.
        mapping: the class mapping (default: the shipped one).

    Ties are broken by the lower ImageNet index, so the result is deterministic.
    """
    m = resolve_mapping(mapping)
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InvalidArgumentError("top", top, "a positive number of classes")
    preds = [int(p) for p in predictions]
    if errors_only:
        if labels is None:
            raise InvalidArgumentError("labels", None, "the DomainNet label of each image (errors_only=True)")
        lab, preds = _labels_preds(labels, preds)
        preds = [p for c, p in zip(lab, preds, strict=True) if not m.accepts(c, p)]
    n = len(preds)
    names = imagenet_classes()
    inside = m.imagenet_indices
    ranked = sorted(Counter(preds).items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [
        PredictionCount(
            r + 1, i, names[i].wnid, names[i].name, c, c / n if n else 0.0, i in inside, m.to_domainnet(i)
        )
        for r, (i, c) in enumerate(ranked)
    ]


@dataclass(frozen=True)
class FilteredResult:
    """Rusak et al. (2022) Table 4 for one domain.

    Attributes:
        n: images.
        error: plain top-1 error.
        filtered_error: top-1 error on the inputs whose prediction maps to ImageNet-D
            (None when every input was rejected).
        rejected: share of inputs whose prediction maps to no ImageNet-D class.
        n_rejected: their number.
    """

    n: int
    error: float
    filtered_error: float | None
    rejected: float
    n_rejected: int


def filtered_evaluation(
    labels: Sequence[str], predictions: Sequence[int], mapping: str | ImageNetDMapping | None = None
) -> FilteredResult:
    """Top-1 error when predictions outside ImageNet-D are filtered out (Rusak et al., 2022, Table 4)."""
    m = resolve_mapping(mapping)
    lab, pred = _labels_preds(labels, predictions)
    inside = m.imagenet_indices
    ok = m.correct(lab, pred)
    kept = [o for o, p in zip(ok, pred, strict=True) if p in inside]
    n_rej = len(pred) - len(kept)
    return FilteredResult(
        n=len(pred),
        error=1.0 - sum(ok) / len(ok),
        filtered_error=(1.0 - sum(kept) / len(kept)) if kept else None,
        rejected=n_rej / len(pred),
        n_rejected=n_rej,
    )


OUTSIDE = "(outside ImageNet-D)"
"""Column name of :class:`ConfusionMatrix` for predictions that map to no ImageNet-D class."""


@dataclass(frozen=True)
class ConfusionMatrix:
    """True ImageNet-D class x predicted ImageNet-D class (Rusak et al., 2022, section 1: the check of the mapping on "real").

    Attributes:
        classes: row order (ImageNet-D classes); the columns are ``classes`` plus :data:`OUTSIDE`.
        counts: ``len(classes) x (len(classes) + 1)`` image counts.
        ambiguous: predictions that map to several classes, none of them the true one
            (counted in the first in class order; 0 for the paper's mapping, whose sets are disjoint).
    """

    classes: tuple[str, ...]
    counts: np.ndarray
    ambiguous: int = 0

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.classes, OUTSIDE)

    def diagonal_share(self) -> dict[str, float | None]:
        """Per class: the share of its images predicted as an ImageNet class of that class (None: no images)."""
        tot = self.counts.sum(axis=1)
        return {c: (float(self.counts[i, i] / tot[i]) if tot[i] else None) for i, c in enumerate(self.classes)}

    def confusions(self, top: int = 20, *, outside: bool = False) -> list[tuple[str, str, int, float]]:
        """The largest off-diagonal cells ``(true, predicted, count, share of the true class's images)``.

        A large cell between two classes is where a mapping is likely wrong or too narrow
        (e.g. bed images predicted as four-poster, which the published mapping does not accept).
        ``outside=True`` also lists the column of predictions outside ImageNet-D.
        """
        tot = self.counts.sum(axis=1)
        cells = []
        for i, c in enumerate(self.classes):
            for j, p in enumerate(self.columns):
                if i == j or (p == OUTSIDE and not outside) or not self.counts[i, j]:
                    continue
                cells.append((c, p, int(self.counts[i, j]), float(self.counts[i, j] / tot[i])))
        cells.sort(key=lambda t: (-t[2], -t[3], t[0], t[1]))
        return cells[:top]

    def to_rows(self) -> list[dict[str, Any]]:
        """One dict per true class (``class``, ``images``, ``diagonal``, then one count per column)."""
        share = self.diagonal_share()
        return [
            {"class": c, "images": int(self.counts[i].sum()), "diagonal": share[c],
             **{p: int(self.counts[i, j]) for j, p in enumerate(self.columns)}}
            for i, c in enumerate(self.classes)
        ]  # fmt: skip


def confusion_matrix(
    labels: Sequence[str], predictions: Sequence[int], mapping: str | ImageNetDMapping | None = None
) -> ConfusionMatrix:
    """Count how often each ImageNet-D class's images are predicted as each ImageNet-D class.

    ``labels`` are DomainNet folders (merged folders count for their class), ``predictions``
    arg-max ImageNet-1k indices, mapped back with ``mapping.to_domainnet``. Run on the "real"
    domain, the diagonal should hold most images; off-diagonal mass shows ImageNet classes a
    mapping forgot or put in the wrong class (Rusak et al., 2022, section 1).
    """
    m = resolve_mapping(mapping)
    lab, pred = _labels_preds(labels, predictions)
    row = {c: i for i, c in enumerate(m.classes)}
    counts = np.zeros((len(m.classes), len(m.classes) + 1), dtype=np.int64)
    ambiguous = 0
    for c, p in zip(lab, pred, strict=True):
        i = row[m.class_of(c)]
        hit = m.to_domainnet(p)
        if not hit:
            counts[i, -1] += 1
        elif m.classes[i] in hit:
            counts[i, i] += 1
        else:
            ambiguous += len(hit) > 1
            counts[i, row[hit[0]]] += 1
    return ConfusionMatrix(m.classes, counts, ambiguous)


@dataclass(frozen=True)
class ImageNetRow:
    """Rusak et al. (2022) Table 4, first row: ImageNet validation images restricted to the ImageNet-D classes.

    Attributes:
        n_total: validation images read.
        n: those whose ImageNet label maps to an ImageNet-D class (the images scored).
        outside: share of ``n_total`` whose label maps to no ImageNet-D class (Rusak et al. (2022) print 52.7 %).
        error: top-1 error on the ``n`` images, a prediction counting as correct when it is one
            of the ImageNet classes of the label's ImageNet-D class (labels mapped to ImageNet-D).
        filtered_error: the error on those of the ``n`` whose prediction maps to ImageNet-D.
        rejected: share of the ``n`` whose prediction maps to no ImageNet-D class.
    """

    n_total: int
    n: int
    outside: float
    error: float | None
    filtered_error: float | None
    rejected: float | None


def imagenet_filtered_evaluation(
    labels: Sequence[int], predictions: Sequence[int], mapping: str | ImageNetDMapping | None = None
) -> ImageNetRow:
    """Rusak et al. (2022) Table 4's "IN val" row from ImageNet-1k labels and arg-max predictions (both class indices)."""
    m = resolve_mapping(mapping)
    lab, pred = [int(v) for v in labels], [int(v) for v in predictions]
    if len(lab) != len(pred) or not lab:
        raise InvalidArgumentError("predictions", f"{len(pred)} predictions", f"one per label ({len(lab)}), >= 1")
    inside = m.imagenet_indices
    kept = [(y, p) for y, p in zip(lab, pred, strict=True) if y in inside]
    ok = [bool(set(m.to_domainnet(y)) & set(m.to_domainnet(p))) for y, p in kept]
    mapped = [o for o, (_, p) in zip(ok, kept, strict=True) if p in inside]
    n = len(kept)
    return ImageNetRow(
        n_total=len(lab),
        n=n,
        outside=1.0 - n / len(lab),
        error=(1.0 - sum(ok) / n) if n else None,
        filtered_error=(1.0 - sum(mapped) / len(mapped)) if mapped else None,
        rejected=(1.0 - len(mapped) / n) if n else None,
    )


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    xs = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation coefficient (Pearson correlation of average ranks).

    Raises:
        InvalidArgumentError: fewer than 3 pairs, unequal lengths, NaNs, or a
            constant sequence (the coefficient is undefined).
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise InvalidArgumentError("y", f"{b.shape}", f"a sequence as long as x ({a.shape})")
    if len(a) < 3:
        raise InvalidArgumentError("x", f"{len(a)} values", "at least 3 models to rank")
    if np.isnan(a).any() or np.isnan(b).any():
        raise InvalidArgumentError("x", "NaN", "finite values")
    ra, rb = _ranks(a), _ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    den = math.sqrt(float((ra * ra).sum() * (rb * rb).sum()))
    if den == 0:
        raise InvalidArgumentError("x", "a constant sequence", "values that differ between models")
    return float((ra * rb).sum() / den)


def rank_correlations(
    table: Mapping[str, Mapping[str, float]], rows: Sequence[str], columns: Sequence[str]
) -> dict[tuple[str, str], tuple[float | None, int]]:
    """Spearman correlation between benchmark columns across models.

    Args:
        table: model -> benchmark name -> score (errors, mDE, mCE ...).
        rows, columns: benchmark names to correlate pairwise.

    Returns:
        ``(row, column) -> (rho, n_models)``; rho is None when fewer than 3 models
        have both scores or one of them is constant.
    """
    out: dict[tuple[str, str], tuple[float | None, int]] = {}
    for r in rows:
        for c in columns:
            pairs = [(v[r], v[c]) for v in table.values() if r in v and c in v]
            rho: float | None = None
            if len(pairs) >= 3:
                try:
                    rho = spearman([p[0] for p in pairs], [p[1] for p in pairs])
                except InvalidArgumentError:
                    rho = None
            out[(r, c)] = (rho, len(pairs))
    return out
