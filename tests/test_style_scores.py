"""Scores of the style-transfer corruption: CE against AlexNet's published mean, relative CE, per-severity refusal."""

from __future__ import annotations

import pytest

from shiftbench.benchmarks.style_scores import (
    ALEXNET_CLEAN_ERROR,
    ALEXNET_MEAN_ERROR,
    UnpublishedBaselineError,
    per_severity_ce,
    style_scores,
)
from shiftbench.errors import InvalidArgumentError
from shiftbench.evaluation.metrics import corruption_error


def test_published_constants() -> None:
    # Appendix C of the paper: "Style Transfer: 75.7%"; AlexNet's clean error as in the ImageNet-C baseline
    assert ALEXNET_MEAN_ERROR == 0.757
    assert ALEXNET_CLEAN_ERROR == 0.4348


def test_alexnet_itself_scores_100_percent() -> None:
    s = style_scores({k: 0.757 for k in range(1, 6)}, clean_error=0.4348)
    assert s.ce == pytest.approx(1.0) and s.relative_ce == pytest.approx(1.0)


def test_resnet50_worked_example() -> None:
    # Section 4.2: ResNet-50's style-transfer CE is 92 %: a mean error of 0.92 * 0.757 = 0.69644
    errs = {1: 0.52, 2: 0.62, 3: 0.70, 4: 0.77, 5: 0.8722}
    s = style_scores(errs)
    assert s.mean_error == pytest.approx(0.69644)
    assert s.ce == pytest.approx(0.92)
    assert s.relative_ce is None


def test_relative_ce_by_hand() -> None:
    errs = {1: 0.6, 2: 0.65, 3: 0.7, 4: 0.72, 5: 0.8}
    s = style_scores(errs, clean_error=0.25)
    # sum (E - 0.25) = 3.47 - 1.25 = 2.22; AlexNet: 5 * (0.757 - 0.4348) = 1.611
    assert s.relative_ce == pytest.approx(2.22 / 1.611)
    assert s.ce == pytest.approx(3.47 / 3.785)


def test_ce_against_a_measured_baseline() -> None:
    errs = {1: 0.3, 2: 0.4, 3: 0.5, 4: 0.6, 5: 0.7}
    base = {1: 0.5, 2: 0.6, 3: 0.7, 4: 0.8, 5: 0.9}
    s = style_scores(errs, clean_error=0.2, baseline=base, baseline_clean_error=0.4, baseline_name="resnet50")
    assert s.baseline == "resnet50"
    assert s.baseline_ce == pytest.approx(2.5 / 3.5) == pytest.approx(corruption_error(errs, base))
    assert s.baseline_relative_ce == pytest.approx((2.5 - 1.0) / (3.5 - 2.0))
    assert per_severity_ce(errs, base) == pytest.approx({1: 0.6, 2: 0.4 / 0.6, 3: 0.5 / 0.7, 4: 0.75, 5: 0.7 / 0.9})


def test_per_severity_normalisation_against_alexnet_is_refused() -> None:
    with pytest.raises(UnpublishedBaselineError) as e:
        per_severity_ce({k: 0.5 for k in range(1, 6)})
    assert e.value.argument == "baseline" and "75.7%" in str(e.value)
    assert isinstance(e.value, InvalidArgumentError)


@pytest.mark.parametrize(
    ("errors", "argument"),
    [
        ({1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5}, "errors"),
        ({0: 0.2, 1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5, 5: 0.5}, "errors severity"),
        ({1: 0.5, 2: 0.5, 3: 1.5, 4: 0.5, 5: 0.5}, "errors[3]"),
        ([0.5] * 5, "errors"),
    ],
)
def test_bad_errors_name_the_argument(errors, argument) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        style_scores(errors)
    assert e.value.argument == argument


def test_bad_clean_and_baseline_arguments() -> None:
    ok = {k: 0.5 for k in range(1, 6)}
    with pytest.raises(InvalidArgumentError) as e:
        style_scores(ok, clean_error=-0.1)
    assert e.value.argument == "clean_error"
    with pytest.raises(InvalidArgumentError) as e:
        style_scores(ok, baseline_clean_error=0.3)
    assert e.value.argument == "baseline_clean_error"
    with pytest.raises(InvalidArgumentError) as e:
        per_severity_ce(ok, {**ok, 2: 0.0})
    assert e.value.argument == "baseline"
