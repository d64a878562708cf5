"""ImageNet-P metrics as pure functions: flip probability, top-5 distance, FR, T5D, mFR, mT5D.

Conventions (those of the reference ``ImageNet-P/test.py``):

* A video's frames are visited in chains: noise sequences form one chain
  from frame 0 and every frame is compared with frame 0 (the clean image);
  temporal sequences at difficulty d form the chains ``i, i + d, i + 2d, ...``
  for ``i = 0..d-1`` and every frame is compared with the previous one in its
  chain. A video therefore contributes T - 1 (noise) or T - d (temporal)
  comparisons; its score is the mean over them, and a perturbation's score is
  the unweighted mean over videos.
* Ranks are ordinal: rank 1 is the largest logit and ties go to the lower
  class index first (``scipy.stats.rankdata(-logits, method="ordinal")``).
* The top-5 distance of a comparison looks at the reference frame's top-5
  classes only: with sigma(k) the rank, in the compared frame, of the class
  ranked k in the reference frame, ``d = sum_k |k - min(sigma(k), 6)|``.
  Ranks beyond 5 count as 6, so the top-5 lists of both frames determine it.
* FR = FP / FP_AlexNet, T5D = uT5D / uT5D_AlexNet; mFR and mT5D average them
  over the 10 test perturbations. The AlexNet baselines are package data
  (:func:`alexnet_p_baseline`) and exist for the 224 edition at difficulty 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from ..errors import InvalidArgumentError
from ..params import load_json
from ._errors import InvalidDifficultyError
from ._spec import TEST_PERTURBATIONS, check_difficulty, get_perturbation

__all__ = [
    "ranks_from_logits",
    "top5_from_logits",
    "comparison_pairs",
    "flips_per_video",
    "flip_probability",
    "top5_distance",
    "top5_distance_bruteforce",
    "top5_distances_per_video",
    "unnormalized_top5_distance",
    "PBaseline",
    "alexnet_p_baseline",
    "flip_rate",
    "top5_distance_ratio",
    "mean_flip_rate",
    "mean_top5_distance",
]


def _as_numpy(a: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def ranks_from_logits(logits: np.ndarray | torch.Tensor) -> np.ndarray:
    """Ordinal ranks (1 = largest logit, ties to the lower class index) along the last axis.

    Args:
        logits: ... x C scores.

    Returns:
        ... x C int64 ranks in 1..C.
    """
    x = _as_numpy(logits)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise InvalidArgumentError("logits", tuple(x.shape), "an array of shape ... x C with C >= 1")
    order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")
    ranks = np.empty(order.shape, dtype=np.int64)
    np.put_along_axis(ranks, order, np.arange(1, x.shape[-1] + 1, dtype=np.int64) + np.zeros_like(order), axis=-1)
    return ranks


def top5_from_logits(logits: np.ndarray | torch.Tensor) -> np.ndarray:
    """Classes ranked 1..5 (ordinal ranks, ties to the lower index) along the last axis.

    Args:
        logits: ... x C scores with C >= 5.

    Returns:
        ... x 5 int64 class indices, best first.
    """
    if isinstance(logits, torch.Tensor):
        x = logits.detach().to("cpu", torch.float64)
        if x.ndim < 1 or x.shape[-1] < 5:
            raise InvalidArgumentError("logits", tuple(x.shape), "an array of shape ... x C with C >= 5")
        return torch.argsort(-x, dim=-1, stable=True)[..., :5].numpy().astype(np.int64)
    a = np.asarray(logits)
    if a.ndim < 1 or a.shape[-1] < 5:
        raise InvalidArgumentError("logits", tuple(a.shape), "an array of shape ... x C with C >= 5")
    return np.argsort(-a.astype(np.float64), axis=-1, kind="stable")[..., :5].astype(np.int64)


def comparison_pairs(frames: int, noise: bool, difficulty: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Reference and compared frame indices of every comparison of one video.

    Args:
        frames: T, the frames per video.
        noise: noise sequence (compare with frame 0) or temporal (previous frame of the chain).
        difficulty: 1..3, the chain stride of temporal sequences (ignored for noise).

    Returns:
        ``(reference, compared)`` int arrays of length T - 1 (noise) or T - d.
    """
    d = check_difficulty(difficulty)
    if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)) or frames < 2:
        raise InvalidArgumentError("frames", frames, "an integer >= 2")
    t = int(frames)
    if noise:
        cmp = np.arange(1, t)
        return np.zeros_like(cmp), cmp
    if t <= d:
        raise InvalidDifficultyError("difficulty", difficulty, f"a stride below the {t} frames of the video")
    ref: list[int] = []
    cmp_l: list[int] = []
    for start in range(d):
        chain = list(range(start, t, d))
        ref.extend(chain[:-1])
        cmp_l.extend(chain[1:])
    return np.asarray(ref), np.asarray(cmp_l)


