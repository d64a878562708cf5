"""Corruption overlap, benchmark balance and coverage, Algorithm 1 and ImageNet-NOC.

Implements Laugros, Caplier & Ospici, *Increasing the coverage and balance of
robustness benchmarks by using non-overlapping corruptions* (ICLR 2021 submission)
and *Using the overlapping score to improve corruption benchmarks* (ICIP 2021):

* :mod:`.sampling`: :func:`corrupt_candidate`, the papers' mode for the candidate corruptions
  (one value per image drawn from the whole severity range); the candidates themselves are
  operations of the corruption engine (namespace ``"noc"``, :mod:`shiftbench.corruptions.candidates`);
* :mod:`.scores`: robustness score, overlapping score (eq. 2), overlap matrix;
* :mod:`.select`: Algorithm 1 by maximum-clique search;
* :mod:`.analysis`: CE/mCE, balance, coverage, heatmap;
* :mod:`.study_corruptions`: the corruptions of a study (ImageNet-C at drawn or fixed severities,
  candidates, user corruptions) and mixtures;
* :mod:`.calibrate`: severity calibration (the R = 0.95 / 0.5 endpoints of a parameter range);
* :mod:`.harness`: training and testing a study (config, checkpoints, resume, store);
* :mod:`.noc`: ImageNet-NOC and saved benchmarks, and their evaluation.

See ``docs/overlap.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..corruptions.candidates import CANDIDATES, PAPER_CANDIDATES, candidate_names
from . import sampling
from .analysis import (
    Balance,
    Coverage,
    MixtureCoverage,
    balance,
    coverage,
    mean_overlaps,
    mixture_coverage,
    noc_corruption_error,
    noc_mean_corruption_error,
    overlap_block,
    plot_overlap_heatmap,
)
from .calibrate import Calibration, calibrate, calibrate_model, plot_calibration
from .noc import (
    IMAGENET_NOC,
    alexnet_noc_baseline,
    benchmark_from_selection,
    imagenet_noc,
    load_benchmark,
    save_benchmark,
)
from .sampling import corrupt_candidate
from .scores import (
    AccuracyMatrix,
    OverlapMatrix,
    UndefinedOverlapError,
    overlap_matrix,
    overlap_score,
    robustness_score,
)
from .select import Selection, select_benchmark, select_for_thresholds
from .study_corruptions import (
    StudyCorruption,
    apply_corruption,
    mixture,
    register_corruption,
    resolve,
    unregister_corruption,
)

__all__ = [
    "sampling",
    "CANDIDATES",
    "PAPER_CANDIDATES",
    "candidate_names",
    "corrupt_candidate",
    "robustness_score",
    "overlap_score",
    "overlap_matrix",
    "AccuracyMatrix",
    "OverlapMatrix",
    "UndefinedOverlapError",
    "Selection",
    "select_benchmark",
    "select_for_thresholds",
    "Balance",
    "Coverage",
    "balance",
    "coverage",
    "noc_corruption_error",
    "noc_mean_corruption_error",
    "plot_overlap_heatmap",
    "mean_overlaps",
    "overlap_block",
    "MixtureCoverage",
    "mixture_coverage",
    "Calibration",
    "calibrate",
    "calibrate_model",
    "plot_calibration",
    "StudyCorruption",
    "apply_corruption",
    "mixture",
    "register_corruption",
    "resolve",
    "unregister_corruption",
    "IMAGENET_NOC",
    "alexnet_noc_baseline",
    "imagenet_noc",
    "benchmark_from_selection",
    "save_benchmark",
    "load_benchmark",
    "load_config",
    "run_study",
]


def __getattr__(name: str) -> Any:
    """The harness (training) is loaded on first use.

    ``importlib.import_module`` rather than ``from . import harness``: the from-list check of
    the latter asks this package for ``harness`` again, which lands back here (a recursion),
    whereas importing the submodule binds it on the package without asking.
    """
    if name in ("load_config", "run_study", "harness"):
        harness = importlib.import_module(f"{__name__}.harness")
        return harness if name == "harness" else getattr(harness, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
