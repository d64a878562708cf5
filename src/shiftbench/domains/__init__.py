"""ImageNet-D: DomainNet re-mapped to ImageNet-1k classes (Rusak et al., "ImageNet-D: A new challenging
robustness dataset inspired by domain adaptation").

* :func:`load_mapping`: the one-to-many DomainNet -> ImageNet-1k mapping (package data
  built by ``tools/build_imagenet_d_mapping.py`` from WordNet 3.0 plus curated corrections).
* :class:`DomainNetDataset`: the ImageNet-D view of a DomainNet download, read in place.
* :func:`domain_result`: per-domain top-1 error, DE, mDE, error analysis, filtered evaluation, from the store
  (``shiftbench.evaluate(model, benchmark="imagenet-d", data=...)`` runs an evaluation).
* :mod:`shiftbench.domains.metrics`: the metrics on their own; :func:`plot_error_analysis`: the chart.

Command line: ``shiftbench evaluate --benchmark imagenet-d --data /path/to/DomainNet``.
"""

from __future__ import annotations

from .dataset import SPLITS, DomainImage, DomainNetDataset, LoadReport
from .errors import (
    DomainNetLayoutError,
    ListFileError,
    MissingDomainsError,
    MissingImageError,
    UnknownClassFoldersError,
)
from .evaluate import (
    ImageNetDResult,
    domain_result,
    stored_correlations,
    stored_domain_errors,
    stored_error_analysis,
    stored_scores,
)
from .mapping import (
    DEFAULT_MAPPING,
    DOMAINS,
    MAPPINGS,
    PAPER_TABLE1,
    ImageNetClass,
    ImageNetDMapping,
    domainnet_classes,
    imagenet_classes,
    load_mapping,
    resolve_mapping,
)
from .metrics import (
    ConfusionMatrix,
    FilteredResult,
    ImageNetRow,
    PredictionCount,
    alexnet_errors,
    confusion_matrix,
    domain_error,
    domain_errors_normalised,
    error_analysis,
    filtered_evaluation,
    imagenet_filtered_evaluation,
    mean_domain_error,
    rank_correlations,
    spearman,
    topk_domain_error,
)
from .plot import error_analysis_figure, plot_confusion_matrix, plot_error_analysis

__all__ = [
    "DEFAULT_MAPPING",
    "DOMAINS",
    "MAPPINGS",
    "ConfusionMatrix",
    "ImageNetRow",
    "confusion_matrix",
    "imagenet_filtered_evaluation",
    "plot_confusion_matrix",
    "resolve_mapping",
    "PAPER_TABLE1",
    "SPLITS",
    "DomainImage",
    "DomainNetDataset",
    "DomainNetLayoutError",
    "FilteredResult",
    "ImageNetClass",
    "ImageNetDMapping",
    "ImageNetDResult",
    "ListFileError",
    "LoadReport",
    "MissingDomainsError",
    "MissingImageError",
    "PredictionCount",
    "UnknownClassFoldersError",
    "alexnet_errors",
    "domain_error",
    "domain_errors_normalised",
    "domainnet_classes",
    "error_analysis",
    "domain_result",
    "filtered_evaluation",
    "imagenet_classes",
    "load_mapping",
    "mean_domain_error",
    "plot_error_analysis",
    "rank_correlations",
    "spearman",
    "stored_correlations",
    "stored_domain_errors",
    "stored_error_analysis",
    "error_analysis_figure",
    "stored_scores",
    "topk_domain_error",
]
