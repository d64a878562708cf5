"""Severity calibration of a corruption's parameter range (Laugros et al., 2020, Section 4 and Appendix A).

Laugros et al. (2020) set each candidate's range so that a standard ResNet-18 keeps a robustness score
``R = A_corrupted / A_clean`` of **0.95** at the mild end and **0.5** at the harsh end
(hue and gray scale never reach 0.5: 0.63 and 0.70 at their upper bounds). This module finds
those endpoints for any corruption with a parameter, for any model:

1. ``R`` is evaluated on a grid over the search interval (``grid`` points, ends included);
2. for each target level, the first grid step (from the mild end) where ``R`` falls from at or
   above the level to below it is bisected until it is narrower than ``tolerance`` (or 1 for an
   integer parameter);
3. the endpoint is the linear interpolation of ``R`` inside the last bracket (rounded for an
   integer parameter). A level that ``R`` never reaches in the interval gives ``None`` and the
   value of ``R`` at the harsh end is reported, as Laugros et al. (2020) do for hue and gray scale.

Every evaluation is kept (value, R, accuracy) so that the search can be plotted and checked.
All evaluations use the same images and the same per-image keys: only the parameter changes
between them (common random numbers), which keeps a measured ``R`` close to monotone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import InvalidArgumentError, MissingDependencyError

__all__ = ["Calibration", "calibrate", "calibrate_model", "plot_calibration", "DEFAULT_TARGETS"]

DEFAULT_TARGETS = (0.95, 0.5)


@dataclass
class Calibration:
    """The outcome of a calibration.

    Attributes:
        corruption: name of the corruption (or a label).
        search: the interval searched, mild end first.
        targets: the robustness levels sought (0.95 and 0.5 by default).
        endpoints: ``{target: value}``; ``None`` where ``R`` never falls below the target.
        evaluations: every ``(value, R, accuracy)`` evaluated, in the order of evaluation.
        clean_accuracy: the model's clean accuracy (None for a bare robustness function).
        integer: whether the parameter is an integer.
    """

    corruption: str
    search: tuple[float, float]
    targets: tuple[float, ...]
    endpoints: dict[float, float | None]
    evaluations: list[tuple[float, float, float | None]] = field(default_factory=list)
    clean_accuracy: float | None = None
    integer: bool = False
    model: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def range(self) -> tuple[float | None, ...]:
        """The calibrated range: the endpoints in the order of ``targets``."""
        return tuple(self.endpoints[t] for t in self.targets)

    def robustness_at_harsh_end(self) -> float:
        return self._r(self.search[1])

    def _r(self, v: float) -> float:
        for x, r, _ in self.evaluations:
            if x == v:
                return r
        return float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "shiftbench-calibration/1",
            "corruption": self.corruption,
            "model": self.model,
            "search": list(self.search),
            "targets": list(self.targets),
            "endpoints": {str(t): v for t, v in self.endpoints.items()},
            "integer": self.integer,
            "clean_accuracy": self.clean_accuracy,
            "robustness_at_harsh_end": self.robustness_at_harsh_end(),
            "evaluations": [[x, r, a] for x, r, a in self.evaluations],
            "notes": list(self.notes),
        }


def _targets(targets: Sequence[float]) -> tuple[float, ...]:
    out = []
    for t in targets:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 < float(t) < 1.0 + 1e-12:
            raise InvalidArgumentError("targets", t, "robustness levels in (0, 1], e.g. 0.95,0.5")
        out.append(float(t))
    if not out:
        raise InvalidArgumentError("targets", list(targets), "at least one robustness level")
    return tuple(out)


def calibrate(
    robustness: Callable[[float], float | tuple[float, float | None]],
    search: tuple[float, float],
    targets: Sequence[float] = DEFAULT_TARGETS,
    *,
    integer: bool = False,
    grid: int = 7,
    tolerance: float | None = None,
    max_evaluations: int = 40,
    name: str = "corruption",
) -> Calibration:
    """Find where ``robustness(value)`` crosses each target between ``search[0]`` (mild) and ``search[1]`` (harsh).

    Args:
        robustness: ``value -> R`` (or ``(R, accuracy)``); expected to fall from mild to harsh.
        search: the interval to search, mild end first (it may run downwards, e.g. 9 -> 4 levels).
        integer: the parameter takes whole values.
        grid: evaluations spread over the interval before bisecting (>= 2).
        tolerance: stop bisecting when a bracket is narrower (default: 1/1000 of the interval; 1 for integers).
        max_evaluations: a bound on the number of evaluations.
    """
    ts = _targets(targets)
    try:
        a, b = (float(v) for v in search)
    except (TypeError, ValueError):
        raise InvalidArgumentError("search", search, "two numbers: the mild end, then the harsh end") from None
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        raise InvalidArgumentError("search", search, "two different finite numbers")
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 2:
        raise InvalidArgumentError("grid", grid, "an integer >= 2")
    tol = float(tolerance) if tolerance is not None else (1.0 if integer else abs(b - a) / 1000.0)
    if not tol > 0:
        raise InvalidArgumentError("tolerance", tolerance, "a number > 0")
    evals: list[tuple[float, float, float | None]] = []
    cache: dict[float, float] = {}

    def snap(v: float) -> float:
        return float(round(v)) if integer else float(v)

    def r_of(v: float) -> float:
        v = snap(v)
        if v not in cache:
            if len(evals) >= max_evaluations:
                raise _Budget()
            got = robustness(v)
            r, acc = (got if isinstance(got, tuple) else (got, None))
            r = float(r)
            if not math.isfinite(r):
                raise InvalidArgumentError("robustness", r, f"a finite robustness score at value {v}")
            cache[v] = r
            evals.append((v, r, None if acc is None else float(acc)))
        return cache[v]

    pts = sorted({snap(a + (b - a) * i / (grid - 1)) for i in range(grid)}, key=lambda v: (v - a) / (b - a))
    endpoints: dict[float, float | None] = {}
    notes: list[str] = []
    try:
        for v in pts:
            r_of(v)
        for t in ts:
            lo = hi = None
            for u, w in zip(pts, pts[1:]):
                if r_of(u) >= t > r_of(w):
                    lo, hi = u, w
                    break
            if lo is None or hi is None:
                endpoints[t] = None
                if r_of(pts[0]) < t:
                    notes.append(f"R is already below {t:g} at the mild end ({r_of(pts[0]):.3f}): start the interval milder")
                else:
                    notes.append(
                        f"R stays at or above {t:g} over the whole interval ({r_of(pts[-1]):.3f} at the harsh end)"
                    )
                continue
            while abs(hi - lo) > tol:
                mid = snap((lo + hi) / 2.0)
                if mid in (lo, hi):
                    break
                if r_of(mid) >= t:
                    lo = mid
                else:
                    hi = mid
            rl, rh = r_of(lo), r_of(hi)
            x = lo + (hi - lo) * (rl - t) / (rl - rh) if rl != rh else (lo + hi) / 2.0
            endpoints[t] = snap(x)
    except _Budget:
        notes.append(f"stopped after max_evaluations={max_evaluations}")
        for t in ts:
            endpoints.setdefault(t, None)
    return Calibration(name, (a, b), ts, endpoints, evals, integer=integer, notes=notes)


class _Budget(Exception):
    pass


@torch.no_grad()
def _accuracy(net: nn.Module, x: torch.Tensor, y: torch.Tensor, normalise: Callable[[torch.Tensor], torch.Tensor], bs: int) -> float:
    ok = 0
    for i in range(0, len(y), bs):
        ok += int((net(normalise(x[i : i + bs])).argmax(1) == y[i : i + bs]).sum())
    return ok / max(1, len(y))


def calibrate_model(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    corruption: str,
    *,
    search: tuple[float, float] | None = None,
    targets: Sequence[float] = DEFAULT_TARGETS,
    seed: int = 0,
    normalise: Callable[[torch.Tensor], torch.Tensor] | None = None,
    batch_size: int = 256,
    grid: int = 7,
    tolerance: float | None = None,
    max_evaluations: int = 40,
    model_name: str = "",
) -> Calibration:
    """Calibrate the range of ``corruption`` for ``model`` on ``images`` (uint8 or [0, 1], N x C x H x W).

    ``corruption`` is a candidate (the parameter of its range, e.g. the number of rain drops; the
    default search interval is its published range) or a user corruption registered with
    :func:`~shiftbench.overlap.register_corruption` (default: its ``value_range``).
    Each evaluation corrupts every image with the same value (one key per image: ``calib:<i>``).
    """
    from .study_corruptions import apply_at_value, get_user_corruption, resolve

    sc = resolve(corruption, where="corruption")
    integer = False
    if sc.kind == "user":
        uc = get_user_corruption(sc.base)
        integer, default = uc.integer, uc.value_range
    elif sc.kind == "candidate" and sc.severity is None:
        from ..corruptions.candidates import CANDIDATES

        spec = CANDIDATES[sc.base]
        integer, default = spec.integer, (float(spec.mild), float(spec.harsh))
    else:
        raise InvalidArgumentError(
            "corruption", corruption, "a candidate corruption or a user corruption with a parameter range"
        )
    if len(images) != len(labels) or len(labels) == 0:
        raise InvalidArgumentError("labels", len(labels), f"one label per image ({len(images)} images)")
    norm = normalise or (lambda x: x.to(torch.float32) / 255.0 if x.dtype == torch.uint8 else x.to(torch.float32))
    model.eval()
    clean = _accuracy(model, images, labels, norm, batch_size)
    if clean <= 0:
        raise InvalidArgumentError("model", model_name or type(model).__name__, "a model with clean accuracy > 0")
    keys = [f"calib:{i}" for i in range(len(labels))]

    def robustness(v: float) -> tuple[float, float]:
        acc = _accuracy(model, apply_at_value(images, sc.base, v, seed=seed, keys=keys), labels, norm, batch_size)
        return acc / clean, acc

    cal = calibrate(
        robustness,
        search or default,
        targets,
        integer=integer,
        grid=grid,
        tolerance=tolerance,
        max_evaluations=max_evaluations,
        name=sc.base,
    )
    cal.clean_accuracy = clean
    cal.model = model_name
    return cal


def plot_calibration(cal: Calibration, path: str | Path, *, dpi: int = 130) -> Path:
    """Robustness against the parameter, every evaluation marked, the targets and endpoints drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise MissingDependencyError("matplotlib", "the calibration plot", "plot") from e
    p = Path(path)
    ev = sorted(cal.evaluations)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([e[0] for e in ev], [e[1] for e in ev], "-", color="steelblue", linewidth=1)
    ax.plot([e[0] for e in cal.evaluations], [e[1] for e in cal.evaluations], "o", color="steelblue", markersize=4,
            label=f"{len(cal.evaluations)} evaluations")
    for t in cal.targets:
        ax.axhline(t, color="gray", linestyle=":", linewidth=1)
        v = cal.endpoints.get(t)
        if v is not None:
            ax.axvline(v, color="firebrick", linestyle="--", linewidth=1)
            ax.annotate(f"R={t:g} at {v:.4g}", (v, t), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlabel(f"{cal.corruption.removeprefix('noc_')} parameter (mild -> harsh)")
    ax.set_ylabel("robustness score R = A_c / A_clean")
    ax.set_ylim(0, 1.05)
    if cal.search[0] > cal.search[1]:
        ax.invert_xaxis()
    ax.legend(fontsize=8)
    ax.set_title(f"Severity calibration: {cal.corruption}" + (f"\n{cal.model}" if cal.model else ""), fontsize=10)
    fig.tight_layout()
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=dpi)
    plt.close(fig)
    return p
