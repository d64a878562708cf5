"""Evaluate image classifiers on ImageNet-C and its editions.

Quick start::

    from shiftbench.evaluation import evaluate
    result = evaluate()                      # EfficientNet-Lite0 on foolbox's 20 images (a demo)
    result = evaluate("torchvision:resnet50", data="/data/imagenet/val")
    print(result.summary.mce, result.summary.relative_mce)

Modules: :mod:`.metrics` (CE, mCE, relative mCE as pure functions),
:mod:`.baselines` (AlexNet's published errors), :mod:`.models`, :mod:`.data`,
:mod:`.store` (SQLite results store), :mod:`.runner`, :mod:`.report`.
"""

from __future__ import annotations

from .baselines import alexnet_baseline, load_baseline_file
from .data import (
    ImageFolderSource,
    ReleasedArraySource,
    ReleasedTreeSource,
    foolbox_imagenet,
    open_released,
)
from .metrics import (
    ALL_CORRUPTIONS,
    BENCHMARK_CORRUPTIONS,
    EXTRA_CORRUPTIONS,
    Baseline,
    Summary,
    corruption_error,
    mean_corruption_error,
    relative_corruption_error,
    relative_mean_corruption_error,
    summarize,
)
from .models import Classifier, InputTransform, imagenet_wnids, load_model
from .runner import EvaluationResult, evaluate
from .store import ResultsStore

__all__ = [
    "evaluate",
    "EvaluationResult",
    "load_model",
    "Classifier",
    "InputTransform",
    "imagenet_wnids",
    "ImageFolderSource",
    "ReleasedTreeSource",
    "ReleasedArraySource",
    "foolbox_imagenet",
    "open_released",
    "ResultsStore",
    "Baseline",
    "Summary",
    "alexnet_baseline",
    "load_baseline_file",
    "corruption_error",
    "relative_corruption_error",
    "mean_corruption_error",
    "relative_mean_corruption_error",
    "summarize",
    "BENCHMARK_CORRUPTIONS",
    "EXTRA_CORRUPTIONS",
    "ALL_CORRUPTIONS",
]
