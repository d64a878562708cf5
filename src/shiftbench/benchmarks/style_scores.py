"""Scores of the style-transfer corruption from per-severity errors, as for an ImageNet-C corruption.

* Corruption Error against AlexNet: ``CE = sum_s E_s / sum_s E^AlexNet_s``. Only AlexNet's
  *mean* error over the five severities was published (75.7 %, Appendix C of Hendrycks &
  Dietterich, 2018 draft), so ``sum_s E^AlexNet_s = 5 x 0.757`` and CE needs all five
  severities; a per-severity normalisation against AlexNet cannot be computed and is refused
  (:class:`UnpublishedBaselineError`).
* Relative CE against AlexNet: ``sum_s (E_s - E_clean) / sum_s (E^AlexNet_s - E^AlexNet_clean)``
  (clean error subtracted at each severity, as ImageNet-C's tables were computed), which again
  needs only AlexNet's sum; AlexNet's clean error is 0.4348.
* Against any other baseline with per-severity errors (another model measured with the same
  styles and schedule), CE and relative CE come from :mod:`shiftbench.evaluation.metrics`,
  per severity as well.

Errors are fractions in [0, 1]; CE values are ratios (1.0 = the baseline; papers print 100 %).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError
from ..evaluation.metrics import corruption_error, relative_corruption_error
from ..params import load_json

__all__ = [
    "ALEXNET_MEAN_ERROR",
    "ALEXNET_CLEAN_ERROR",
    "SEVERITIES",
    "UnpublishedBaselineError",
    "StyleScores",
    "style_scores",
    "per_severity_ce",
]

_DATA = load_json("style_schedule.json")
ALEXNET_MEAN_ERROR: float = float(_DATA["alexnet"]["mean_error"])
"""AlexNet's style-transfer error averaged over the five severities (0.757); per-severity values were not published."""
ALEXNET_CLEAN_ERROR: float = float(_DATA["alexnet"]["clean_error"])
SEVERITIES = (1, 2, 3, 4, 5)


class UnpublishedBaselineError(InvalidArgumentError):
    """A score needs baseline numbers that were never published (AlexNet's per-severity style-transfer errors)."""


def _fraction(argument: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
        raise InvalidArgumentError(argument, v, "an error rate in [0, 1]")
    return float(v)


def _severity_errors(argument: str, errors: Any) -> dict[int, float]:
    if not isinstance(errors, Mapping):
        raise InvalidArgumentError(argument, errors, "a mapping severity (1..5) -> error in [0, 1]")
    out: dict[int, float] = {}
    for s, e in errors.items():
        if isinstance(s, bool) or not isinstance(s, int) or s not in SEVERITIES:
            raise InvalidArgumentError(f"{argument} severity", s, "an integer in 1..5 (severity 0, the clean images, goes in clean_error)")
        out[s] = _fraction(f"{argument}[{s}]", e)
    missing = [s for s in SEVERITIES if s not in out]
    if missing:
        raise InvalidArgumentError(argument, sorted(out), "errors for all five severities 1..5", f"Missing: {missing}.")
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class StyleScores:
    """Scores of one model on the style-transfer corruption."""

    errors: dict[int, float]
    mean_error: float
    ce: float
    clean_error: float | None = None
    relative_ce: float | None = None
    baseline: str = "AlexNet"
    baseline_ce: float | None = None
    baseline_relative_ce: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def style_scores(
    errors: Mapping[int, float],
    *,
    clean_error: float | None = None,
    baseline: Mapping[int, float] | None = None,
    baseline_clean_error: float | None = None,
    baseline_name: str = "baseline",
) -> StyleScores:
    """Error per severity, CE against AlexNet's published mean, relative CE, and optionally CE against a baseline.

    Args:
        errors: top-1 error per severity 1..5 (all five).
        clean_error: error on the clean images (severity 0), for relative CE.
        baseline: another model's errors per severity 1..5 (same styles and schedule);
            adds ``baseline_ce`` (and ``baseline_relative_ce`` with both clean errors).
        baseline_clean_error: the baseline's clean error.

    Example (ResNet-50's published CE of 92 % corresponds to a mean error of 0.92 x 0.757):
        >>> s = style_scores({1: .6, 2: .65, 3: .7, 4: .72, 5: .8}, clean_error=.25)
        >>> round(s.ce, 4), round(s.relative_ce, 4)
        (0.9168, 1.378)
    """
    e = _severity_errors("errors", errors)
    mean = sum(e.values()) / 5.0
    ce = sum(e.values()) / (5.0 * ALEXNET_MEAN_ERROR)
    rel = None
    if clean_error is not None:
        c = _fraction("clean_error", clean_error)
        rel = sum(v - c for v in e.values()) / (5.0 * (ALEXNET_MEAN_ERROR - ALEXNET_CLEAN_ERROR))
    bce = brel = None
    if baseline is not None:
        b = _severity_errors("baseline", baseline)
        bce = corruption_error(e, b)
        if clean_error is not None and baseline_clean_error is not None:
            brel = relative_corruption_error(e, float(clean_error), b, _fraction("baseline_clean_error", baseline_clean_error))
    elif baseline_clean_error is not None:
        raise InvalidArgumentError("baseline_clean_error", baseline_clean_error, "None unless baseline is given")
    return StyleScores(e, mean, ce, None if clean_error is None else float(clean_error), rel, baseline_name if baseline is not None else "AlexNet", bce, brel)


def per_severity_ce(errors: Mapping[int, float], baseline: Mapping[int, float] | str = "alexnet") -> dict[int, float]:
    """CE at each severity, ``E_s / E^baseline_s``: needs a baseline with per-severity errors.

    Raises:
        UnpublishedBaselineError: ``baseline="alexnet"``: only AlexNet's mean over the five
            severities (75.7 %) was published.
    """
    if isinstance(baseline, str):
        if baseline.strip().lower() == "alexnet":
            raise UnpublishedBaselineError(
                "baseline",
                baseline,
                "a mapping severity -> error of a baseline measured per severity",
                f"Only AlexNet's mean style-transfer error over the five severities ({ALEXNET_MEAN_ERROR:.1%}) was "
                "published, not its per-severity errors; use style_scores() for CE against it.",
            )
        raise InvalidArgumentError("baseline", baseline, "a mapping severity -> error, or 'alexnet'")
    e = _severity_errors("errors", errors)
    b = _severity_errors("baseline", baseline)
    zero = [s for s in SEVERITIES if b[s] <= 0.0]
    if zero:
        raise InvalidArgumentError("baseline", b, "errors above 0 at every severity", f"Zero at {zero}.")
    return {s: e[s] / b[s] for s in SEVERITIES}
