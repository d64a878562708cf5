"""On-the-fly ImageNet-P evaluation with a small deterministic model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shiftbench import perturbations as P
from shiftbench.errors import InvalidArgumentError

from .conftest import sample_paths


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 5, stride=2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(), torch.nn.Linear(128, 20),
    ).eval()


NET = _model()


@torch.no_grad()
def model_fn(x: torch.Tensor) -> torch.Tensor:
    return NET((x.float() - 127.0) / 128.0)


IMAGES = [sample_paths()[i] for i in (0, 1, 2)]


def test_scores_follow_from_frames_and_metrics() -> None:
    res = P.evaluate_sequences(model_fn, IMAGES, [0, 1, 2], ["shot_noise", "rotate"], [1, 2], seed=1, batch_size=7, edition="32")
    assert set(res.scores) == {("shot_noise", 1), ("shot_noise", 2), ("rotate", 1), ("rotate", 2)}
    assert res.frames == 3 * 31 * 3  # shot noise twice (two datasets), rotate once for both strides
    frames = P.perturb(IMAGES, "rotate", seed=1, edition="32")
    logits = model_fn(frames.reshape(-1, 3, 32, 32)).reshape(3, 31, -1)
    top5 = P.top5_from_logits(logits)
    for d in (1, 2):
        s = res.scores[("rotate", d)]
        assert np.array_equal(s.top5, top5)
        assert s.fp == pytest.approx(P.flip_probability(top5[..., 0], noise=False, difficulty=d))
        assert s.ut5d == pytest.approx(P.unnormalized_top5_distance(top5, noise=False, difficulty=d))
        assert s.fr is None  # no AlexNet baseline for the 32 edition
    assert 0.0 <= res.scores[("shot_noise", 1)].frame_accuracy <= 1.0
    assert set(res.timing) == {"generate_s", "model_s", "rank_s", "total_s"}


def test_batch_size_does_not_change_scores() -> None:
    a = P.evaluate_sequences(model_fn, IMAGES[:2], perturbations="translate", batch_size=5, edition="32")
    b = P.evaluate_sequences(model_fn, IMAGES[:2], perturbations="translate", batch_size=64, edition="32")
    assert np.array_equal(a.scores[("translate", 1)].top5, b.scores[("translate", 1)].top5)


def test_224_fr_uses_alexnet_and_summary() -> None:
    res = P.evaluate_sequences(model_fn, IMAGES[:1], perturbations=["translate"], batch_size=41)
    s = res.scores[("translate", 1)]
    assert s.fr == pytest.approx(s.fp / 0.1101) and s.t5d == pytest.approx(s.ut5d / 2.63)
    assert res.summaries[1].mfr is None and res.summaries[1].perturbations == ("translate",)


def test_summary_over_the_ten() -> None:
    b = P.alexnet_p_baseline()
    same = np.broadcast_to(np.arange(5), (1, 5, 5)).copy()
    fake = [P.score_top5(same, n, 1) for n in P.TEST_PERTURBATIONS]
    summ = P.summarize_p(fake, 1)
    assert summ.mfr == 0.0 and summ.mt5d == 0.0 and len(summ.perturbations) == 10
    assert b.fp  # baseline loaded


def test_released_array_evaluation_equals_on_the_fly() -> None:
    frames = P.perturb(IMAGES[:2], "scale", edition="32")
    arr = frames.permute(0, 1, 3, 4, 2).numpy()
    rel = P.evaluate_released(model_fn, arr, "scale", [1, 3], batch_size=16, edition="32")
    fly = P.evaluate_sequences(model_fn, IMAGES[:2], perturbations="scale", difficulty=[1, 3], edition="32")
    for s in rel:
        assert s.fp == fly.scores[("scale", s.difficulty)].fp


def test_bad_arguments() -> None:
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        P.evaluate_sequences(model_fn, IMAGES[:1], perturbations="rotate", batch_size=0, edition="32")
    with pytest.raises(P.InvalidDifficultyError):
        P.evaluate_sequences(model_fn, IMAGES[:1], perturbations="rotate", difficulty=5, edition="32")
    with pytest.raises(P.UnknownPerturbationError):
        P.evaluate_sequences(model_fn, IMAGES[:1], perturbations="rotation", edition="32")
    with pytest.raises(InvalidArgumentError, match="model_fn"):
        P.evaluate_sequences(lambda x: torch.zeros(3), IMAGES[:1], perturbations="rotate", edition="32")
    with pytest.raises(InvalidArgumentError, match="labels"):
        P.evaluate_sequences(model_fn, IMAGES[:1], [1, 2], perturbations="rotate", edition="32")
