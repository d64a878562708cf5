"""Rusak et al.'s (2022) Table 4, first row: ImageNet validation images restricted to the ImageNet-D classes.

``shiftbench evaluate --benchmark imagenet-d --data /data/imagenet/val`` (an ImageFolder of
wnid folders) runs the model on the validation images whose label maps to an ImageNet-D
class and reports the error with labels mapped to ImageNet-D, the error on the images whose
prediction maps to ImageNet-D, the rejected share, and the share of validation images outside
ImageNet-D (:func:`shiftbench.domains.metrics.imagenet_filtered_evaluation` does the math).
The predictions go to a temporary store (the evaluation driver's ``keep=False`` plan), not the results store.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError, InvalidArgumentError
from ..evaluation.data import CLEAN, Condition, ImageFolderSource, Item, Source, WorkBatch
from ..evaluation.models import LabelSpace, imagenet_wnids
from ..evaluation.protocol import Plan, Planned
from ..io import scan_image_folder
from .mapping import DOMAINS, ImageNetDMapping
from .metrics import ImageNetRow, imagenet_filtered_evaluation

__all__ = ["InsideImageNetD", "imagenet_val_plan", "imagenet_val_row", "is_imagenet_folder"]

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


class InsideImageNetD(Source):
    """The validation images whose label maps to an ImageNet-D class (the others are counted, never run)."""

    def __init__(self, images: ImageFolderSource, keys: set[str]) -> None:
        self.images, self.keys = images, keys
        self.kind, self.identity, self.location = images.kind, images.identity, images.location
        self.classes, self.edition, self.on_the_fly = images.classes, images.edition, False

    def conditions(self) -> list[Condition]:
        return [CLEAN]

    def items(self, condition: Condition) -> list[Item]:
        return [it for it in self.images.items(CLEAN) if it.key in self.keys]

    def select_classes(self, classes: Sequence[str]) -> None:
        raise InvalidArgumentError("classes", list(classes), "ImageNet-1k's classes (the IN val row keeps them all)")

    def batches(self, pending: Mapping[Condition, set[str]], *, batch_size: int, seed: int, release: bool,
                stop: threading.Event | None = None) -> Iterator[WorkBatch]:
        return self.images.batches(pending, batch_size=batch_size, seed=seed, release=release, stop=stop)


def imagenet_val_plan(data: str | Path, mapping: ImageNetDMapping, *, limit: int | None, bad_images: str) -> Plan:
    """The "IN val" row of Rusak et al.'s (2022) Table 4 as a plan of the evaluation driver: one pass over the validation images
    inside ImageNet-D, in a temporary store (``keep=False``); :func:`imagenet_val_row` scores it.

    Raises:
        InvalidArgumentError: ``data`` is not an ImageFolder of ImageNet-1k wnid folders.
    """
    src = ImageFolderSource(data, limit=limit, bad_images=bad_images)
    wnids = imagenet_wnids()
    index = {w: i for i, w in enumerate(wnids)}
    unknown = [c for c in src.classes if c not in index]
    if unknown:
        raise InvalidArgumentError("data", str(data), f"wnid folders of ImageNet-1k classes (not: {unknown[:5]})")
    label_of = np.array([index[c] for c in src.classes], dtype=np.int64)
    items = src.items(CLEAN)
    inside = mapping.imagenet_indices
    wanted = {it.key for it in items if int(label_of[it.label]) in inside}
    outside = [int(label_of[it.label]) for it in items if it.key not in wanted]
    return Plan([Planned(CLEAN, InsideImageNetD(src, wanted), "imagenet-val", 0)], "224",
                space=LabelSpace(wnids, None, "model"), label_map=label_of, keep=False,
                describe=lambda c: "imagenet-val", context={"outside": outside, "mapping": mapping, "data": str(data)})


def imagenet_val_row(db: Any, ev: Any) -> tuple[ImageNetRow, int]:
    """The IN val row from the stored predictions (``ev``: the driver's evaluation), and the images skipped."""
    (rid,) = ev.run_ids.values()
    _, labs, t5, skipped = db.top5(rid)
    outside = ev.plan.context["outside"]
    labels = [*outside, *(int(v) for v in labs)]
    preds = [-1] * len(outside) + [int(v) for v in t5[:, 0]] if len(labs) else [-1] * len(outside)
    return imagenet_filtered_evaluation(labels, preds, ev.plan.context["mapping"]), len(skipped)
