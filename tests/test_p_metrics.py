"""ImageNet-P metrics: the spec's worked examples, fast vs brute-force top-5 distance, normalisation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from shiftbench import perturbations as P
from shiftbench.errors import InvalidArgumentError


def _ranks_from_sigma(sigma_head: list[int], n: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Reference ranks = identity; compared ranks put reference class k at rank sigma(k)."""
    ref = np.arange(1, n + 1)
    head = list(sigma_head)
    rest = [r for r in range(1, n + 1) if r not in head]
    cmp = np.array(head + rest[: n - len(head)])
    return ref, cmp


def _top5_of(ranks: np.ndarray) -> np.ndarray:
    return np.argsort(ranks, kind="stable")[:5]


# Draft Appendix C examples (sigma given for the first classes; the rest keep their order)
APPENDIX_C = [
    ([1, 2, 3, 4, 5], 0),
    ([2, 1, 3], 2),
    ([3, 1, 2], 4),
    ([2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 1], 5),
    ([1, 2, 3, 4, 6, 5], 1),
    ([1, 2, 3, 4, 6, 7, 5], 1),
    ([1, 2, 3, 5, 6, 4], 2),
    ([5, 4, 3, 2, 1, 6], 12),
]


@pytest.mark.parametrize(("sigma", "expected"), APPENDIX_C)
def test_appendix_c_examples(sigma: list[int], expected: int) -> None:
    ref, cmp = _ranks_from_sigma(sigma)
    assert P.top5_distance_bruteforce(ref, cmp) == expected
    assert int(P.top5_distance(_top5_of(ref), _top5_of(cmp))) == expected


def test_worked_example_from_logits() -> None:
    # frame A ranks 10, 20, 30, 40, 50 first, everything else tied (class 0 is then rank 6)
    a = np.zeros(100)
    a[[10, 20, 30, 40, 50]] = [5, 4, 3, 2, 1]
    # frame B ranks 20, 10, 30, 50, 60, 40 as 1..6 (class 0 drops to 7)
    b = np.zeros(100)
    b[[20, 10, 30, 50, 60, 40]] = [6, 5, 4, 3, 2, 1]
    ra, rb = P.ranks_from_logits(a), P.ranks_from_logits(b)
    assert ra[0] == 6 and rb[0] == 7
    sigma = [int(rb[c]) for c in np.argsort(ra)[:5]]
    assert sigma == [2, 1, 3, 6, 4]
    assert P.top5_distance_bruteforce(ra, rb) == 5
    assert int(P.top5_distance(P.top5_from_logits(a), P.top5_from_logits(b))) == 5


def test_ranks_are_scipy_ordinal_with_ties() -> None:
    rng = np.random.default_rng(0)
    logits = rng.integers(-3, 4, size=(50, 30)).astype(np.float32)  # many ties
    ours = P.ranks_from_logits(logits)
    ref = np.stack([scipy.stats.rankdata(-row, method="ordinal") for row in logits])
    assert np.array_equal(ours, ref)
    top5 = P.top5_from_logits(logits)
    assert np.array_equal(top5, np.argsort(ref, axis=1)[:, :5])
    import torch

    assert np.array_equal(P.top5_from_logits(torch.from_numpy(logits)), top5)


PREDICTIONS = [[3, 3, 5, 3, 5]]


def test_flip_probability_chains() -> None:
    assert P.flip_probability(PREDICTIONS, noise=False, difficulty=1) == pytest.approx(3 / 4)
    assert P.flip_probability(PREDICTIONS, noise=False, difficulty=2) == pytest.approx(1 / 3)
    assert P.flip_probability(PREDICTIONS, noise=False, difficulty=3) == pytest.approx(1 / 2)
    for d in (1, 2, 3):
        assert P.flip_probability(PREDICTIONS, noise=True, difficulty=d) == pytest.approx(2 / 4)
    ref, cmp = P.comparison_pairs(5, noise=False, difficulty=2)
    assert list(zip(ref.tolist(), cmp.tolist())) == [(0, 2), (2, 4), (1, 3)]


def test_flip_probability_is_mean_over_videos() -> None:
    preds = np.array([[1, 1, 1, 1], [1, 2, 1, 2]])
    assert P.flips_per_video(preds, noise=False).tolist() == [0.0, 1.0]
    assert P.flip_probability(preds, noise=False) == 0.5