def _check_videos(a: np.ndarray, argument: str, tail: tuple[int, ...] = ()) -> np.ndarray:
    want = 2 + len(tail)
    if a.ndim != want or a.shape[1] < 2 or (tail and tuple(a.shape[2:]) != tail):
        shape = "N x T" + "".join(f" x {s}" for s in tail)
        raise InvalidArgumentError(argument, tuple(a.shape), f"an array of shape {shape} with T >= 2")
    return a


def flips_per_video(predictions: np.ndarray | torch.Tensor, noise: bool, difficulty: int = 1) -> np.ndarray:
    """Flip probability of each video: the share of its comparisons whose top-1 class changed.

    Args:
        predictions: N x T top-1 classes.
        noise: noise sequence or temporal sequence.
        difficulty: 1..3.

    Returns:
        N float64 values in [0, 1].
    """
    p = _check_videos(_as_numpy(predictions), "predictions")
    ref, cmp = comparison_pairs(p.shape[1], noise, difficulty)
    return (p[:, ref] != p[:, cmp]).mean(axis=1)


def flip_probability(predictions: np.ndarray | torch.Tensor, noise: bool, difficulty: int = 1) -> float:
    """FP: mean over videos of :func:`flips_per_video`.

    Example:
        >>> flip_probability([[3, 3, 5, 3, 5]], noise=False, difficulty=2)
        0.3333333333333333
    """
    return float(flips_per_video(predictions, noise, difficulty).mean())


def top5_distance(reference_top5: np.ndarray | torch.Tensor, compared_top5: np.ndarray | torch.Tensor) -> np.ndarray:
    """Top-5 distance between frames given their top-5 class lists (vectorised).

    Args:
        reference_top5: ... x 5 classes of the reference frames, best first.
        compared_top5: ... x 5 classes of the compared frames, best first.

    Returns:
        ... int64 distances ``sum_k |k - min(sigma(k), 6)|`` in 0..15.
    """
    r = _as_numpy(reference_top5)
    c = _as_numpy(compared_top5)
    if r.shape != c.shape or r.ndim < 1 or r.shape[-1] != 5:
        raise InvalidArgumentError(
            "compared_top5", f"shapes {tuple(r.shape)} and {tuple(c.shape)}", "two arrays of the same shape ... x 5"
        )
    match = r[..., :, None] == c[..., None, :]  # ... x 5 (reference k) x 5 (compared position)
    pos = np.arange(1, 6)
    sigma = np.where(match.any(axis=-1), (match * pos).sum(axis=-1), 6)
    return np.abs(pos - sigma).sum(axis=-1).astype(np.int64)


def top5_distance_bruteforce(reference_ranks: Sequence[int], compared_ranks: Sequence[int]) -> int:
    """The paper's definition, evaluated literally, for one pair of full rankings.

    ``d = sum_{i=1..5} sum_{j=min(i, sigma(i))+1 .. max(i, sigma(i))} 1(1 <= j - 1 <= 5)``
    with sigma(i) the rank, in the compared frame, of the class ranked i in the
    reference frame.

    Args:
        reference_ranks: rank (1-based) of every class in the reference frame.
        compared_ranks: rank of every class in the compared frame.
    """
    by_rank = {int(r): cls for cls, r in enumerate(reference_ranks)}
    total = 0
    for i in range(1, 6):
        s = int(compared_ranks[by_rank[i]])
        for j in range(min(i, s) + 1, max(i, s) + 1):
            if 1 <= j - 1 <= 5:
                total += 1
    return total


def top5_distances_per_video(top5: np.ndarray | torch.Tensor, noise: bool, difficulty: int = 1) -> np.ndarray:
    """Mean top-5 distance of each video over its comparisons.

    Args:
        top5: N x T x 5 top-5 classes per frame.
        noise: noise sequence or temporal sequence.
        difficulty: 1..3.

    Returns:
        N float64 values.
    """
    t5 = _check_videos(_as_numpy(top5), "top5", (5,))
    ref, cmp = comparison_pairs(t5.shape[1], noise, difficulty)
    return top5_distance(t5[:, ref], t5[:, cmp]).mean(axis=1)


