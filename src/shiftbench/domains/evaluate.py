"""Evaluate an ImageNet-1k classifier on ImageNet-D, storing per-image predictions.

Predictions go to the results store (:class:`shiftbench.evaluation.store.ResultsStore`):
one evaluation (benchmark ``imagenet-d``, options: the mapping's digest) with
one run per domain and one record per image (the DomainNet label, the top-5
ImageNet classes, and whether top-1 is right under the mapping). Every batch is
committed in one transaction, keyed by ``(run, image)``: an interrupted evaluation
resumes where it stopped.

Each image is decoded in place, resized to 256 on its shorter side and centre
cropped to 224 (``shiftbench.preprocess(img, "224")``, the standard ImageNet
recipe), then handed to the classifier, whose own transform normalises it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..editions import preprocess
from ..errors import InvalidArgumentError
from ..evaluation.data import Condition, Item, Source, WorkBatch, read_items, to_tensor
from ..evaluation.protocol import Metric, Summary
from ..evaluation.store import ResultsStore
from ..io import load_image_rgb
from .dataset import DomainNetDataset
from .mapping import (
    DOMAINS,
    MAPPINGS,
    ImageNetDMapping,
    benchmark_name,
    domainnet_classes,
    load_mapping,
    resolve_mapping,
)
from .metrics import (
    FilteredResult,
    PredictionCount,
    alexnet_errors,
    error_analysis,
    filtered_evaluation,
    mean_domain_error,
    rank_correlations,
    topk_domain_error,
)

__all__ = [
    "DomainPredictions",
    "ImageNetDResult",
    "DomainRecords",
    "DomainSource",
    "domain_result",
    "stored_options",
    "stored_domain_errors",
    "stored_error_analysis",
    "stored_scores",
    "stored_correlations",
]

@dataclass
class DomainPredictions:
    """Stored predictions of one domain (rows sorted by image key)."""

    keys: list[str]
    labels: list[str]
    top5: np.ndarray  # N x 5 ImageNet-1k indices
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def top1(self) -> list[int]:
        return [int(v) for v in self.top5[:, 0]] if len(self.keys) else []


@dataclass
class ImageNetDResult(Summary):
    """The outcome of an ImageNet-D evaluation (benchmark ``imagenet-d``).

    Attributes:
        model: model name; ``model_checksum`` identifies its weights.
        data: the dataset's description.
        domains: evaluated domains.
        predictions: per domain, the stored predictions.
        errors: per domain, top-1 error (fraction, one-to-many correctness).
        top5_errors: per domain, top-5 error.
        de: per domain, error / AlexNet's error (Table 2).
        mde: mDE in % (None unless all six domains were evaluated).
        filtered: per domain, Rusak et al. (2022) Table 4 numbers.
        analysis: per domain, the most frequently predicted ImageNet classes (Rusak et al., 2022, Figure 2).
        warnings: counted problems of the data (missing folders, missing listed images, unreadable files).
        evaluation_id: row id in the store (None without a store).
        mapping: the class mapping used (``"paper"``, ``"wordnet"``); stored with the evaluation.
        new_predictions: images predicted in this call (0: all came from the store).
    """

    HEADLINE = (Metric("mde", "lower", "mDE"),)

    model: str
    model_checksum: str
    data: str
    domains: tuple[str, ...]
    predictions: dict[str, DomainPredictions]
    errors: dict[str, float]
    top5_errors: dict[str, float]
    de: dict[str, float]
    mde: float | None
    filtered: dict[str, FilteredResult]
    analysis: dict[str, list[PredictionCount]]
    warnings: list[str]
    evaluation_id: int | None
    store_path: Path | None
    new_predictions: int
    n_images: dict[str, int]
    outside_imagenet_d: dict[str, int] = field(default_factory=dict)
    mapping: str = "paper"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no per-image rows)."""
        return {
            "model": self.model,
            "benchmark": benchmark_name(self.mapping),
            "mapping": self.mapping,
            "model_checksum": self.model_checksum,
            "data": self.data,
            "domains": list(self.domains),
            "n_images": self.n_images,
            "top1_error": self.errors,
            "top5_error": self.top5_errors,
            "de": self.de,
            "mde": self.mde,
            "alexnet_errors": {d: alexnet_errors()[d] for d in self.domains},
            "filtered": {
                d: {"error": f.error, "filtered_error": f.filtered_error, "rejected": f.rejected, "n": f.n}
                for d, f in self.filtered.items()
            },
            "top_predictions": {
                d: [
                    {"rank": p.rank, "index": p.index, "wnid": p.wnid, "name": p.name, "count": p.count,
                     "share": p.share, "inside_imagenet_d": p.inside}
                    for p in rows
                ]
                for d, rows in self.analysis.items()
            },
            "warnings": self.warnings,
            "outside_imagenet_d_images": self.outside_imagenet_d,
            "evaluation_id": self.evaluation_id,
            "store": str(self.store_path) if self.store_path else None,
        }


