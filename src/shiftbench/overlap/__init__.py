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
* :mod:`.harness`: training and testing a study (config, checkpoints, resume, store);
* :mod:`.noc`: ImageNet-NOC and saved benchmarks, and their evaluation.

See ``docs/overlap.md``.
"""

from __future__ import annotations

from typing import Any

from . import sampling
from .analysis import (
    Balance,
    Coverage,
    balance,
    noc_corruption_error,
    coverage,
    noc_mean_corruption_error,
    plot_overlap_heatmap,
)
from ..corruptions.candidates import CANDIDATES, PAPER_CANDIDATES, candidate_names
from .sampling import corrupt_candidate
from .noc import (
    IMAGENET_NOC,
    alexnet_noc_baseline,
    benchmark_from_selection,
    evaluate_noc,
    imagenet_noc,
    load_benchmark,
    save_benchmark,
)
from .scores import (
    AccuracyMatrix,
    OverlapMatrix,
    UndefinedOverlapError,
    overlap_matrix,
    overlap_score,
    robustness_score,
)
from .select import Selection, select_benchmark, select_for_thresholds

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
    "IMAGENET_NOC",
    "alexnet_noc_baseline",
    "imagenet_noc",
    "benchmark_from_selection",
    "save_benchmark",
    "load_benchmark",
    "evaluate_noc",
    "load_config",
    "run_study",
]


def __getattr__(name: str) -> Any:
    # the harness (training) is loaded on first use
    if name in ("load_config", "run_study", "harness"):
        from . import harness

        return harness if name == "harness" else getattr(harness, name)
    raise AttributeError(f"module 'shiftbench.overlap' has no attribute {name!r}")
