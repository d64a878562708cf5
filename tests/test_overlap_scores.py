"""Robustness and overlapping scores (003 eq. 2), Algorithm 1 against brute force, bad inputs."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shiftbench.errors import InvalidArgumentError, UnknownCorruptionError
from shiftbench.overlap import (
    AccuracyMatrix,
    OverlapMatrix,
    UndefinedOverlapError,
    coverage,
    overlap_matrix,
    overlap_score,
    robustness_score,
    select_benchmark,
    select_for_thresholds,
)
from shiftbench.overlap.select import maximum_cliques, mean_overlap


def acc(rows: dict[str, dict[str, float]]) -> AccuracyMatrix:
    return AccuracyMatrix.from_dict(rows)


def test_robustness_score() -> None:
    assert robustness_score(0.45, 0.9) == pytest.approx(0.5)
    with pytest.raises(InvalidArgumentError, match="accuracy_clean"):
        robustness_score(0.5, 0.0)
    with pytest.raises(InvalidArgumentError, match="accuracy_corrupted=45"):
        robustness_score(45, 0.9)


def test_identical_corruptions_overlap_1() -> None:
    a = acc(
        {
            "standard": {"clean": 0.9, "a": 0.45, "b": 0.45},
            "a": {"clean": 0.9, "a": 0.8, "b": 0.8},
            "b": {"clean": 0.9, "a": 0.8, "b": 0.8},
        }
    )
    om = overlap_matrix(a)
    assert om.get("a", "b") == pytest.approx(1.0) and om.get("a", "a") == 1.0


def test_no_transfer_gives_0_and_negative_transfer_is_clipped() -> None:
    a = acc(
        {
            "standard": {"clean": 0.9, "a": 0.45, "b": 0.45},
            "a": {"clean": 0.9, "a": 0.8, "b": 0.40},  # training with a makes b worse
            "b": {"clean": 0.9, "a": 0.45, "b": 0.8},  # training with b does nothing for a
        }
    )
    assert overlap_matrix(a).get("a", "b") == 0.0


def test_asymmetric_transfer_is_averaged() -> None:
    # a -> b transfers 80 % of b's own gain, b -> a 20 % of a's own gain: O = (0.8 + 0.2) / 2
    std = {"clean": 1.0, "a": 0.5, "b": 0.5}
    a = acc(
        {
            "standard": std,
            "a": {"clean": 1.0, "a": 0.9, "b": 0.5 + 0.8 * 0.3},
            "b": {"clean": 1.0, "a": 0.5 + 0.2 * 0.4, "b": 0.8},
        }
    )
    om = overlap_matrix(a)
    assert om.get("a", "b") == pytest.approx(0.5) and om.get("b", "a") == pytest.approx(0.5)
    # the six-score form agrees
    assert overlap_score(0.74, 0.5, 0.8, 0.58, 0.5, 0.9) == pytest.approx(0.5)


def test_robustness_uses_each_models_clean_accuracy() -> None:
    # model a is worse on clean images; its robustness score divides by its own clean accuracy
    a = acc(
        {
            "standard": {"clean": 0.8, "a": 0.4, "b": 0.4},
            "a": {"clean": 0.6, "a": 0.6, "b": 0.3},
            "b": {"clean": 0.8, "a": 0.4, "b": 0.8},
        }
    )
    om = overlap_matrix(a)
    # R[a,b] = 0.5 = R[std,b] -> 0; R[b,a] = 0.5 = R[std,a] -> 0
    assert om.get("a", "b") == 0.0
    assert om.gains == pytest.approx({"a": 0.5, "b": 0.5})


def test_undefined_denominator_raises_or_flags_nan() -> None:
    rows = {
        "standard": {"clean": 0.9, "a": 0.45, "b": 0.45, "c": 0.5},
        "a": {"clean": 0.9, "a": 0.8, "b": 0.5, "c": 0.5},
        "b": {"clean": 0.9, "a": 0.5, "b": 0.40, "c": 0.5},  # did not learn b
        "c": {"clean": 0.9, "a": 0.5, "b": 0.5, "c": 0.8},
    }
    with pytest.raises(UndefinedOverlapError, match="'b'"):
        overlap_matrix(acc(rows))
    om = overlap_matrix(acc(rows), on_undefined="nan")
    assert om.undefined == ["b"] and np.isnan(om.get("a", "b")) and not np.isnan(om.get("a", "c"))
    sel = select_benchmark(om, 0.5)
    assert sel.excluded == ("b",) and set(sel.names) == {"a", "c"}
    with pytest.raises(UndefinedOverlapError):
        overlap_score(0.5, 0.5, 0.5, 0.5, 0.5, 0.8)
    with pytest.raises(InvalidArgumentError, match="on_undefined"):
        overlap_matrix(acc(rows), on_undefined="ignore")


def test_bad_accuracy_matrices() -> None:
    with pytest.raises(InvalidArgumentError, match="standard"):
        overlap_matrix(acc({"a": {"clean": 0.9, "a": 0.8}}))
    with pytest.raises(InvalidArgumentError, match="fractions"):
        acc({"standard": {"clean": 90.0, "a": 45.0}, "a": {"clean": 90.0, "a": 80.0}})
    with pytest.raises(InvalidArgumentError, match="same test sets"):
        acc({"standard": {"clean": 0.9, "a": 0.4}, "a": {"clean": 0.9}})
    a = acc({"standard": {"clean": 0.9, "a": 0.4}, "a": {"clean": 0.9, "a": 0.8}})
    with pytest.raises(UnknownCorruptionError, match="zz"):
        overlap_matrix(a, ["zz"])


def test_bad_overlap_matrices_and_thresholds() -> None:
    with pytest.raises(InvalidArgumentError, match="square"):
        select_benchmark(np.zeros((2, 3)), 0.1)
    with pytest.raises(InvalidArgumentError, match="symmetric"):
        select_benchmark(np.array([[1.0, 0.2], [0.3, 1.0]]), 0.1)
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        select_benchmark(np.array([[1.0, -0.2], [-0.2, 1.0]]), 0.1)
    for t in (-0.1, 1.5, float("nan"), "0.1", True):
        with pytest.raises(InvalidArgumentError, match="threshold"):
            select_benchmark(np.eye(2), t)
    with pytest.raises(InvalidArgumentError, match="thresholds"):
        select_for_thresholds(np.eye(2), [0.1, 2.0])
    om = OverlapMatrix(["a", "b"], np.eye(2))
    with pytest.raises(UnknownCorruptionError, match="'zz'"):
        select_benchmark(om, 0.1, ["a", "zz"])
    with pytest.raises(InvalidArgumentError, match="names"):
        OverlapMatrix(["a", "a"], np.eye(2))


def brute_force(m: np.ndarray, t: float) -> tuple[int, float, list[tuple[int, ...]]]:
    """Every one of the 2^n subsets: the largest size whose pairs are all <= t, the lowest mean, the argmins."""
    n = m.shape[0]
    masks = np.arange(1 << n, dtype=np.int64)
    ok = np.ones(1 << n, dtype=bool)
    for i in range(n):
        bad = sum(1 << j for j in range(n) if j != i and m[i, j] > t)  # corruptions that may not join i
        ok &= ((masks >> i) & 1 == 0) | ((masks & bad) == 0)
    sizes = np.array([bin(x).count("1") for x in range(1 << n)])
    size = int(sizes[ok].max())
    found = []
    for x in masks[ok & (sizes == size)]:
        sub = tuple(i for i in range(n) if (int(x) >> i) & 1)
        found.append((mean_overlap(m, sub), sub))
    low = min(f for f, _ in found)
    return size, low, [s for f, s in found if f <= low + 1e-12]


def random_matrix(rng: np.random.Generator, n: int, zeros: float) -> np.ndarray:
    a = np.round(rng.random((n, n)), 2)
    a[rng.random((n, n)) < zeros] = 0.0
    m = np.triu(a, 1)
    m = m + m.T
    np.fill_diagonal(m, 1.0)
    return m


@settings(max_examples=100, deadline=None)
@example(n=16, seed=1, t=0.1, zeros=0.3)
@example(n=16, seed=2, t=0.35, zeros=0.0)
@example(n=16, seed=3, t=0.0, zeros=0.7)
@given(
    n=st.integers(1, 16),
    seed=st.integers(0, 2**32 - 1),
    t=st.sampled_from([0.0, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.8]),
    zeros=st.sampled_from([0.0, 0.3, 0.7]),
)
def test_algorithm1_equals_brute_force(n: int, seed: int, t: float, zeros: float) -> None:
    m = random_matrix(np.random.default_rng(seed), n, zeros)
    size, low, argmins = brute_force(m, t)
    sel = select_benchmark(m, t)
    assert sel.size == size
    assert sel.mean_overlap == pytest.approx(low, abs=1e-12)
    idx = tuple(int(s[1:]) for s in sel.names)
    assert idx == min(argmins)  # ties go to the first subset in the candidates' order
    assert len(sel.ties) == len(argmins) - 1


@pytest.mark.parametrize("seed", range(3))
def test_algorithm1_equals_brute_force_at_16(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    m = random_matrix(rng, 16, 0.5)
    for t in (0.0, 0.1, 0.35):
        size, low, argmins = brute_force(m, t)
        sel = select_benchmark(m, t)
        assert (sel.size, tuple(int(s[1:]) for s in sel.names)) == (size, min(argmins))
        assert sel.mean_overlap == pytest.approx(low, abs=1e-12)


def test_maximum_cliques_counts_every_maximum_clique() -> None:
    # two disjoint triangles plus an isolated vertex: two maximum cliques of size 3
    edges = [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5)]
    adj = [0] * 7
    for i, j in edges:
        adj[i] |= 1 << j
        adj[j] |= 1 << i
    assert sorted(maximum_cliques(adj, 7)) == [0b111, 0b111000]


@pytest.mark.parametrize("n", [25, 40, 60])
def test_algorithm1_is_fast_on_many_candidates(n: int) -> None:
    rng = np.random.default_rng(n)
    m = random_matrix(rng, n, 0.4)
    t0 = time.perf_counter()
    sels = select_for_thresholds(m, [0.0, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5])
    dt = time.perf_counter() - t0
    assert dt < 5.0, dt
    sizes = [s.size for s in sels]
    assert sizes == sorted(sizes)  # a higher threshold never gives a smaller benchmark
    for s in sels:
        idx = [int(x[1:]) for x in s.names]
        assert all(m[i, j] <= s.threshold for i, j in itertools.combinations(idx, 2))


def test_paper_threshold_semantics_zero_allows_zero_overlaps() -> None:
    m = np.array([[1, 0, 0, 0.3], [0, 1, 0, 0], [0, 0, 1, 0.2], [0.3, 0, 0.2, 1.0]])
    assert select_benchmark(m, 0.0, ["a", "b", "c", "d"]).names == ("a", "b", "c")
    # at 0.2, {b, c, d} also qualifies but {a, b, c} has the lower mean overlap
    assert select_benchmark(m, 0.2, ["a", "b", "c", "d"]).names == ("a", "b", "c")
    assert select_benchmark(m, 0.2, ["a", "b", "c", "d"]).n_largest == 2
    assert select_benchmark(m, 0.3, ["a", "b", "c", "d"]).size == 4


def test_coverage() -> None:
    names = ["gauss", "blur", "hue", "border"]
    m = np.array([[1, 0.6, 0, 0], [0.6, 1, 0.1, 0], [0, 0.1, 1, 0], [0, 0, 0, 1.0]])
    om = OverlapMatrix(names, m)
    cov = coverage(om, ["gauss"], level=0.3)
    assert cov.covered == {"blur": ("gauss", 0.6)} and set(cov.uncovered) == {"hue", "border"}
    assert coverage(om, ["gauss", "blur"], level=0.0).uncovered["border"][1] == 0.0
    with pytest.raises(InvalidArgumentError, match="level"):
        coverage(om, ["gauss"], level=3)
    with pytest.raises(UnknownCorruptionError):
        coverage(om, ["fog"])


def test_benchmark_mces_feed_balance() -> None:
    from shiftbench.overlap.analysis import balance, benchmark_mces

    a = acc({
        "standard": {"clean": 0.9, "a": 0.5, "b": 0.6},
        "a": {"clean": 0.9, "a": 0.8, "b": 0.6},
        "b": {"clean": 0.9, "a": 0.5, "b": 0.8},
    })
    m = benchmark_mces(a, ["a", "b"])
    # model a: CE_a = 0.2 / 0.5, CE_b = 0.4 / 0.4; model b: CE_a = 0.5 / 0.5, CE_b = 0.2 / 0.4
    assert m == pytest.approx({"a": (0.4 + 1.0) / 2, "b": (1.0 + 0.5) / 2})
    assert balance(m).spread == pytest.approx(0.05)
    with pytest.raises(InvalidArgumentError, match="benchmark"):
        benchmark_mces(a, ["a", "zz"])
