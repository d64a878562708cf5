"""004 Table 4, first row: ImageNet validation images restricted to the ImageNet-D classes.

``shiftbench evaluate --benchmark imagenet-d --data /data/imagenet/val`` (an ImageFolder of
wnid folders) runs the model on the validation images whose label maps to an ImageNet-D
class and reports the error with labels mapped to ImageNet-D, the error on the images whose
prediction maps to ImageNet-D, the rejected share, and the share of validation images outside
ImageNet-D (:func:`shiftbench.domains.metrics.imagenet_filtered_evaluation` does the math).
Predictions are kept in memory, not in the results store.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import torch

from ..errors import DataError, InvalidArgumentError
from ..evaluation.data import CLEAN, ImageFolderSource
from ..evaluation.models import Classifier, imagenet_wnids, load_model
from ..io import scan_image_folder
from .mapping import DOMAINS, ImageNetDMapping, resolve_mapping
from .metrics import ImageNetRow, imagenet_filtered_evaluation

__all__ = ["evaluate_imagenet_val", "is_imagenet_folder"]

_WNID = re.compile(r"^n\d{8}$")


def is_imagenet_folder(path: str | Path) -> bool:
    """True for an ImageFolder of ImageNet wnid folders, or a flat folder of ``<wnid>_*`` images."""
    p = Path(path)
    if not p.is_dir() or p.name in DOMAINS or any((p / d).is_dir() for d in DOMAINS):
        return False
    try:
        _, classes = scan_image_folder(p, arg="data")
    except DataError:
        return False
    return all(_WNID.match(c) for c in classes)


def evaluate_imagenet_val(
    model: str | torch.nn.Module | Classifier = "efficientnet-lite0",
    data: str | Path = "",
    *,
    mapping: str | ImageNetDMapping | None = None,
    weights: str | None = None,
    batch_size: int = 32,
    device: str = "cpu",
    limit: int | None = None,
    bad_images: str = "skip",
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[ImageNetRow, int]:
    """The "IN val" row of 004 Table 4; returns it with the number of unreadable images skipped.

    Raises:
        InvalidArgumentError: ``data`` is not an ImageFolder of ImageNet-1k wnid folders, or
            the model does not output the 1000 ImageNet-1k classes.
    """
    m = resolve_mapping(mapping)
    src = ImageFolderSource(data, limit=limit, bad_images=bad_images)
    wnids = imagenet_wnids()
    index = {w: i for i, w in enumerate(wnids)}
    unknown = [c for c in src.classes if c not in index]
    if unknown:
        raise InvalidArgumentError("data", str(data), f"wnid folders of ImageNet-1k classes (not: {unknown[:5]})")
    label_of = [index[c] for c in src.classes]
    items = src.items(CLEAN)
    inside = m.imagenet_indices
    wanted = {it.key for it in items if label_of[it.label] in inside}
    clf = load_model(model, weights=weights, device=device) if not isinstance(model, Classifier) else model.to(device)
    if clf.classes is not None and tuple(clf.classes) != wnids:
        raise InvalidArgumentError("model", clf.name, "a classifier over the 1000 ImageNet-1k classes in index order")
    labels: list[int] = [label_of[it.label] for it in items if it.key not in wanted]
    preds: list[int] = [-1] * len(labels)  # images outside ImageNet-D: counted, never run
    skipped = 0
    done = 0
    for b in src.batches({CLEAN: wanted}, batch_size=batch_size, seed=0, release=False):
        skipped += len(b.skipped)
        if len(b.keys):
            top1 = clf.logits(b.images).argmax(dim=1).tolist()
            labels += [label_of[int(y)] for y in b.labels.tolist()]
            preds += [int(p) for p in top1]
        done += len(b.keys) + len(b.skipped)
        if progress is not None:
            progress(done, len(wanted), "imagenet-val")
    return imagenet_filtered_evaluation(labels, preds, m), skipped
