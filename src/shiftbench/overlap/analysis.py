"""Benchmark analyses: CE/mCE without severities, balance (Laugros et al., 2020, Section 5.3), coverage (Laugros et al., 2020, Section 5.2), heatmap."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, MissingDependencyError
from .scores import STANDARD, AccuracyMatrix, OverlapMatrix
from .select import check_threshold

__all__ = [
    "noc_corruption_error",
    "noc_mean_corruption_error",
    "Balance",
    "balance",
    "benchmark_mces",
    "Coverage",
    "coverage",
    "mean_overlaps",
    "overlap_block",
    "MixtureCoverage",
    "mixture_coverage",
    "plot_overlap_heatmap",
]


def _fraction(argument: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(argument, v, "an error rate in [0, 1]")
    f = float(v)
    if not math.isfinite(f) or not 0.0 <= f <= 1.0:
        raise InvalidArgumentError(argument, v, "an error rate in [0, 1] (a fraction, not a percentage)")
    return f


def noc_corruption_error(error: float, baseline_error: float) -> float:
    """CE of one corruption without severities: ``E_c / E_baseline,c`` (1.0 = the baseline; x100 for %).

    Laugros et al. (2020) recommend the CE of Hendrycks & Dietterich with the AlexNet errors of its Appendix A;
    its corruptions have no severity levels, so the sums over severities reduce to one term.
    """
    e = _fraction("error", error)
    b = _fraction("baseline_error", baseline_error)
    if b <= 0:
        raise InvalidArgumentError("baseline_error", baseline_error, "an error > 0 (CE divides by it)")
    return e / b


def noc_mean_corruption_error(ces: Mapping[str, float] | Sequence[float]) -> float:
    """mCE: the plain mean of the CE values (in whatever unit they are given)."""
    vals = list(ces.values()) if isinstance(ces, Mapping) else list(ces)
    if not vals:
        raise InvalidArgumentError("ces", vals, "at least one CE value")
    for v in vals:
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float, np.integer, np.floating))
            or not math.isfinite(float(v))
        ):
            raise InvalidArgumentError("ces", v, "finite numbers")
    return float(np.mean(np.asarray(vals, dtype=np.float64)))


@dataclass(frozen=True)
class Balance:
    """Spread of the mCE of single-corruption models on a benchmark (Laugros et al., 2020, Section 5.3).

    A balanced benchmark gives each of its corruptions the same importance: models each
    trained with one of its corruptions then get similar mCE. Laugros et al. (2020) report the population
    standard deviation and the max - min of those mCEs (12.1 / 40 for ImageNet-C, 3.7 / 11
    for ImageNet-NOC).
    """

    mces: dict[str, float]
    std: float
    spread: float
    mean: float
    lowest: str
    highest: str


def balance(mces: Mapping[str, float]) -> Balance:
    """Balance of a benchmark from ``{training corruption: mCE of its model on the benchmark}``."""
    if not isinstance(mces, Mapping) or len(mces) < 2:
        raise InvalidArgumentError("mces", mces, "a mapping of at least two models to their mCE")
    vals = {}
    for k, v in mces.items():
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float, np.integer, np.floating))
            or not math.isfinite(float(v))
        ):
            raise InvalidArgumentError(f"mces[{k!r}]", v, "a finite number")
        vals[str(k)] = float(v)
    a = np.array(list(vals.values()))
    lo = min(vals, key=vals.__getitem__)
    hi = max(vals, key=vals.__getitem__)
    return Balance(vals, float(a.std(ddof=0)), float(a.max() - a.min()), float(a.mean()), lo, hi)


def benchmark_mces(
    accuracies: AccuracyMatrix, benchmark: Sequence[str], baseline_errors: Mapping[str, float] | None = None
) -> dict[str, float]:
    """mCE on ``benchmark`` of each model trained with one of its corruptions (the input of :func:`balance`).

    CE of model m on corruption c = ``E[m, c] / E[baseline, c]``; the baseline errors default to those of the
    study's standard model (Laugros et al. (2020) use AlexNet's; a study on another dataset has no AlexNet numbers).
    Models are the rows of ``accuracies`` named after the corruptions.
    """
    bench = list(benchmark)
    for c in bench:
        if c not in accuracies.models or c not in accuracies.tests:
            raise InvalidArgumentError("benchmark", c, "corruptions with a trained model and a test column")
    if baseline_errors is None:
        if STANDARD not in accuracies.models:
            raise InvalidArgumentError("accuracies", accuracies.models, f"a {STANDARD!r} row for the baseline errors")
        baseline_errors = {c: 1.0 - accuracies.get(STANDARD, c) for c in bench}
    out = {}
    for m in bench:
        ces = [noc_corruption_error(1.0 - accuracies.get(m, c), baseline_errors[c]) for c in bench]
        out[m] = noc_mean_corruption_error(ces)
    return out


@dataclass(frozen=True)
class Coverage:
    """Which outside corruptions a benchmark covers (Laugros et al., 2020, Section 5.2).

    Attributes:
        level: an outside corruption is covered when it overlaps with at least one
            benchmark corruption by more than this.
        covered: ``{outside corruption: (benchmark corruption with the largest overlap, score)}``.
        uncovered: outside corruptions with no overlap above ``level``, with their largest score.
    """

    benchmark: tuple[str, ...]
    level: float
    covered: dict[str, tuple[str, float]]
    uncovered: dict[str, tuple[str, float]]

    @property
    def fraction(self) -> float:
        n = len(self.covered) + len(self.uncovered)
        return len(self.covered) / n if n else float("nan")


def coverage(
    overlaps: OverlapMatrix, benchmark: Sequence[str], outside: Sequence[str] | None = None, *, level: float = 0.0
) -> Coverage:
    """Coverage of ``benchmark`` over ``outside`` corruptions (default: every other corruption of the matrix).

    Laugros et al. (2020) Section 5.2: every ImageNet-C corruption overlaps with some ImageNet-NOC corruption
    by more than 0.3 (covered at level 0.3), while hue and border overlap with no ImageNet-C
    corruption at all (uncovered at level 0).
    """
    lv = check_threshold(level, "level")
    bench = list(benchmark)
    if not bench:
        raise InvalidArgumentError("benchmark", bench, "at least one corruption")
    for n in bench:
        overlaps._index(n)
    out = [n for n in overlaps.names if n not in bench] if outside is None else list(outside)
    covered: dict[str, tuple[str, float]] = {}
    uncovered: dict[str, tuple[str, float]] = {}
    for o in out:
        overlaps._index(o)
        scores = [(b, overlaps.get(o, b)) for b in bench if b != o]
        scores = [(b, s) for b, s in scores if not math.isnan(s)]
        best = max(scores, key=lambda t: t[1]) if scores else ("", float("nan"))
        (covered if scores and best[1] > lv else uncovered)[o] = best
    return Coverage(tuple(bench), lv, covered, uncovered)


def mean_overlaps(overlaps: OverlapMatrix) -> dict[str, float]:
    """Mean overlapping score of each corruption with the others of the matrix (Laugros et al., 2021, Section 4.2, Fig. 2).

    Laugros et al. (2021) read a corruption with a higher mean as contributing more to the benchmark's total
    overlapping, and a benchmark whose corruptions differ a lot in that mean as unbalanced.
    Undefined (NaN) scores are left out of the means; a corruption with no defined score gets NaN.
    """
    out: dict[str, float] = {}
    for i, name in enumerate(overlaps.names):
        row = [float(v) for j, v in enumerate(overlaps.values[i]) if j != i and not math.isnan(float(v))]
        out[name] = float(np.mean(row)) if row else float("nan")
    return out


def overlap_block(overlaps: OverlapMatrix, rows: Sequence[str], columns: Sequence[str]) -> np.ndarray:
    """The ``rows x columns`` part of an overlap matrix (e.g. ImageNet-C x ImageNet-NOC, Laugros et al. (2020) Fig. 3)."""
    ri = [overlaps._index(r) for r in rows]
    ci = [overlaps._index(c) for c in columns]
    return overlaps.values[np.ix_(ri, ci)].copy()


@dataclass(frozen=True)
class MixtureCoverage:
    """How a model trained on a mixture of corruptions does on each test corruption (Laugros et al., 2020, Section 5.2, Table 1).

    Attributes:
        model: the mixture model (Laugros et al.'s (2020) m_IC or m_INOC).
        ces: ``{corruption: (CE of the standard model, CE of the mixture model)}``, in % of the baseline errors
            (Laugros et al. (2020) use AlexNet's; a study on other data uses its standard model's, so the standard's CEs are 100).
        clean_error: ``(standard, mixture)`` clean errors.
        covered: corruptions on which the mixture model's error is below the standard model's: training on the
            mixture made the model more robust to them (Laugros et al., 2020: "m_INOC is more robust than the standard model to
            all the ImageNet-C corruptions").
        uncovered: the others (Laugros et al., 2020: m_IC "is not robust to the hue and border corruptions").
    """

    model: str
    ces: dict[str, tuple[float, float]]
    clean_error: tuple[float, float]
    mce: tuple[float, float]
    covered: tuple[str, ...]
    uncovered: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "ces": {k: [round(a, 2), round(b, 2)] for k, (a, b) in self.ces.items()},
            "clean_error": [round(v, 4) for v in self.clean_error],
            "mce": [round(v, 2) for v in self.mce],
            "covered": list(self.covered),
            "uncovered": list(self.uncovered),
        }


def mixture_coverage(
    accuracies: AccuracyMatrix,
    model: str,
    corruptions: Sequence[str],
    baseline_errors: Mapping[str, float] | None = None,
) -> MixtureCoverage:
    """CE of the standard and of a mixture model on ``corruptions``, and which of them the mixture covers.

    ``baseline_errors`` default to the standard model's errors (so its CEs are 100).
    """
    if model not in accuracies.models:
        raise InvalidArgumentError("model", model, f"one of the models {accuracies.models}")
    if STANDARD not in accuracies.models:
        raise InvalidArgumentError("accuracies", accuracies.models, f"a {STANDARD!r} row")
    cs = list(corruptions)
    if not cs:
        raise InvalidArgumentError("corruptions", cs, "at least one test corruption")
    for c in cs:
        if c not in accuracies.tests:
            raise InvalidArgumentError("corruptions", c, f"one of the test sets {accuracies.tests}")
    base = dict(baseline_errors) if baseline_errors is not None else {c: 1.0 - accuracies.get(STANDARD, c) for c in cs}
    ces: dict[str, tuple[float, float]] = {}
    for c in cs:
        e_std, e_mix = 1.0 - accuracies.get(STANDARD, c), 1.0 - accuracies.get(model, c)
        ces[c] = (100 * noc_corruption_error(e_std, base[c]), 100 * noc_corruption_error(e_mix, base[c]))
    covered = tuple(c for c in cs if ces[c][1] < ces[c][0])
    uncovered = tuple(c for c in cs if c not in covered)
    mce = (noc_mean_corruption_error([v[0] for v in ces.values()]), noc_mean_corruption_error([v[1] for v in ces.values()]))
    clean = (1.0 - accuracies.get(STANDARD, "clean"), 1.0 - accuracies.get(model, "clean"))
    return MixtureCoverage(model, ces, clean, mce, covered, uncovered)


def plot_overlap_heatmap(
    overlaps: OverlapMatrix,
    path: str | Path,
    *,
    title: str = "Overlapping scores",
    highlight: Sequence[str] = (),
    dpi: int = 150,
    rows: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
    means: bool = False,
) -> Path:
    """Draw the overlap matrix as an annotated heatmap (PNG, SVG or PDF by the file suffix).

    ``rows`` / ``columns`` draw a block of it (e.g. ImageNet-C x ImageNet-NOC); ``means`` adds each
    row's mean overlap with the other corruptions (Laugros et al., 2021, Fig. 2) as a last column.

    Needs matplotlib: ``pip install 'shiftbench[plot]'``.
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise MissingDependencyError("matplotlib", "the overlap heatmap", "plot") from e
    p = Path(path)
    rn = list(rows) if rows is not None else list(overlaps.names)
    cn = list(columns) if columns is not None else list(overlaps.names)
    vals = overlap_block(overlaps, rn, cn)
    if means:
        mo = mean_overlaps(overlaps)
        vals = np.concatenate([vals, np.array([[mo[r]] for r in rn])], axis=1)
    nr, nc = vals.shape
    ylabels = [s.removeprefix("noc_") for s in rn]
    xlabels = [s.removeprefix("noc_") for s in cn] + (["mean overlap"] if means else [])
    size = max(4.0, 0.55 * max(nr, nc) + 2.0)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * nc + 2.5), max(3.5, 0.55 * nr + 1.8) if rows or columns else size * 0.85))
    v = np.ma.masked_invalid(vals)
    im = ax.imshow(v, vmin=0.0, vmax=1.0, cmap="viridis")
    ax.set_xticks(range(nc), xlabels, rotation=60, ha="right")
    ax.set_yticks(range(nr), ylabels)
    if means:
        ax.axvline(nc - 1.5, color="white", linewidth=2)
    for i in range(nr):
        for j in range(nc):
            val = vals[i, j]
            txt = "n/a" if math.isnan(val) else f"{val:.2f}"
            colour = "dimgray" if math.isnan(val) else ("white" if val < 0.6 else "black")
            ax.text(j, i, txt, ha="center", va="center", fontsize=7, color=colour)
    for k, lab in enumerate(ax.get_yticklabels()):
        if rn[k] in highlight:
            lab.set_fontweight("bold")
    for k, lab in enumerate(ax.get_xticklabels()[: len(cn)]):
        if cn[k] in highlight:
            lab.set_fontweight("bold")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_title(title)
    fig.tight_layout()
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=dpi)
    plt.close(fig)
    return p
