"""ImageNet-P: perturbation sequences and prediction-stability metrics.

Quick start::

    from shiftbench import perturbations as P
    P.list_perturbations("test")                     # the 10 of mFR / mT5D
    frames = P.perturb(photos, "rotate", seed=0)     # B x 31 x 3 x 224 x 224 uint8
    r = shiftbench.evaluate("efficientnet-lite0", "imagenet-p", data="/data/imagenet/val")   # in the results store
"""

from __future__ import annotations

from ._errors import CorruptVideoError, InvalidDifficultyError, UnknownPerturbationError, VideoShapeError
from ._source import PreparedImages, prepare, sequence_memory
from ._spec import (
    P_EDITIONS,
    TEST_PERTURBATIONS,
    VALIDATION_PERTURBATIONS,
    Perturbation,
    check_difficulty,
    get_perturbation,
    list_perturbations,
)
from .metrics import (
    PBaseline,
    alexnet_p_baseline,
    comparison_pairs,
    flip_probability,
    flip_rate,
    flips_per_video,
    mean_flip_rate,
    mean_top5_distance,
    ranks_from_logits,
    top5_distance,
    top5_distance_bruteforce,
    top5_distance_ratio,
    top5_from_logits,
    unnormalized_top5_distance,
)
from .scores import PSummary, SequenceScores, score_top5, summarize_p
from .sequences import perturb, perturb_chunks, sample_sequence_draws
from .video import (
    ImageNetPVideos,
    open_imagenet_p,
    read_cifar_p,
    read_video,
    save_cifar_p,
    save_imagenet_p,
    write_video,
)

_LAZY = {"PEvaluationResult": "pipeline", "p_plan": "pipeline", "p_result": "pipeline", "PEvaluation": "evaluate",
         "evaluate_sequences": "evaluate", "evaluate_released": "evaluate"}


def __getattr__(name: str) -> object:
    """The evaluations (``p_plan``, ``p_result``, and the in-memory ``evaluate_sequences``, ``evaluate_released``, which
    run through the evaluation driver) are imported on first use: they pull in the evaluation package."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "p_plan",
    "p_result",
    "PEvaluationResult",
    "Perturbation",
    "get_perturbation",
    "list_perturbations",
    "check_difficulty",
    "TEST_PERTURBATIONS",
    "VALIDATION_PERTURBATIONS",
    "P_EDITIONS",
    "PreparedImages",
    "prepare",
    "sequence_memory",
    "perturb",
    "sample_sequence_draws",
    "perturb_chunks",
    "evaluate_sequences",
    "evaluate_released",
    "score_top5",
    "summarize_p",
    "PEvaluation",
    "PSummary",
    "SequenceScores",
    "ranks_from_logits",
    "top5_from_logits",
    "comparison_pairs",
    "flips_per_video",
    "flip_probability",
    "top5_distance",
    "top5_distance_bruteforce",
    "unnormalized_top5_distance",
    "PBaseline",
    "alexnet_p_baseline",
    "flip_rate",
    "top5_distance_ratio",
    "mean_flip_rate",
    "mean_top5_distance",
    "write_video",
    "read_video",
    "save_imagenet_p",
    "open_imagenet_p",
    "ImageNetPVideos",
    "save_cifar_p",
    "read_cifar_p",
    "UnknownPerturbationError",
    "InvalidDifficultyError",
    "VideoShapeError",
    "CorruptVideoError",
]
