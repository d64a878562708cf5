"""Metric functions against published numbers: Tables 1 and 2 of paper 000, the spec's worked examples."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shiftbench
from shiftbench.errors import DataError, InvalidArgumentError
from shiftbench.evaluation import metrics as M
from shiftbench.evaluation.baselines import alexnet_baseline, baseline_from_dict
from shiftbench.evaluation.errors import IncompleteResultsError

from ._eval_toys import PAPER_000

# Table 1 (CE, %) and Table 2 (relative CE, %) of "Benchmarking the Corruption and Structural Robustness
# of Neural Networks" (paper 000), columns in BENCHMARK_CORRUPTIONS order: (clean error %, mCE %, 15 CEs).
TABLE1 = {
    "SqueezeNet": (41.8, 104.4, [107, 106, 105, 100, 103, 101, 100, 101, 103, 97, 97, 98, 106, 109, 134]),
    "VGG-11": (31.0, 93.5, [97, 97, 100, 92, 99, 93, 91, 92, 91, 84, 75, 86, 97, 107, 100]),
    "VGG-19": (27.6, 88.9, [89, 91, 95, 89, 98, 90, 90, 89, 86, 75, 68, 80, 97, 102, 94]),
    "VGG-19+BN": (25.8, 81.6, [82, 83, 88, 82, 94, 84, 86, 80, 78, 69, 61, 74, 94, 85, 83]),
    "ResNet-18": (30.2, 84.7, [87, 88, 91, 84, 91, 87, 89, 86, 84, 78, 69, 78, 90, 80, 85]),
    "ResNet-50": (23.9, 76.7, [80, 82, 83, 75, 89, 78, 80, 78, 75, 66, 57, 71, 85, 77, 77]),
}
TABLE2 = {
    "SqueezeNet": (41.8, 117.9, [118, 116, 114, 104, 110, 106, 105, 106, 110, 98, 101, 100, 126, 129, 229]),
    "VGG-11": (31.0, 123.3, [122, 121, 125, 116, 129, 121, 115, 114, 113, 99, 86, 102, 151, 161, 174]),
    "VGG-19": (27.6, 122.9, [114, 117, 122, 118, 136, 123, 122, 114, 111, 88, 82, 98, 165, 161, 172]),
    "VGG-19+BN": (25.8, 111.1, [104, 105, 114, 108, 132, 114, 119, 102, 100, 79, 68, 89, 165, 125, 144]),
    "ResNet-18": (30.2, 103.9, [104, 106, 111, 100, 116, 108, 112, 103, 101, 89, 67, 87, 133, 97, 126]),
    "ResNet-50": (23.9, 105.0, [104, 107, 107, 97, 126, 107, 110, 101, 97, 79, 62, 89, 146, 111, 132]),
}

# Each printed CE is rounded to an integer (+-0.5) and the printed mCE to one decimal (+-0.05): the mean of
# the printed CEs can differ from the printed mCE by at most 0.5 + 0.05.
ROUNDING = 0.55

A = alexnet_baseline()


# The tables print sums over severities only (as ratios); every split over the 5 severities with the same
# sum has the same CE, so the implied errors below are spread evenly over the severities.


def _mean_a(c: str) -> float:
    return sum(A.errors[c].values()) / 5


def implied_errors_table1(ces: list[int]) -> dict[str, dict[int, float]]:
    """Per-severity errors with exactly the printed CE: CE / 100 x AlexNet's mean error, at every severity."""
    return {
        c: {s: ce / 100 * _mean_a(c) for s in range(1, 6)} for c, ce in zip(M.BENCHMARK_CORRUPTIONS, ces, strict=True)
    }


def implied_errors_table2(clean: float, rces: list[int]) -> dict[str, dict[int, float]]:
    """Per-severity errors with exactly the printed relative CE: clean + rCE / 100 x AlexNet's mean gap."""
    assert A.clean_error is not None
    gap = {c: _mean_a(c) - A.clean_error for c in M.BENCHMARK_CORRUPTIONS}
    return {
        c: {s: clean + r / 100 * gap[c] for s in range(1, 6)}
        for c, r in zip(M.BENCHMARK_CORRUPTIONS, rces, strict=True)
    }


def _paper_rows(header: str) -> dict[str, tuple[float, float, list[int]]]:
    text = PAPER_000.read_text(encoding="utf-8")
    start = text.index(header)
    rows = {}
    for line in text[start:].splitlines()[2:]:
        parts = line.split("\t")
        if len(parts) < 18:
            break
        rows[parts[0]] = (float(parts[1]), float(parts[2]), [int(p) for p in parts[3:18]])
    return rows


@pytest.mark.skipif(not PAPER_000.is_file(), reason="shared paper text not available")
def test_transcribed_tables_match_the_paper_text() -> None:
    t1 = _paper_rows("Network\tError\tmCE")
    t2 = _paper_rows("Network\tError\tRel. mCE")
    assert t1.pop("AlexNet") == (43.5, 100.0, [100] * 15)
    assert t2.pop("AlexNet") == (43.5, 100.0, [100] * 15)
    assert t1 == TABLE1
    assert t2 == TABLE2


