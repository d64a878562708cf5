"""The shared training harness: seeded, resumable after ``kill -9``, with progress.

:mod:`.loop` is the loop itself (:func:`fit`, :class:`Recipe`, atomic weights-only
checkpoints), :mod:`.models` the architectures (WRN-d-k, the small CNN),
:mod:`.recipes` the structural papers' recipes and :func:`train_classifier`,
which trains one of them on :class:`~shiftbench.structural.LabelledImages`. The
overlap study (:mod:`shiftbench.overlap.harness`) trains through :func:`fit` too.
"""

from __future__ import annotations

from .loop import (
    SCHEDULES,
    EpochLog,
    FitResult,
    Recipe,
    fit,
    load_checkpoint,
    lr_at,
    normaliser,
    random_crop,
    save_checkpoint,
    stream_id,
    tensor_batches,
)
from .models import ARCH_FORMS, SmallCNN, WideResNet, build_network

__all__ = [
    "ARCH_FORMS",
    "SCHEDULES",
    "EpochLog",
    "FitResult",
    "Recipe",
    "SmallCNN",
    "WideResNet",
    "build_network",
    "fit",
    "load_checkpoint",
    "lr_at",
    "normaliser",
    "random_crop",
    "save_checkpoint",
    "stream_id",
    "tensor_batches",
]
