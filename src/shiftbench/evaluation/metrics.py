"""ImageNet-C metrics as pure, typed functions.

Definitions (Hendrycks & Dietterich; the project's reference spec, section 4.2):

* ``E[f, c, s]``: top-1 error (a fraction) of model f on corruption c at severity s;
  ``E[f, clean]``: its error on the clean images.
* **CE** ``= sum_s E[f, c, s] / sum_s E[A, c, s]`` with A the baseline model (AlexNet
  in the paper): a ratio of sums over the severities, not a mean of ratios.
* **mCE**: the mean CE over the 15 benchmark corruptions. The 4 extra corruptions
  (speckle noise, Gaussian blur, spatter, saturate) never enter it; they are
  reported on their own.
* **Relative CE** ``= sum_s (E[f, c, s] - E[f, clean]) / sum_s (E[A, c, s] - E[A, clean])``,
  i.e. the clean error is subtracted at every severity (the published tables
  fix this reading of the paper's formula), and **relative mCE** its mean
  over the 15.
* The reference repository's ``test.py`` prints a different number as "mCE": the
  plain mean error over all 19 corruptions, with no baseline.
  :func:`unnormalized_corruption_error` gives that per-corruption mean error;
  shiftbench never labels it mCE.

All errors are fractions in [0, 1]; CE values are ratios (1.0 = the baseline),
which reports print as percentages.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..corruptions import list_corruptions
from ..errors import InvalidArgumentError
from .errors import IncompleteResultsError

__all__ = [
    "SeverityErrors",
    "ErrorTable",
    "BENCHMARK_CORRUPTIONS",
    "EXTRA_CORRUPTIONS",
    "ALL_CORRUPTIONS",
    "FAMILIES",
    "family_of",
    "group_of",
    "error_rate",
    "top1_error",
    "topk_error",
    "unnormalized_corruption_error",
    "corruption_error",
    "relative_corruption_error",
    "mean_corruption_error",
    "relative_mean_corruption_error",
    "Baseline",
    "CorruptionScore",
    "Summary",
    "summarize",
]

SeverityErrors = Mapping[int, float]
"""Top-1 error per severity: ``{1: 0.31, 2: 0.38, ...}``."""

ErrorTable = Mapping[str, SeverityErrors]
"""Per-severity errors per corruption: ``{"gaussian_noise": {1: 0.31, ...}, ...}``."""

# ImageNet-C's corruptions, their order and their families are the engine's registry's
# (shiftbench.corruptions: each corruption's group and family, the papers' order)
BENCHMARK_CORRUPTIONS: tuple[str, ...] = tuple(list_corruptions(group="benchmark"))
"""The 15 corruptions whose mean CE is the mCE, in the papers' order."""

EXTRA_CORRUPTIONS: tuple[str, ...] = tuple(list_corruptions(group="extra"))
"""The 4 held-out ("validation") corruptions of ImageNet-C; never part of mCE."""

ALL_CORRUPTIONS: tuple[str, ...] = BENCHMARK_CORRUPTIONS + EXTRA_CORRUPTIONS

FAMILIES: dict[str, tuple[str, ...]] = {fam: tuple(list_corruptions(family=fam)) for fam in ("noise", "blur", "weather", "digital")}
"""Column groups of Table 1 (brightness counts as weather there)."""


def family_of(corruption: str) -> str:
    """The Table-1 column group of a corruption (``"other"`` if it is not one of the 19)."""
    for fam, names in FAMILIES.items():
        if corruption in names:
            return fam
    return "other"


def group_of(corruption: str) -> str:
    """``"benchmark"`` (one of the 15), ``"extra"`` (one of the 4) or ``"other"``."""
    if corruption in BENCHMARK_CORRUPTIONS:
        return "benchmark"
    if corruption in EXTRA_CORRUPTIONS:
        return "extra"
    return "other"


