"""Scoring a trained model on a hold-out split: per-item predictions and the metrics.

The metrics of every hold-out experiment (paper Section 4):

* ``heldout_accuracy``: accuracy on the held-out part (unseen style, subtypes, subclasses);
  the number the paper reports (57 % Microsoft, 60.4 % ICONS-50 subtypes, 40.9 / 26.78 /
  25.3 % CIFAR-100 k = 1 / 2 / 3);
* ``seen_accuracy``: accuracy on the held-out share of the seen part (in distribution); None when no share
  was kept out (the default of the ICONS-50 splits: the authors' script trains on all the seen data);
* ``gap`` = seen - held out, in accuracy points (0..1); None without a seen share;
* ``per_group``: held-out accuracy per held-out style or subtype.

These are plain functions on arrays so that a benchmark module can call them with
predictions it computed itself (:func:`score`), or let :func:`evaluate_split` run the model
(:func:`predict`: a run of the evaluation driver over a :class:`PartSource`, as the benchmarks' are).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..errors import InvalidArgumentError, MissingDependencyError
from ..evaluation.data import Condition, Item, Source, WorkBatch
from ..evaluation.driver import run_plan
from ..evaluation.models import Classifier, LabelSpace
from ..evaluation.protocol import Plan, Planned
from .readers import LabelledImages
from .splits import Split

__all__ = ["ItemPredictions", "HoldoutScore", "PartSource", "predict", "score", "evaluate_split", "plot_seen_unseen"]


@dataclass
class ItemPredictions:
    """One part's predictions, item by item (index into the split's source, true and predicted label)."""

    part: str  # "held_out" or "seen_test"
    index: np.ndarray
    label: np.ndarray
    predicted: np.ndarray
    group: np.ndarray  # style (style hold-outs) or subtype of each item

    @property
    def correct(self) -> np.ndarray:
        return self.label == self.predicted

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"part": self.part, "index": int(i), "label": int(y), "predicted": int(p), "group": str(g)}
            for i, y, p, g in zip(self.index, self.label, self.predicted, self.group)
        ]


@dataclass
class HoldoutScore:
    split: str
    kind: str
    held_out: list[str]
    heldout_accuracy: float
    seen_accuracy: float | None
    gap: float | None
    n_heldout: int
    n_seen: int
    per_group: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _acc(p: ItemPredictions) -> float:
    return float(p.correct.mean()) if len(p.label) else float("nan")


def score(split: Split, heldout: ItemPredictions, seen: ItemPredictions) -> HoldoutScore:
    """The metrics from the predictions of the two test parts of ``split``."""
    if len(heldout.index) != len(split.heldout_idx) or len(seen.index) != len(split.seen_test_idx):
        raise InvalidArgumentError(
            "predictions", f"{len(heldout.index)} held-out / {len(seen.index)} seen items",
            f"{len(split.heldout_idx)} held-out and {len(split.seen_test_idx)} seen-test items (the split's parts)",
        )
    groups = {}
    for g in sorted(set(heldout.group.tolist())):
        m = heldout.group == g
        groups[g] = float(heldout.correct[m].mean())
    h = _acc(heldout)
    s = _acc(seen) if len(seen.index) else None  # no seen share kept out of training: nothing to measure
    return HoldoutScore(split.name, split.kind, list(split.held_out), h, s, None if s is None else s - h,
                        len(heldout.index), len(seen.index), groups)


class PartSource(Source):
    """One part of a split (its held-out or seen test images) as a source of the shared evaluation loop.

    One condition, ``(<part>:<split>, 0)``; items are keyed by the image's index in the split's
    source (the store's item ids); the images are resized to the model's input side here (Pillow
    bilinear; ``size`` None: as they are), so a Ray worker that gets this source only batches and predicts them.
    """

    kind = "structural-part"
    on_the_fly = False
    edition = ""

    def __init__(self, condition: Condition, data: LabelledImages, index: Sequence[int], size: int | None) -> None:
        sub = data.subset(np.asarray(index, np.int64))
        sub = sub.resized(size) if size and len(sub) else sub
        self.condition = condition
        self.keys = [str(int(i)) for i in index]
        self.images, self.labels = sub.images, sub.labels
        self.classes = data.classes
        self.identity = self.location = f"{data.name}|{condition[0]}"

    def conditions(self) -> list[Condition]:
        return [self.condition]

    def items(self, condition: Condition) -> list[Item]:
        return [Item(k, int(lab)) for k, lab in zip(self.keys, self.labels, strict=True)] if condition == self.condition else []

    def content_digest(self) -> str:
        """The part's pixels, labels and keys (read into memory already)."""
        import hashlib

        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.images).tobytes())
        h.update(np.ascontiguousarray(self.labels, dtype=np.int64).tobytes())
        h.update("\n".join(self.keys).encode())
        return "pixels:" + h.hexdigest()

    def select_classes(self, classes: Sequence[str]) -> None:
        raise InvalidArgumentError("classes", list(classes), "the split model's own classes (hold-outs keep all of them)")

    def batches(self, pending: Mapping[Condition, set[str]], *, batch_size: int, seed: int, release: bool,
                stop: threading.Event | None = None) -> Iterator[WorkBatch]:
        want = pending.get(self.condition) or set()
        rows = [i for i, k in enumerate(self.keys) if k in want]
        for a in range(0, len(rows), batch_size):
            if stop is not None and stop.is_set():
                return
            sel = rows[a : a + batch_size]
            x = torch.from_numpy(np.ascontiguousarray(self.images[sel].transpose(0, 3, 1, 2)))
            yield WorkBatch(self.condition, [self.keys[i] for i in sel],
                            torch.from_numpy(self.labels[sel].astype(np.int64)), x)