BENCHMARK = "imagenet-d"


def stored_options(mapping: ImageNetDMapping) -> dict[str, Any]:
    """The stored evaluation's identity besides model and data: the mapping (its digest); labels are DomainNet
    classes (the data's), not classes of the label space."""
    return {"mapping_digest": mapping.digest, "label_classes": "source"}


def _read(item: Item) -> np.ndarray:
    if item.path is None:
        raise OSError(f"image {item.key!r} has no file")
    return np.asarray(preprocess(load_image_rgb(item.path), "224"))


class DomainSource(Source):
    """ImageNet-D's images as a source of the evaluation loop: one condition ``(domain, 0)`` per domain.

    Images are read as published (Resize(256) + CenterCrop(224)); labels are DomainNet class indices.
    """

    kind = "imagenet-d"
    on_the_fly = False

    def __init__(self, data: DomainNetDataset, label_index: dict[str, int], bad_images: str) -> None:
        self.data, self.bad_images = data, bad_images
        self.identity, self.location, self.edition = data.identity, data.describe(), "224"
        self.classes = tuple(label_index)
        self._items = {
            (d, 0): [Item(it.key, label_index[it.cls], it.path) for it in data.items(d)] for d in data.domains
        }

    def conditions(self) -> list[Condition]:
        return list(self._items)

    def items(self, condition: Condition) -> list[Item]:
        return list(self._items[condition])

    def select_classes(self, classes: Sequence[str]) -> None:
        raise InvalidArgumentError("classes", list(classes), "all ImageNet-D classes (the benchmark maps them all)")

    def batches(
        self,
        pending: Mapping[Condition, set[str]],
        *,
        batch_size: int,
        seed: int,
        release: bool,
        stop: threading.Event | None = None,
    ) -> Iterator[WorkBatch]:
        for cond, items in self._items.items():
            want = pending.get(cond) or set()
            todo = [it for it in items if it.key in want]
            for start in range(0, len(todo), batch_size):
                if stop is not None and stop.is_set():
                    return
                arrays, good, bad = read_items(todo[start : start + batch_size], _read, self.bad_images)
                x = to_tensor(arrays) if arrays else torch.zeros((0, 3, 1, 1), dtype=torch.uint8)
                labels = torch.tensor([it.label for it in good], dtype=torch.int64)
                yield WorkBatch(cond, [it.key for it in good], labels, x, bad)


class DomainRecords:
    """ImageNet-D's record writer: top-5 per image, and whether top-1 is right under the mapping (labels are
    DomainNet classes, so the mapping decides)."""

    def __init__(self, ctx: Any, mapping: ImageNetDMapping) -> None:
        self.db, self.run_ids, self.mapping = ctx.db, ctx.run_ids, mapping
        self.names = domainnet_classes()

    def write(self, condition: Condition, batch: WorkBatch, labels: np.ndarray, logits: torch.Tensor | None) -> list[str]:
        top5 = torch.topk(logits, 5, dim=1).indices.tolist() if logits is not None else []
        labs = labels.tolist() if logits is not None else []
        ok = self.mapping.correct([self.names[lab] for lab in labs], [t[0] for t in top5]) if labs else []
        self.db.write_batch(self.run_ids[condition], batch.keys if labs else [], labs, top5, batch.skipped, ok)
        return [*(batch.keys if labs else []), *(k for k, _ in batch.skipped)]