@pytest.mark.parametrize("network", sorted(TABLE1))
def test_table1_mce_of_every_row(network: str) -> None:
    _, mce_pct, ces = TABLE1[network]
    errors = implied_errors_table1(ces)
    for c, ce in zip(M.BENCHMARK_CORRUPTIONS, ces, strict=True):
        assert 100 * M.corruption_error(errors[c], A.errors[c]) == pytest.approx(ce, abs=1e-9)
    mce = M.mean_corruption_error(errors, A.errors)
    assert 100 * mce == pytest.approx(sum(ces) / 15, abs=1e-9)
    assert abs(100 * mce - mce_pct) <= ROUNDING


@pytest.mark.parametrize("network", sorted(TABLE2))
def test_table2_relative_mce_of_every_row(network: str) -> None:
    clean_pct, rmce_pct, rces = TABLE2[network]
    errors = implied_errors_table2(clean_pct / 100, rces)
    assert A.clean_error is not None
    rmce = M.relative_mean_corruption_error(errors, clean_pct / 100, A.errors, A.clean_error)
    assert 100 * rmce == pytest.approx(sum(rces) / 15, abs=1e-9)
    assert abs(100 * rmce - rmce_pct) <= ROUNDING


@pytest.mark.parametrize("network", sorted(TABLE1))
def test_tables_1_and_2_agree_with_clean_error_subtracted_per_severity(network: str) -> None:
    """Errors implied by Table 2 give Table 1's CEs within rounding: the two tables are one definition."""
    clean_pct, _, rces = TABLE2[network]
    errors = implied_errors_table2(clean_pct / 100, rces)
    for c, ce_printed in zip(M.BENCHMARK_CORRUPTIONS, TABLE1[network][2], strict=True):
        mean_a = sum(A.errors[c].values()) / 5
        assert A.clean_error is not None
        # rounding of the relative CE (0.5 points of the AlexNet gap), of the clean error (0.05 points), of the CE.
        tol = 0.5 + 0.5 * (mean_a - A.clean_error) / mean_a + 0.05 / mean_a + 1e-9
        assert abs(100 * M.corruption_error(errors[c], A.errors[c]) - ce_printed) <= tol, c


def test_relative_ce_is_not_the_sum_minus_clean_once() -> None:
    """The paper's formula read literally (clean error subtracted once from the sum) misses Table 2."""
    clean = 0.239
    errors = implied_errors_table1(TABLE1["ResNet-50"][2])["gaussian_noise"]
    assert A.clean_error is not None
    per_severity = M.relative_corruption_error(errors, clean, A.errors["gaussian_noise"], A.clean_error)
    once = (sum(errors.values()) - clean) / (sum(A.errors["gaussian_noise"].values()) - A.clean_error)
    assert round(100 * per_severity) == 104  # Table 2
    assert abs(100 * once - 104) > 15


def test_worked_ce_example_of_the_spec() -> None:
    ce = M.corruption_error({1: 0.50, 2: 0.60, 3: 0.70, 4: 0.80, 5: 0.90}, A.errors["gaussian_noise"])
    assert sum(A.errors["gaussian_noise"].values()) == pytest.approx(4.43214, abs=1e-9)
    assert ce == pytest.approx(3.50 / 4.43214, abs=1e-12)
    assert round(100 * ce, 1) == 79.0


def test_resnet50_relative_ce_example_of_the_spec() -> None:
    rce = M.relative_corruption_error({s: 0.709 for s in range(1, 6)}, 0.239, {s: 0.886 for s in range(1, 6)}, 0.435)
    assert round(100 * rce) == 104


def test_alexnet_is_100_everywhere() -> None:
    s = M.summarize("AlexNet", A.errors, A.clean_error, A)
    assert s.mce == pytest.approx(1.0) and s.relative_mce == pytest.approx(1.0)
    assert s.complete and len(s.mce_corruptions) == 15
    assert s.extra_mce == pytest.approx(1.0)


def test_alexnet_baseline_data() -> None:
    assert set(A.errors) == set(M.ALL_CORRUPTIONS) and len(A.errors) == 19
    assert A.clean_error == 0.4348 and round(100 * A.clean_error, 1) == 43.5
    appendix = [
        88.6,
        89.4,
        92.3,
        82.0,
        82.6,
        78.6,
        79.8,
        86.7,
        82.7,
        81.9,
        56.5,
        85.3,
        64.6,
        71.8,
        60.7,
        84.5,
        78.7,
        71.8,
        65.8,
    ]  # paper 000, Appendix C, in ALL_CORRUPTIONS order
    for c, pct in zip(M.ALL_CORRUPTIONS, appendix, strict=True):
        assert sorted(A.errors[c]) == [1, 2, 3, 4, 5]
        assert abs(100 * sum(A.errors[c].values()) / 5 - pct) <= 0.05 + 1e-9, c  # printed to one decimal
    assert "76d9393" in A.source