class _Top1:
    """The record writer of :func:`predict`: each item's top-1 class (the argmax of its logits), kept in memory."""

    def __init__(self, out: np.ndarray) -> None:
        self.out = out

    def write(self, condition: Condition, batch: WorkBatch, labels: np.ndarray, logits: torch.Tensor | None) -> list[str]:
        if logits is None:
            return []
        self.out[np.array([int(k) for k in batch.keys], dtype=np.int64)] = logits.argmax(1).numpy()
        return list(batch.keys)


def predict(
    net: nn.Module,
    data: LabelledImages,
    *,
    mean: Sequence[float],
    std: Sequence[float],
    image_size: int | None = None,
    batch_size: int = 256,
    device: str | torch.device = "cpu",
) -> np.ndarray:
    """The predicted label of every image of ``data`` (``net`` in eval mode, inputs normalised).

    A run of the evaluation driver (:func:`~shiftbench.evaluation.driver.run_plan`) in a temporary store: the
    images (resized to ``image_size``, Pillow bilinear) in batches of ``batch_size`` through ``net`` on ``device``.
    """
    from ..training.loop import normaliser

    out = np.zeros(len(data), np.int64)
    if not len(data):
        return out
    cond = ("predict", 0)
    clf = Classifier(net, name=type(net).__name__, transform=normaliser(mean, std), checksum="in-memory")
    plan = Plan([Planned(cond, PartSource(cond, data, range(len(data)), image_size))], str(image_size or ""),
                space=LabelSpace((), None, "outputs"), label_map=np.arange(max(1, len(data.classes)), dtype=np.int64),
                check_absent=False, model=clf, writer=lambda ctx: _Top1(out), prefetch=False)
    run_plan(plan, lambda db, ev: None, name="structural predict", device=str(torch.device(device)),
             batch_size=batch_size)
    return out


def _groups(split: Split, source: LabelledImages, idx: np.ndarray) -> np.ndarray:
    if split.kind == "style":
        col = source.styles if split.info.get("field", "style") == "style" else source.extra[split.info["field"]]
        assert col is not None
        return col[idx]
    return source.subtypes[idx]


def evaluate_split(
    model: Any,
    split: Split,
    *,
    batch_size: int = 256,
    device: str | torch.device = "cpu",
    predict_fn: Callable[[LabelledImages], np.ndarray] | None = None,
) -> tuple[HoldoutScore, dict[str, ItemPredictions]]:
    """Run ``model`` on the split's held-out and seen-test parts; return the score and per-item predictions.

    ``model`` is a :class:`~shiftbench.training.TrainedModel` (its spec gives the input size and
    normalisation) unless ``predict_fn`` (images -> labels) is given.
    """
    if predict_fn is None:
        if tuple(model.classes) != tuple(split.classes):
            raise InvalidArgumentError("model", "its classes", "the classes of the split it is evaluated on")
        r = model.spec.recipe

        def predict_fn(d: LabelledImages) -> np.ndarray:
            return predict(model.net, d, mean=r.mean, std=r.std, image_size=model.image_size, batch_size=batch_size, device=device)

    parts: dict[str, ItemPredictions] = {}
    for part, source, idx in (
        ("held_out", split.test_source, split.heldout_idx),
        ("seen_test", split.seen_source or split.train_source, split.seen_test_idx),
    ):
        d = source.subset(idx)
        pred = predict_fn(d) if len(d) else np.zeros(0, np.int64)
        parts[part] = ItemPredictions(part, idx, d.labels, np.asarray(pred, np.int64), _groups(split, source, idx))
    return score(split, parts["held_out"], parts["seen_test"]), parts


def plot_seen_unseen(rows: Sequence[dict[str, Any]], path: str | Path, *, title: str | None = None) -> Path:
    """The paper's Figure 6: seen and unseen subclass accuracy of each model against its ImageNet-1K accuracy.

    ``rows``: ``{"model": name, "imagenet_accuracy": a, "seen": s, "unseen": u}`` (fractions 0..1).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise MissingDependencyError("matplotlib", "the seen/unseen subclass figure", "plot") from e
    if not rows:
        raise InvalidArgumentError("rows", rows, "at least one model's accuracies")
    for r in rows:
        for k in ("model", "imagenet_accuracy", "seen", "unseen"):
            if k not in r:
                raise InvalidArgumentError("rows", r, "dicts with model, imagenet_accuracy, seen, unseen")
    rows = sorted(rows, key=lambda r: r["imagenet_accuracy"])
    x = [100 * r["imagenet_accuracy"] for r in rows]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.plot(x, [100 * r["seen"] for r in rows], "o-", label="seen subclasses")
    ax.plot(x, [100 * r["unseen"] for r in rows], "s--", label="unseen subclasses")
    for xi, r in zip(x, rows):
        ax.annotate(str(r["model"]), (xi, 100 * r["unseen"]), textcoords="offset points", xytext=(3, -10), fontsize=7)
    ax.set_xlabel("ImageNet-1K accuracy (%)")
    ax.set_ylabel("superclass accuracy (%)")
    ax.set_title(title or "Subclass robustness (25 ImageNet-22K superclasses)")
    ax.grid(alpha=0.3)
    ax.legend()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p