def domain_result(db: ResultsStore, ev: Any, ds: DomainNetDataset, mapping: ImageNetDMapping, top: int) -> ImageNetDResult:
    """ImageNet-D's scores of an evaluation, recomputed from the store (``ev``: the driver's evaluation)."""
    names = domainnet_classes()
    preds: dict[str, DomainPredictions] = {}
    errors: dict[str, float] = {}
    top5e: dict[str, float] = {}
    filt: dict[str, FilteredResult] = {}
    analysis: dict[str, list[PredictionCount]] = {}
    warnings = ds.report.warnings()
    for (d, _), rid in ev.run_ids.items():
        keys, labs, t5, sk = db.top5(rid)
        order = np.argsort(np.asarray(keys, dtype=object)) if keys else np.zeros(0, dtype=np.int64)
        keys = [keys[i] for i in order]
        t5 = np.asarray(t5, dtype=np.int64).reshape(-1, 5)[order] if len(keys) else np.zeros((0, 5), np.int64)
        labels = [names[int(labs[i])] for i in order]
        preds[d] = DomainPredictions(keys, labels, t5, sorted(dict(sk).items()))
        if sk:
            warnings.append(f"{d}: {len(sk)} unreadable image(s) skipped, e.g. {sorted(dict(sk))[0]}")
        if not keys:
            warnings.append(f"{d}: no image could be evaluated")
            continue
        top1 = preds[d].top1
        filt[d] = filtered_evaluation(labels, top1, mapping)
        errors[d] = filt[d].error
        top5e[d] = topk_domain_error(labels, t5.tolist(), mapping)
        analysis[d] = error_analysis(top1, top=top, mapping=mapping)
    base = alexnet_errors()
    clf = ev.classifier
    return ImageNetDResult(
        model=clf.name, model_checksum=clf.checksum, data=ds.describe(), domains=ds.domains, predictions=preds,
        errors=errors, top5_errors=top5e, de={d: errors[d] / base[d] for d in errors},
        mde=mean_domain_error(errors) if all(d in errors for d in DOMAINS) else None, filtered=filt,
        analysis=analysis, warnings=warnings, evaluation_id=ev.id if ev.store is not None else None,
        store_path=ev.store, new_predictions=ev.written, n_images={d: len(preds[d].keys) for d in ds.domains},
        outside_imagenet_d=dict(ds.report.outside_imagenet_d), mapping=mapping.name,
    )


def stored_scores(store: str | Path, mapping: str | ImageNetDMapping | None = None) -> dict[str, dict[str, float]]:
    """Scores of every model in a results store, for rank correlations.

    Returns ``model -> {benchmark: score}`` with ``"IN-D <domain>"`` top-1 errors
    (%), ``"IN-D mDE"`` (when all six domains are stored) and, from the store's
    ImageNet-C evaluations, ``"IN-C mCE"`` and ``"IN clean"`` (%). A model with
    several evaluations keeps the latest of each.
    """
    from ..evaluation.baselines import resolve_baseline
    from ..evaluation.metrics import summarize

    m = resolve_mapping(mapping)  # one mapping: scores of different mappings are not comparable
    path = Path(store)
    out: dict[str, dict[str, float]] = {}
    with ResultsStore(path, create=False) as db:
        for e in db.evaluations():
            if e.benchmark != "imagenet-c":
                continue
            clean, tab, _ = db.error_table(e.id)
            base, _why = resolve_baseline("alexnet", store=db, edition=e.edition, source_kind=e.source_kind)
            s = summarize(e.model, tab, clean, base)
            row = out.setdefault(e.model, {})
            if s.mce is not None:
                row["IN-C mCE"] = 100.0 * s.mce
            if clean is not None:
                row["IN clean"] = 100.0 * clean
    for rec in stored_domain_errors(path, m):
        row = out.setdefault(rec["model"], {})
        for d, e in rec["errors"].items():
            row[f"IN-D {d}"] = 100.0 * e
        if rec["mde"] is not None:
            row["IN-D mDE"] = rec["mde"]
    return out


