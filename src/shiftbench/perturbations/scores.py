"""ImageNet-P's scores of a model from its per-frame top-5 lists: FP, uT5D, FR, T5D per perturbation, mFR and mT5D.

:func:`score_top5` turns the top-5 classes of every frame of N videos (ordinal ranks; the top-1
class is the first) into every metric of one perturbation at one difficulty, normalised by a
baseline (AlexNet's by default, where its edition and difficulty apply); :func:`summarize_p`
averages the 10 test perturbations. The store-backed evaluation
(:mod:`shiftbench.perturbations.pipeline`) and the in-memory one
(:func:`~shiftbench.perturbations.evaluate_sequences`) both score with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError
from ._spec import TEST_PERTURBATIONS, check_difficulty, get_perturbation
from .metrics import PBaseline, alexnet_p_baseline, flips_per_video, top5_distances_per_video

__all__ = ["PSummary", "SequenceScores", "score_top5", "summarize_p"]


@dataclass(frozen=True)
class SequenceScores:
    """Scores of one perturbation at one difficulty.

    Attributes:
        perturbation: name.
        difficulty: 1..3.
        top5: N x T x 5 top-5 classes per frame (int16; column 0 is the prediction).
        fp_per_video: N flip probabilities.
        ut5d_per_video: N mean top-5 distances.
        fp: flip probability (fraction), mean over videos.
        ut5d: unnormalised top-5 distance, mean over videos.
        fr: FP / FP of the baseline (None without a baseline for this edition and difficulty).
        t5d: uT5D / uT5D of the baseline (None likewise).
        frame_accuracy: share of frames whose prediction equals the label (None without labels).
    """

    perturbation: str
    difficulty: int
    top5: np.ndarray
    fp_per_video: np.ndarray
    ut5d_per_video: np.ndarray
    fp: float
    ut5d: float
    fr: float | None
    t5d: float | None
    frame_accuracy: float | None = None

    @property
    def predictions(self) -> np.ndarray:
        """N x T top-1 classes."""
        return self.top5[..., 0].astype(np.int64)


@dataclass(frozen=True)
class PSummary:
    """Aggregates over the 10 test perturbations at one difficulty.

    Attributes:
        difficulty: 1..3.
        mfr: mean flip rate (None unless all 10 were evaluated and normalised).
        mt5d: mean T5D (likewise).
        mean_fp: plain mean FP over the test perturbations evaluated (the
            reference CIFAR-P script's "Mean Flipping Prob").
        perturbations: test perturbations included.
    """

    difficulty: int
    mfr: float | None
    mt5d: float | None
    mean_fp: float | None
    perturbations: tuple[str, ...]


def _resolve_baseline(
    baseline: PBaseline | Mapping[int, PBaseline] | None | bool, edition: str, difficulty: int
) -> PBaseline | None:
    if baseline is False:
        return None
    if baseline is None or baseline is True:
        b = alexnet_p_baseline()
        return b if (b.edition == edition and b.difficulty == difficulty) else None
    if isinstance(baseline, PBaseline):
        return baseline if baseline.difficulty == difficulty else None
    if isinstance(baseline, Mapping):
        return baseline.get(difficulty)
    raise InvalidArgumentError("baseline", type(baseline).__name__, "a PBaseline, a {difficulty: PBaseline} mapping, None or False")


def score_top5(
    top5: np.ndarray,
    perturbation: str,
    difficulty: int = 1,
    *,
    labels: np.ndarray | None = None,
    edition: str = "224",
    baseline: PBaseline | Mapping[int, PBaseline] | None | bool = None,
) -> SequenceScores:
    """All ImageNet-P scores of one perturbation from per-frame top-5 lists.

    Args:
        top5: N x T x 5 classes per frame, best first (ordinal ranks).
        perturbation: name (decides noise vs temporal traversal).
        difficulty: 1..3.
        labels: N true classes (optional; gives the frame accuracy).
        edition: edition of the data (the AlexNet baseline exists for 224 only).
        baseline: None (AlexNet where it applies), False (no normalisation), a
            :class:`PBaseline` or a {difficulty: PBaseline} mapping.
    """
    spec = get_perturbation(perturbation)
    d = check_difficulty(difficulty)
    t5 = np.asarray(top5)
    if t5.ndim != 3 or t5.shape[-1] != 5:
        raise InvalidArgumentError("top5", tuple(t5.shape), "an N x T x 5 array")
    fpv = flips_per_video(t5[..., 0], spec.noise, d)
    utv = top5_distances_per_video(t5, spec.noise, d)
    fp, ut = float(fpv.mean()), float(utv.mean())
    b = _resolve_baseline(baseline, edition, d)
    fr = t5d = None
    if b is not None and spec.name in b.fp and spec.name in b.ut5d:
        fr = fp / float(b.fp[spec.name])
        t5d = ut / float(b.ut5d[spec.name])
    acc = None
    if labels is not None:
        lab = np.asarray(labels).reshape(-1)
        if lab.shape[0] != t5.shape[0]:
            raise InvalidArgumentError("labels", f"{lab.shape[0]} labels", f"one per video ({t5.shape[0]})")
        acc = float((t5[..., 0] == lab[:, None]).mean())
    return SequenceScores(spec.name, d, t5.astype(np.int16), fpv, utv, fp, ut, fr, t5d, acc)


def summarize_p(scores: Iterable[SequenceScores], difficulty: int) -> PSummary:
    """mFR, mT5D and the plain mean FP over the test perturbations scored at ``difficulty``."""
    d = check_difficulty(difficulty)
    by_name = {s.perturbation: s for s in scores if s.difficulty == d and s.perturbation in TEST_PERTURBATIONS}
    names = tuple(p for p in TEST_PERTURBATIONS if p in by_name)
    complete = len(names) == len(TEST_PERTURBATIONS)
    frs = [by_name[p].fr for p in names]
    t5s = [by_name[p].t5d for p in names]
    mfr = float(np.mean(frs)) if complete and all(v is not None for v in frs) else None
    mt5d = float(np.mean(t5s)) if complete and all(v is not None for v in t5s) else None
    mean_fp = float(np.mean([by_name[p].fp for p in names])) if names else None
    return PSummary(d, mfr, mt5d, mean_fp, names)
