"""The evaluation core: models, data sources, the one loop, the one driver, the one results store.

It names no benchmark. Benchmarks (``shiftbench.benchmarks``) declare their
options, plan and score on :mod:`.protocol`; :mod:`.driver` runs every one of
them; ``shiftbench.evaluate(model, benchmark=...)`` is the one Python call.

Modules: :mod:`.protocol` (Settings, Plan, Summary, Benchmark), :mod:`.driver`
(the lifecycle: model, label space, store, resume, loop, scores), :mod:`.runner`
(the loop), :mod:`.metrics` (CE, mCE, relative mCE as pure functions),
:mod:`.baselines` (AlexNet's published errors), :mod:`.models`, :mod:`.data`,
:mod:`.store` (SQLite results store), :mod:`.report`.
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
from .store import ResultsStore

__all__ = [
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