def unnormalized_top5_distance(top5: np.ndarray | torch.Tensor, noise: bool, difficulty: int = 1) -> float:
    """uT5D: mean over videos of :func:`top5_distances_per_video`."""
    return float(top5_distances_per_video(top5, noise, difficulty).mean())


@dataclass(frozen=True)
class PBaseline:
    """Flip probabilities (fractions) and uT5D of a reference model, per perturbation.

    Attributes:
        name: e.g. ``"AlexNet"``.
        fp: perturbation -> flip probability (fraction, not percent).
        ut5d: perturbation -> unnormalised top-5 distance.
        edition: edition the numbers belong to.
        difficulty: difficulty the numbers belong to.
        source: where the numbers come from.
    """

    name: str
    fp: Mapping[str, float]
    ut5d: Mapping[str, float]
    edition: str = "224"
    difficulty: int = 1
    source: str = ""


@lru_cache(maxsize=1)
def alexnet_p_baseline() -> PBaseline:
    """AlexNet's ImageNet-P flip probabilities and uT5D (224 edition, difficulty 1), from package data."""
    doc = load_json("imagenet_p_alexnet.json")
    return PBaseline(
        name="AlexNet",
        fp={k: float(v) / 100.0 for k, v in doc["fp_percent"].items()},
        ut5d={k: float(v) for k, v in doc["ut5d"].items()},
        edition=str(doc["edition"]),
        difficulty=int(doc["difficulty"]),
        source=str(doc["source"]),
    )


def _baseline_value(table: Mapping[str, float], perturbation: str, what: str) -> float:
    name = get_perturbation(perturbation).name
    if name not in table:
        raise InvalidArgumentError("perturbation", perturbation, f"a perturbation with a baseline {what}")
    v = float(table[name])
    if not v > 0:
        raise InvalidArgumentError("baseline", v, f"a positive baseline {what} for {name}")
    return v


def _check_baseline_difficulty(baseline: PBaseline, difficulty: int) -> None:
    d = check_difficulty(difficulty)
    if d != baseline.difficulty:
        raise InvalidDifficultyError(
            "difficulty",
            difficulty,
            f"{baseline.difficulty}: the {baseline.name} baseline exists only at difficulty {baseline.difficulty}",
            "Pass a PBaseline measured at this difficulty.",
        )


def flip_rate(fp: float, perturbation: str, baseline: PBaseline | None = None, difficulty: int = 1) -> float:
    """FR = FP / FP_baseline (AlexNet by default); both FPs are fractions."""
    b = baseline or alexnet_p_baseline()
    _check_baseline_difficulty(b, difficulty)
    return float(fp) / _baseline_value(b.fp, perturbation, "flip probability")


def top5_distance_ratio(ut5d: float, perturbation: str, baseline: PBaseline | None = None, difficulty: int = 1) -> float:
    """T5D = uT5D / uT5D_baseline (AlexNet by default)."""
    b = baseline or alexnet_p_baseline()
    _check_baseline_difficulty(b, difficulty)
    return float(ut5d) / _baseline_value(b.ut5d, perturbation, "top-5 distance")


def _mean_over_test(values: Mapping[str, float], argument: str) -> float:
    names = {get_perturbation(k).name: float(v) for k, v in values.items()}
    missing = [p for p in TEST_PERTURBATIONS if p not in names]
    if missing:
        raise InvalidArgumentError(argument, sorted(names), f"values for all 10 test perturbations (missing {missing})")
    return float(np.mean([names[p] for p in TEST_PERTURBATIONS]))


def mean_flip_rate(fps: Mapping[str, float], baseline: PBaseline | None = None, difficulty: int = 1) -> float:
    """mFR: mean FR over the 10 test perturbations (validation ones in ``fps`` are ignored)."""
    return _mean_over_test({k: flip_rate(v, k, baseline, difficulty) for k, v in fps.items()
                            if get_perturbation(k).split == "test"}, "fps")


def mean_top5_distance(ut5ds: Mapping[str, float], baseline: PBaseline | None = None, difficulty: int = 1) -> float:
    """mT5D: mean T5D over the 10 test perturbations (validation ones are ignored)."""
    return _mean_over_test({k: top5_distance_ratio(v, k, baseline, difficulty) for k, v in ut5ds.items()
                            if get_perturbation(k).split == "test"}, "ut5ds")