def test_corruption_lists_agree_with_the_registry() -> None:
    assert set(shiftbench.list_corruptions(group="benchmark")) <= set(M.BENCHMARK_CORRUPTIONS)
    assert set(shiftbench.list_corruptions(group="extra")) <= set(M.EXTRA_CORRUPTIONS)
    order = [c for c in shiftbench.list_corruptions() if c in M.ALL_CORRUPTIONS]
    assert order == [c for c in M.ALL_CORRUPTIONS if c in order]


def test_ce_is_a_ratio_of_sums_not_a_mean_of_ratios() -> None:
    e = {1: 0.1, 2: 0.9}
    b = {1: 0.2, 2: 1.0}
    assert M.corruption_error(e, b) == pytest.approx(1.0 / 1.2)
    assert M.corruption_error(e, b) != pytest.approx((0.1 / 0.2 + 0.9 / 1.0) / 2)


def test_mce_refuses_missing_corruptions_and_names_them() -> None:
    errors = dict(A.errors)
    del errors["fog"]
    with pytest.raises(IncompleteResultsError, match="fog"):
        M.mean_corruption_error(errors, A.errors)


def test_extras_never_enter_mce() -> None:
    errors = {c: dict(v) for c, v in A.errors.items()}
    errors["saturate"] = {s: 1.0 for s in range(1, 6)}  # far worse than AlexNet on an extra
    s = M.summarize("m", errors, 0.4348, A)
    assert s.mce == pytest.approx(1.0)
    assert s.extra_mce is not None and s.extra_mce > 1.0
    assert "saturate" not in s.mce_corruptions
    assert any("not part of mCE" in n for n in s.notes)


def test_summary_says_when_mce_is_partial() -> None:
    errors = {c: A.errors[c] for c in ("gaussian_noise", "contrast")}
    s = M.summarize("m", errors, None, A)
    assert s.mce == pytest.approx(1.0) and not s.complete
    assert s.missing_benchmark and "fog" in s.missing_benchmark
    assert any("partial" in n and "2 of the 15" in n for n in s.notes)
    assert s.relative_mce is None and any("Clean error not measured" in n for n in s.notes)


def test_unnormalized_ce_is_the_mean_error() -> None:
    assert M.unnormalized_corruption_error({1: 0.2, 2: 0.4}) == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("errors", "match"),
    [
        ({1: 50.0}, "fraction"),
        ({0: 0.5}, "severity"),
        ({6: 0.5}, "severity"),
        ({1: float("nan")}, r"\[0, 1\]"),
        ({}, "non-empty"),
    ],
)
def test_bad_error_values_are_refused(errors: dict[int, float], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        M.corruption_error(errors, {1: 0.5})


def test_relative_ce_with_a_baseline_that_does_not_degrade() -> None:
    with pytest.raises(InvalidArgumentError, match="exceed its clean error"):
        M.relative_corruption_error({1: 0.5}, 0.2, {1: 0.3}, 0.3)


def test_topk_and_top1_error() -> None:
    assert M.top1_error([1, 2, 3, 4], [1, 2, 0, 0]) == 0.5
    assert M.topk_error([[0, 1], [2, 3]], [1, 1], k=2) == 0.5
    with pytest.raises(InvalidArgumentError, match="labels"):
        M.top1_error([1, 2], [1])


def test_baseline_files_are_validated() -> None:
    with pytest.raises(DataError, match="format"):
        baseline_from_dict({"name": "x"}, "x.json")
    with pytest.raises(DataError, match="fractions"):
        baseline_from_dict({"format": "shiftbench-baseline/1", "name": "x", "errors": {"fog": [50, 60]}}, "x.json")


@settings(max_examples=50, deadline=None)
@given(
    base=st.lists(st.floats(0.3, 0.99), min_size=5, max_size=5),
    base_clean=st.floats(0.05, 0.29),
    scale=st.floats(0.1, 1.0),
)
def test_properties(base: list[float], base_clean: float, scale: float) -> None:
    b = {i + 1: v for i, v in enumerate(base)}
    assert M.corruption_error(b, b) == pytest.approx(1.0)
    assert M.relative_corruption_error(b, base_clean, b, base_clean) == pytest.approx(1.0)
    scaled = {s: scale * v for s, v in b.items()}
    assert M.corruption_error(scaled, b) == pytest.approx(scale)
    # A model that loses exactly its clean error gap scaled by `scale` has relative CE `scale`.
    clean = 0.01
    shifted = {s: clean + scale * (v - base_clean) for s, v in b.items()}
    assert M.relative_corruption_error(shifted, clean, b, base_clean) == pytest.approx(scale)
    assert not math.isnan(M.unnormalized_corruption_error(b))