def stored_domain_errors(store: str | Path, mapping: str | ImageNetDMapping | None = None) -> list[dict[str, Any]]:
    """Stored ImageNet-D evaluations: per-domain top-1 errors and mDE.

    ``mapping`` None gives every evaluation made with a shipped mapping (each record
    says which); a name or object gives only those made with that mapping. Records:
    ``{"evaluation", "model", "data", "images", "mapping", "benchmark", "errors": {domain:
    fraction}, "mde": % or None}`` in evaluation order; mDE is None unless all six domains
    are stored. Evaluations with different mappings score different class sets: never rank
    them together (``benchmark`` is ``imagenet-d`` for the paper's mapping,
    ``imagenet-d:<name>`` otherwise). A store without ImageNet-D tables gives an empty list.
    """
    wanted = [resolve_mapping(mapping)] if mapping is not None else [load_mapping(n) for n in MAPPINGS]
    by_digest = {d: m for m in wanted for d in (*m.previous_digests, m.digest)}
    names = domainnet_classes()
    out: list[dict[str, Any]] = []
    with ResultsStore(Path(store), create=False) as db:
        for ev in db.evaluations_of([BENCHMARK]):
            m = by_digest.get(ev.options.get("mapping_digest", ""))
            if m is None:
                continue
            errs: dict[str, float] = {}
            n = 0
            runs = {r.condition: r for r in db.runs(ev.id)}
            for d in DOMAINS:
                if d not in runs:
                    continue
                _, labels, t5, _ = db.top5(runs[d].id)
                if len(labels):
                    ok = m.correct([names[int(v)] for v in labels], t5[:, 0].tolist())
                    errs[d] = 1.0 - sum(ok) / len(ok)
                    n += len(labels)
            if errs:
                mde = mean_domain_error(errs) if len(errs) == len(DOMAINS) else None
                out.append(
                    {"evaluation": ev.id, "model": ev.model, "data": ev.source, "images": n, "mapping": m.name,
                     "benchmark": benchmark_name(m.name), "errors": errs, "mde": mde}
                )  # fmt: skip
    return out


def stored_error_analysis(
    store: str | Path, evaluation: int, mapping: str | ImageNetDMapping, *, top: int = 10
) -> dict[str, list[PredictionCount]]:
    """Rusak et al. (2022) Figure 2's error analysis of one stored ImageNet-D evaluation: per domain, the most predicted classes.

    ``mapping`` is the one the evaluation was scored with (its record's ``mapping``).
    Domains without stored predictions are left out.
    """
    m = resolve_mapping(mapping)
    out: dict[str, list[PredictionCount]] = {}
    with ResultsStore(Path(store), create=False) as db:
        runs = {r.condition: r for r in db.runs(int(evaluation))}
        for d in DOMAINS:
            if d in runs:
                _, _, t5, _ = db.top5(runs[d].id)
                if len(t5):
                    out[d] = error_analysis(t5[:, 0].tolist(), top=top, mapping=m)
    return out


def stored_correlations(store: str | Path) -> dict[tuple[str, str], tuple[float | None, int]]:
    """Spearman correlation of each ImageNet-D column with the other benchmarks, across stored models."""
    table = stored_scores(store)
    rows = [f"IN-D {d}" for d in DOMAINS] + ["IN-D mDE"]
    cols = ["IN-C mCE", "IN clean"]
    return rank_correlations(table, rows, cols)