def _check_fraction(argument: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(argument, value, "an error rate (a number in [0, 1])")
    v = float(value)
    if not math.isfinite(v) or v < 0.0 or v > 1.0:
        raise InvalidArgumentError(argument, value, "an error rate in [0, 1] (a fraction, not a percentage)")
    return v


def _check_severity_errors(argument: str, errors: SeverityErrors) -> dict[int, float]:
    if not isinstance(errors, Mapping) or not errors:
        raise InvalidArgumentError(argument, errors, "a non-empty mapping severity -> error, e.g. {1: 0.3, 2: 0.4}")
    out: dict[int, float] = {}
    for s, e in errors.items():
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 1 <= int(s) <= 5:
            raise InvalidArgumentError(f"{argument} severity", s, "an integer in 1..5")
        out[int(s)] = _check_fraction(f"{argument}[{int(s)}]", e)
    return out


def error_rate(n_wrong: int, n_total: int) -> float:
    """Top-1 error as a fraction: ``n_wrong / n_total``.

    Args:
        n_wrong: number of misclassified images.
        n_total: number of scored images (at least 1).

    Raises:
        InvalidArgumentError: for counts that are negative, inconsistent or zero.
    """
    if isinstance(n_total, bool) or not isinstance(n_total, (int, np.integer)) or n_total < 1:
        raise InvalidArgumentError("n_total", n_total, "a positive number of scored images")
    if isinstance(n_wrong, bool) or not isinstance(n_wrong, (int, np.integer)) or not 0 <= n_wrong <= n_total:
        raise InvalidArgumentError("n_wrong", n_wrong, f"an integer in 0..n_total ({n_total})")
    return int(n_wrong) / int(n_total)


def topk_error(topk: Sequence[Sequence[int]] | np.ndarray, labels: Sequence[int] | np.ndarray, k: int = 1) -> float:
    """Top-k error: the fraction of images whose label is not among the first k predictions.

    Args:
        topk: N x K predicted class indices, best first (K >= k).
        labels: N true class indices.
        k: 1 for top-1 error, 5 for top-5 error.
    """
    p = np.asarray(topk)
    y = np.asarray(labels)
    if p.ndim != 2 or p.shape[0] == 0:
        raise InvalidArgumentError("topk", f"array of shape {p.shape}", "an N x K array of class indices, N >= 1")
    if y.shape != (p.shape[0],):
        raise InvalidArgumentError("labels", f"array of shape {y.shape}", f"one label per row of topk ({p.shape[0]})")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= p.shape[1]:
        raise InvalidArgumentError("k", k, f"an integer in 1..{p.shape[1]} (the columns of topk)")
    hit = (p[:, :k] == y[:, None]).any(axis=1)
    return error_rate(int((~hit).sum()), int(p.shape[0]))


def top1_error(predictions: Sequence[int] | np.ndarray, labels: Sequence[int] | np.ndarray) -> float:
    """Top-1 error of N predicted class indices against N labels."""
    return topk_error(np.asarray(predictions).reshape(-1, 1), labels, k=1)


def unnormalized_corruption_error(errors: SeverityErrors) -> float:
    """Mean error over the given severities (what the reference ``test.py`` prints as "CE (unnormalized)")."""
    e = _check_severity_errors("errors", errors)
    return sum(e.values()) / len(e)


def _common_severities(errors: dict[int, float], baseline: dict[int, float]) -> list[int]:
    missing = sorted(set(errors) - set(baseline))
    if missing:
        raise IncompleteResultsError(
            "baseline",
            f"severities {sorted(baseline)}",
            f"a baseline error for every severity of the model ({missing} missing)",
        )
    return sorted(errors)


def corruption_error(errors: SeverityErrors, baseline: SeverityErrors) -> float:
    """Corruption Error: ``sum_s errors[s] / sum_s baseline[s]`` over the model's severities.

    Args:
        errors: the model's top-1 error per severity (usually all of 1..5).
        baseline: the baseline's error per severity; must cover every severity in ``errors``.

    Returns:
        CE as a ratio (1.0 equals the baseline; reports print 100 %).

    Example:
        >>> round(corruption_error({1: .5, 2: .6, 3: .7, 4: .8, 5: .9},
        ...       {1: .69528, 2: .82542, 3: .93554, 4: .98138, 5: .99452}), 4)
        0.7897
    """
    e = _check_severity_errors("errors", errors)
    b = _check_severity_errors("baseline", baseline)
    sev = _common_severities(e, b)
    den = sum(b[s] for s in sev)
    if den <= 0.0:
        raise InvalidArgumentError("baseline", b, "baseline errors with a positive sum")
    return sum(e[s] for s in sev) / den


def relative_corruption_error(
    errors: SeverityErrors, clean_error: float, baseline: SeverityErrors, baseline_clean_error: float
) -> float:
    """Relative CE: ``sum_s (errors[s] - clean_error) / sum_s (baseline[s] - baseline_clean_error)``.

    The clean error is subtracted at each severity, which is how the published
    Table 2 numbers were computed.

    Raises:
        InvalidArgumentError: when the baseline's corrupted errors do not exceed
            its clean error on average (the ratio is then undefined).
    """
    e = _check_severity_errors("errors", errors)
    b = _check_severity_errors("baseline", baseline)
    c = _check_fraction("clean_error", clean_error)
    bc = _check_fraction("baseline_clean_error", baseline_clean_error)
    sev = _common_severities(e, b)
    den = sum(b[s] - bc for s in sev)
    if den <= 0.0:
        raise InvalidArgumentError(
            "baseline",
            f"corrupted errors {[round(b[s], 4) for s in sev]} vs clean error {bc}",
            "a baseline whose corrupted errors exceed its clean error on average (relative CE divides by the gap)",
        )
    return sum(e[s] - c for s in sev) / den


def _check_table(argument: str, table: ErrorTable) -> None:
    if not isinstance(table, Mapping):
        raise InvalidArgumentError(argument, type(table).__name__, "a mapping corruption -> {severity: error}")


def _required(table: ErrorTable, baseline: ErrorTable, corruptions: Sequence[str]) -> list[str]:
    missing = [c for c in corruptions if c not in table]
    if missing:
        raise IncompleteResultsError(
            "errors",
            f"{len(corruptions) - len(missing)} of {len(corruptions)} corruptions",
            f"errors for all of {', '.join(corruptions)}",
            f"Missing: {', '.join(missing)}. Use summarize() for a partial mean that says so.",
        )
    missing_b = [c for c in corruptions if c not in baseline]
    if missing_b:
        raise IncompleteResultsError(
            "baseline",
            f"{len(corruptions) - len(missing_b)} corruptions",
            "baseline errors for every corruption",
            f"Missing: {', '.join(missing_b)}.",
        )
    return list(corruptions)


def mean_corruption_error(
    errors: ErrorTable, baseline: ErrorTable, corruptions: Sequence[str] = BENCHMARK_CORRUPTIONS
) -> float:
    """mCE: the mean :func:`corruption_error` over ``corruptions`` (default: the 15 benchmark ones).

    Every listed corruption must be present; there is no silent partial mean.

    Raises:
        IncompleteResultsError: a listed corruption is missing from ``errors`` or ``baseline``.
    """
    _check_table("errors", errors)
    _check_table("baseline", baseline)
    names = _required(errors, baseline, corruptions)
    return sum(corruption_error(errors[c], baseline[c]) for c in names) / len(names)


def relative_mean_corruption_error(
    errors: ErrorTable,
    clean_error: float,
    baseline: ErrorTable,
    baseline_clean_error: float,
    corruptions: Sequence[str] = BENCHMARK_CORRUPTIONS,
) -> float:
    """Relative mCE: the mean :func:`relative_corruption_error` over ``corruptions`` (default: the 15).

    Raises:
        IncompleteResultsError: a listed corruption is missing from ``errors`` or ``baseline``.
    """
    _check_table("errors", errors)
    _check_table("baseline", baseline)
    names = _required(errors, baseline, corruptions)
    return sum(
        relative_corruption_error(errors[c], clean_error, baseline[c], baseline_clean_error) for c in names
    ) / len(names)


@dataclass(frozen=True)
class Baseline:
    """Errors of the model that normalises CE (AlexNet in the paper, or any stored model).

    Attributes:
        name: shown in every report ("AlexNet", or the stored model's name).
        errors: per-severity errors per corruption.
        clean_error: clean top-1 error, or None when unknown (no relative CE then).
        source: where the numbers come from (a citation, or the store and run ids).
        edition: the ImageNet-C edition the errors were measured on ("224", "64", ...).
        n_images: images per corruption and severity behind the errors, if known.
    """

    name: str
    errors: Mapping[str, Mapping[int, float]]
    clean_error: float | None
    source: str
    edition: str = "224"
    n_images: int | None = None


@dataclass(frozen=True)
class CorruptionScore:
    """Scores of one corruption.

    Attributes:
        name: corruption name.
        group: "benchmark", "extra" or "other".
        family: Table-1 column group.
        errors: the model's top-1 error per severity.
        mean_error: mean over those severities (unnormalised).
        ce: Corruption Error (ratio), or None without a baseline for it.
        relative_ce: relative CE (ratio), or None without clean errors or baseline.
    """

    name: str
    group: str
    family: str
    errors: Mapping[int, float]
    mean_error: float
    ce: float | None
    relative_ce: float | None


@dataclass(frozen=True)
class Summary:
    """Table-1 row of one model, with everything a report must state.

    Attributes:
        model: the model's name.
        clean_error: clean top-1 error, or None if the clean images were not evaluated.
        scores: per-corruption scores, in the papers' order.
        baseline: name of the baseline used for CE (None: CE not computed).
        baseline_source: where the baseline numbers come from.
        mce: mean CE over the benchmark corruptions present (see ``mce_corruptions``).
        relative_mce: mean relative CE over the same corruptions.
        mce_corruptions: the benchmark corruptions that entered mCE.
        missing_benchmark: benchmark corruptions without results (mCE partial if any).
        extra_mce: mean CE over the extra corruptions present (never mixed into mCE).
        severities: severities evaluated (1..5 for the published protocol).
        notes: sentences the report must print (partial sets, missing baselines...).
    """

    model: str
    clean_error: float | None
    scores: tuple[CorruptionScore, ...]
    baseline: str | None
    baseline_source: str | None
    mce: float | None
    relative_mce: float | None
    mce_corruptions: tuple[str, ...]
    missing_benchmark: tuple[str, ...]
    extra_mce: float | None
    severities: tuple[int, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def complete(self) -> bool:
        """True when mCE covers all 15 benchmark corruptions at severities 1..5."""
        return not self.missing_benchmark and self.severities == (1, 2, 3, 4, 5) and self.mce is not None

    def score(self, corruption: str) -> CorruptionScore | None:
        """The score of one corruption, or None if it was not evaluated."""
        for s in self.scores:
            if s.name == corruption:
                return s
        return None


def _order_key(name: str) -> tuple[int, str]:
    return (ALL_CORRUPTIONS.index(name), name) if name in ALL_CORRUPTIONS else (len(ALL_CORRUPTIONS), name)


def _mean(values: Iterable[float]) -> float | None:
    vals = list(values)
    return sum(vals) / len(vals) if vals else None


def summarize(
    model: str,
    errors: ErrorTable,
    clean_error: float | None,
    baseline: Baseline | None,
) -> Summary:
    """Compute every ImageNet-C score of one model and say what they cover.

    Unlike :func:`mean_corruption_error`, this accepts an incomplete set of
    corruptions: mCE is then the mean over the benchmark corruptions present,
    and ``missing_benchmark`` and ``notes`` say that it is partial. Extra
    corruptions get CE values and their own mean (``extra_mce``), never part of mCE.

    Args:
        model: the model's name.
        errors: per-severity errors per corruption.
        clean_error: the model's clean error (None if not measured).
        baseline: the normalising model, or None (CE values are then None).
    """
    _check_table("errors", errors)
    if clean_error is not None:
        clean_error = _check_fraction("clean_error", clean_error)
    notes: list[str] = []
    scores: list[CorruptionScore] = []
    severities: set[int] = set()
    rel_failures: list[str] = []
    for name in sorted(errors, key=_order_key):
        e = _check_severity_errors(f"errors[{name!r}]", errors[name])
        severities.update(e)
        ce = rce = None
        if baseline is not None and name in baseline.errors and set(e) <= set(baseline.errors[name]):
            ce = corruption_error(e, baseline.errors[name])
            if clean_error is not None and baseline.clean_error is not None:
                try:
                    rce = relative_corruption_error(e, clean_error, baseline.errors[name], baseline.clean_error)
                except InvalidArgumentError:
                    rel_failures.append(name)
        scores.append(
            CorruptionScore(
                name, group_of(name), family_of(name), dict(sorted(e.items())), sum(e.values()) / len(e), ce, rce
            )
        )
    bench = [s for s in scores if s.group == "benchmark"]
    extra = [s for s in scores if s.group == "extra"]
    missing = tuple(c for c in BENCHMARK_CORRUPTIONS if c not in errors)
    mce = rmce = None
    if baseline is None:
        notes.append("No baseline: CE, mCE and relative mCE are not computed (errors are shown unnormalised).")
    else:
        no_base = [s.name for s in scores if s.ce is None]
        if no_base:
            notes.append(f"Baseline {baseline.name} has no errors for: {', '.join(no_base)} (no CE for them).")
        if bench and all(s.ce is not None for s in bench):
            mce = _mean(s.ce for s in bench if s.ce is not None)
            if all(s.relative_ce is not None for s in bench):
                rmce = _mean(s.relative_ce for s in bench if s.relative_ce is not None)
        if clean_error is None:
            notes.append("Clean error not measured: relative CE and relative mCE are not computed.")
        elif baseline.clean_error is None:
            notes.append(f"Baseline {baseline.name} has no clean error: relative CE is not computed.")
        if rel_failures:
            notes.append(
                f"Relative CE undefined for {', '.join(rel_failures)}: the baseline's corrupted error does not "
                "exceed its clean error."
            )
    if missing and bench:
        notes.append(
            f"mCE is partial: it averages {len(bench)} of the 15 benchmark corruptions "
            f"(missing: {', '.join(missing)}), so it is not comparable with published mCE values."
        )
    elif not bench:
        notes.append("No benchmark corruption evaluated: no mCE.")
    sev = tuple(sorted(severities))
    if scores and sev != (1, 2, 3, 4, 5):
        notes.append(f"Severities {list(sev)} only: CE is summed over these, the published protocol uses 1..5.")
    if extra:
        notes.append(
            f"Extra corruptions ({', '.join(s.name for s in extra)}) are reported separately and are not part of mCE."
        )
    others = [s.name for s in scores if s.group == "other"]
    if others:
        notes.append(f"Corruptions outside ImageNet-C's 19 ({', '.join(others)}) are not part of mCE.")
    extra_ces = [s.ce for s in extra if s.ce is not None]
    return Summary(
        model=model,
        clean_error=clean_error,
        scores=tuple(scores),
        baseline=None if baseline is None else baseline.name,
        baseline_source=None if baseline is None else baseline.source,
        mce=mce,
        relative_mce=rmce,
        mce_corruptions=tuple(s.name for s in bench),
        missing_benchmark=missing,
        extra_mce=_mean(extra_ces) if extra_ces and len(extra_ces) == len(extra) else None,
        severities=sev,
        notes=tuple(notes),
    )