def test_ut5d_uses_the_same_traversal() -> None:
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(3, 7, 40))
    top5 = P.top5_from_logits(logits)
    ranks = P.ranks_from_logits(logits)
    for noise in (True, False):
        for d in (1, 2, 3):
            ref, cmp = P.comparison_pairs(7, noise, d)
            brute = np.mean([np.mean([P.top5_distance_bruteforce(ranks[v, r], ranks[v, c]) for r, c in zip(ref, cmp)])
                             for v in range(3)])
            assert P.unnormalized_top5_distance(top5, noise, d) == pytest.approx(brute)


@settings(max_examples=2000, deadline=None)
@given(st.integers(min_value=6, max_value=40).flatmap(lambda n: st.tuples(st.permutations(range(n)), st.permutations(range(n)))))
def test_fast_top5_distance_equals_paper_definition(pair: tuple[list[int], list[int]]) -> None:
    order_a, order_b = (np.asarray(p) for p in pair)  # class orders, best first
    ra = np.empty(len(order_a), dtype=np.int64)
    rb = np.empty(len(order_b), dtype=np.int64)
    ra[order_a] = np.arange(1, len(order_a) + 1)
    rb[order_b] = np.arange(1, len(order_b) + 1)
    assert int(P.top5_distance(order_a[:5], order_b[:5])) == P.top5_distance_bruteforce(ra, rb)


def test_fast_top5_distance_on_1000_classes() -> None:
    rng = np.random.default_rng(2)
    for _ in range(200):
        a = rng.permutation(1000)
        b = a.copy()
        k = rng.integers(1, 12)  # local shuffles so that distances vary
        idx = rng.choice(12, size=k, replace=False)
        b[np.sort(idx)] = b[idx]
        ra, rb = np.empty(1000, int), np.empty(1000, int)
        ra[a], rb[b] = np.arange(1, 1001), np.arange(1, 1001)
        assert int(P.top5_distance(a[:5], b[:5])) == P.top5_distance_bruteforce(ra, rb)


def test_normalisation_and_means() -> None:
    b = P.alexnet_p_baseline()
    assert P.flip_rate(0.2365, "gaussian_noise") == pytest.approx(1.0)
    assert P.top5_distance_ratio(2.95 / 2, "rotate") == pytest.approx(0.5)
    fps = {name: b.fp[name] * 0.5 for name in P.TEST_PERTURBATIONS}
    fps["shear"] = 0.9  # validation perturbations are ignored
    assert P.mean_flip_rate(fps) == pytest.approx(0.5)
    ut = {name: b.ut5d[name] * 0.8 for name in P.TEST_PERTURBATIONS}
    assert P.mean_top5_distance(ut) == pytest.approx(0.8)
    with pytest.raises(InvalidArgumentError, match="missing"):
        P.mean_flip_rate({"rotate": 0.1})
    # the AlexNet numbers are difficulty-1 numbers: no silent normalisation at d > 1
    with pytest.raises(P.InvalidDifficultyError, match="difficulty 1"):
        P.flip_rate(0.1, "rotate", difficulty=2)
    own = P.PBaseline("mine", {"rotate": 0.2}, {"rotate": 2.0}, difficulty=2)
    assert P.flip_rate(0.1, "rotate", own, difficulty=2) == pytest.approx(0.5)


def test_resnet50_published_numbers_are_consistent_with_the_baselines() -> None:
    # mFR is the mean of the per-perturbation FR values (draft Tables 3/4, printed as whole percents)
    from shiftbench.params import load_json

    doc = load_json("imagenet_p_alexnet.json")["published_resnet50"]
    assert np.mean(list(doc["fr"].values())) == pytest.approx(doc["mfr"], abs=0.5)
    assert np.mean(list(doc["t5d"].values())) == pytest.approx(doc["mt5d"], abs=0.5)


def test_bad_metric_inputs() -> None:
    with pytest.raises(InvalidArgumentError, match="predictions"):
        P.flip_probability([1, 2, 3], noise=False)
    with pytest.raises(InvalidArgumentError):
        P.top5_distance(np.zeros((2, 5)), np.zeros((3, 5)))
    with pytest.raises(P.InvalidDifficultyError):
        P.flip_probability([[1, 2]], noise=False, difficulty=2)
    with pytest.raises(P.InvalidDifficultyError):
        P.flip_probability(PREDICTIONS, noise=False, difficulty=4)
