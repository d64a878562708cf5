"""Robustness score and corruption overlapping score as pure functions (Laugros et al., 2020, Section 3.1).

* Robustness score of model m to corruption c: ``R = A_c / A_clean``.
* Overlapping score of corruptions c1, c2 (Laugros et al., 2020, eq. 2), with m1/m2 the models trained
  with c1/c2 and ``standard`` the model trained on clean images::

      O = max(0, 1/2 * ((R[m1, c2] - R[std, c2]) / (R[m2, c2] - R[std, c2])
                      + (R[m2, c1] - R[std, c1]) / (R[m1, c1] - R[std, c1])))

  It is symmetric by construction (the two transfer directions are averaged), 1 when
  c1 = c2 and 0 when neither augmentation helps with the other corruption.

A denominator ``R[m, c] - R[std, c] <= 0`` means the model trained with c is not more
robust to c than the standard model: it did not learn its own corruption and the
score is undefined. :func:`overlap_score` raises :class:`UndefinedOverlapError` then;
:func:`overlap_matrix` raises too unless ``on_undefined="nan"``, which writes NaN and
lists the offending corruptions in :attr:`OverlapMatrix.undefined`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, ShiftbenchError

__all__ = [
    "CLEAN",
    "STANDARD",
    "UndefinedOverlapError",
    "AccuracyMatrix",
    "OverlapMatrix",
    "robustness_score",
    "overlap_score",
    "overlap_matrix",
    "check_overlap_matrix",
]

CLEAN = "clean"
"""Name of the clean test set (column) in an accuracy matrix."""
STANDARD = "standard"
"""Name of the model trained without corruption (row) in an accuracy matrix."""


class UndefinedOverlapError(ShiftbenchError, ValueError):
    """An overlapping score's denominator is zero or negative."""

    def __init__(self, corruption: str, gain: float) -> None:
        self.corruption = corruption
        self.gain = gain
        super().__init__(
            f"the overlapping score is undefined for {corruption!r}: the model trained with {corruption!r} is not "
            f"more robust to it than the standard model (R_model - R_standard = {gain:+.4f} <= 0), so it did not "
            "learn its own corruption. Train it longer or check the corruption, or pass on_undefined='nan'."
        )


def _number(argument: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(argument, value, "a number")
    v = float(value)
    if not math.isfinite(v):
        raise InvalidArgumentError(argument, value, "a finite number")
    return v


def _accuracy(argument: str, value: Any) -> float:
    v = _number(argument, value)
    if not 0.0 <= v <= 1.0:
        raise InvalidArgumentError(argument, value, "an accuracy in [0, 1] (a fraction, not a percentage)")
    return v


def robustness_score(accuracy_corrupted: float, accuracy_clean: float) -> float:
    """``R = A_c / A_clean`` (Laugros et al., 2020, Section 3.1).

    Raises:
        InvalidArgumentError: accuracies outside [0, 1], or ``accuracy_clean == 0``
            (the score needs a model that learned the clean task).
    """
    ac = _accuracy("accuracy_corrupted", accuracy_corrupted)
    a0 = _accuracy("accuracy_clean", accuracy_clean)
    if a0 <= 0.0:
        raise InvalidArgumentError(
            "accuracy_clean",
            accuracy_clean,
            "an accuracy > 0",
            "A model with no clean accuracy has no robustness score.",
        )
    return ac / a0


def overlap_score(
    r_m1_c2: float,
    r_std_c2: float,
    r_m2_c2: float,
    r_m2_c1: float,
    r_std_c1: float,
    r_m1_c1: float,
    *,
    c1: str = "c1",
    c2: str = "c2",
) -> float:
    """Laugros et al. (2020) eq. 2 from six robustness scores (``r_<model>_<corruption>``), clipped at 0.

    Raises:
        UndefinedOverlapError: ``r_m2_c2 <= r_std_c2`` or ``r_m1_c1 <= r_std_c1``.
    """
    vals = [
        _number(n, v)
        for n, v in zip(
            ("r_m1_c2", "r_std_c2", "r_m2_c2", "r_m2_c1", "r_std_c1", "r_m1_c1"),
            (r_m1_c2, r_std_c2, r_m2_c2, r_m2_c1, r_std_c1, r_m1_c1),
        )
    ]
    a, s2, d2, b, s1, d1 = vals
    if d2 - s2 <= 0:
        raise UndefinedOverlapError(c2, d2 - s2)
    if d1 - s1 <= 0:
        raise UndefinedOverlapError(c1, d1 - s1)
    return max(0.0, 0.5 * ((a - s2) / (d2 - s2) + (b - s1) / (d1 - s1)))


@dataclass
class AccuracyMatrix:
    """Accuracies of trained models (rows) on test sets (columns).

    Attributes:
        models: row names: ``"standard"`` and one per training corruption.
        tests: column names: ``"clean"`` and one per test corruption.
        values: ``len(models) x len(tests)`` accuracies in [0, 1].
    """

    models: list[str]
    tests: list[str]
    values: np.ndarray

    def __post_init__(self) -> None:
        self.models = [str(m) for m in self.models]
        self.tests = [str(t) for t in self.tests]
        v = np.asarray(self.values, dtype=np.float64)
        if v.ndim != 2 or v.shape != (len(self.models), len(self.tests)):
            raise InvalidArgumentError(
                "values", f"shape {v.shape}", f"a {len(self.models)} x {len(self.tests)} matrix (models x tests)"
            )
        if len(set(self.models)) != len(self.models) or len(set(self.tests)) != len(self.tests):
            raise InvalidArgumentError("models/tests", (self.models, self.tests), "unique names")
        if not np.all(np.isfinite(v)) or v.min() < 0 or v.max() > 1:
            raise InvalidArgumentError("values", "entries outside [0, 1]", "accuracies in [0, 1] (fractions)")
        self.values = v

    @classmethod
    def from_dict(cls, acc: Mapping[str, Mapping[str, float]]) -> AccuracyMatrix:
        """From ``{model: {test: accuracy}}``; every model needs every test."""
        models = list(acc)
        tests = list(next(iter(acc.values()))) if acc else []
        for m in models:
            if set(acc[m]) != set(tests):
                raise InvalidArgumentError(
                    "accuracies",
                    f"model {m!r} tested on {sorted(acc[m])}",
                    f"the same test sets for every model: {tests}",
                )
        return cls(models, tests, np.array([[acc[m][t] for t in tests] for m in models], dtype=np.float64))

    def get(self, model: str, test: str) -> float:
        return float(self.values[self.models.index(model), self.tests.index(test)])

    def robustness(self) -> np.ndarray:
        """``R[m, t] = A[m, t] / A[m, clean]`` (same shape as :attr:`values`)."""
        if CLEAN not in self.tests:
            raise InvalidArgumentError("tests", self.tests, f"a {CLEAN!r} column (clean test accuracy)")
        clean = self.values[:, self.tests.index(CLEAN)]
        if np.any(clean <= 0):
            bad = [m for m, a in zip(self.models, clean) if a <= 0]
            raise InvalidArgumentError("accuracies", f"clean accuracy 0 for {bad}", "clean accuracies > 0")
        return self.values / clean[:, None]


@dataclass
class OverlapMatrix:
    """Symmetric overlapping scores between corruptions.

    Attributes:
        names: the corruptions, in order.
        values: ``n x n`` scores, normally in [0, 1] (diagonal 1; eq. 2 clips only at 0, so a
            transfer stronger than the corruption's own gain can exceed 1), NaN where undefined.
        undefined: corruptions whose model did not learn them (their rows/columns are NaN).
        gains: ``R[m_c, c] - R[standard, c]`` per corruption (how much the model trained with
            c gained on c; the denominators of eq. 2).
    """

    names: list[str]
    values: np.ndarray
    undefined: list[str] = field(default_factory=list)
    gains: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.names = [str(n) for n in self.names]
        self.values = check_overlap_matrix(self.values, self.names, allow_nan=True)

    def get(self, a: str, b: str) -> float:
        return float(self.values[self.names.index(a), self.names.index(b)])

    def subset(self, names: Sequence[str]) -> OverlapMatrix:
        idx = [self._index(n) for n in names]
        return OverlapMatrix(
            [self.names[i] for i in idx],
            self.values[np.ix_(idx, idx)],
            [n for n in self.undefined if n in names],
            {n: g for n, g in self.gains.items() if n in names},
        )

    def _index(self, name: str) -> int:
        if name not in self.names:
            from ..checks import suggest
            from ..errors import UnknownCorruptionError

            raise UnknownCorruptionError("corruption", name, self.names, suggest(name, self.names))
        return self.names.index(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "shiftbench-overlap/1",
            "names": self.names,
            "values": [[None if math.isnan(v) else round(float(v), 6) for v in row] for row in self.values],
            "undefined": self.undefined,
            "gains": self.gains,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> OverlapMatrix:
        try:
            names = list(doc["names"])
            vals = np.array(
                [[np.nan if v is None else float(v) for v in row] for row in doc["values"]], dtype=np.float64
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidArgumentError(
                "overlap matrix", type(doc).__name__, '{"names": [...], "values": [[...]]}'
            ) from e
        return cls(names, vals, list(doc.get("undefined", [])), dict(doc.get("gains", {})))


def check_overlap_matrix(values: Any, names: Sequence[str] | None = None, *, allow_nan: bool = False) -> np.ndarray:
    """Validate an overlap matrix: square, symmetric, finite entries >= 0 (NaN only if allowed).

    Scores are normally in [0, 1]; eq. 2 only clips at 0, so a score above 1 is possible
    (and kept) when a model transfers to another corruption better than that
    corruption's own model gains on it.

    Returns it as float64. Raises :class:`InvalidArgumentError` naming what is wrong.
    """
    try:
        m = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError("overlap matrix", type(values).__name__, "a square matrix of numbers") from e
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise InvalidArgumentError("overlap matrix", f"shape {m.shape}", "a square n x n matrix")
    if names is not None and len(names) != m.shape[0]:
        raise InvalidArgumentError("names", f"{len(names)} names", f"one name per row ({m.shape[0]})")
    if names is not None and len(set(names)) != len(names):
        raise InvalidArgumentError("names", list(names), "unique corruption names")
    nan = np.isnan(m)
    if nan.any() and not allow_nan:
        raise InvalidArgumentError(
            "overlap matrix", "NaN entries", "finite scores in [0, 1] (drop undefined corruptions)"
        )
    if not np.array_equal(nan, nan.T):
        raise InvalidArgumentError("overlap matrix", "NaN pattern not symmetric", "a symmetric matrix")
    f = np.where(nan, 0.0, m)
    if np.any(np.isinf(f)) or (f.size and f.min() < 0):
        raise InvalidArgumentError(
            "overlap matrix", f"entries in [{f.min():.3g}, {f.max():.3g}]", "finite scores >= 0 (eq. 2 clips at 0)"
        )
    if not np.allclose(f, f.T, atol=1e-9, rtol=0):
        i, j = np.unravel_index(np.argmax(np.abs(f - f.T)), f.shape)
        raise InvalidArgumentError(
            "overlap matrix",
            f"[{i}][{j}]={f[i, j]} but [{j}][{i}]={f[j, i]}",
            "a symmetric matrix (O[i][j] == O[j][i])",
        )
    return m


def overlap_matrix(
    accuracies: AccuracyMatrix | Mapping[str, Mapping[str, float]],
    corruptions: Sequence[str] | None = None,
    *,
    on_undefined: str = "raise",
) -> OverlapMatrix:
    """Overlapping scores (Laugros et al., 2020, eq. 2) between corruptions from an accuracy matrix.

    Args:
        accuracies: rows ``"standard"`` and one model per corruption (named after it),
            columns ``"clean"`` and each corruption.
        corruptions: which corruptions (default: every model except the standard one
            that also has a test column).
        on_undefined: ``"raise"`` (:class:`UndefinedOverlapError`) or ``"nan"``.
    """
    acc = accuracies if isinstance(accuracies, AccuracyMatrix) else AccuracyMatrix.from_dict(accuracies)
    if on_undefined not in ("raise", "nan"):
        raise InvalidArgumentError("on_undefined", on_undefined, "'raise' or 'nan'")
    if STANDARD not in acc.models:
        raise InvalidArgumentError("models", acc.models, f"a {STANDARD!r} row (the model trained on clean images)")
    names = (
        list(corruptions) if corruptions is not None else [m for m in acc.models if m != STANDARD and m in acc.tests]
    )
    for c in names:
        if c not in acc.models or c not in acc.tests:
            from ..checks import suggest
            from ..errors import UnknownCorruptionError

            have = [m for m in acc.models if m in acc.tests and m != STANDARD]
            raise UnknownCorruptionError("corruption", c, have, suggest(c, have))
    r = acc.robustness()
    mi = {m: i for i, m in enumerate(acc.models)}
    ti = {t: i for i, t in enumerate(acc.tests)}
    std = mi[STANDARD]
    gains = {c: float(r[mi[c], ti[c]] - r[std, ti[c]]) for c in names}
    undefined = [c for c in names if gains[c] <= 0]
    if undefined and on_undefined == "raise":
        raise UndefinedOverlapError(undefined[0], gains[undefined[0]])
    n = len(names)
    out = np.full((n, n), np.nan)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if a in undefined or b in undefined:
                continue
            if i == j:
                out[i, j] = 1.0
                continue
            t_ab = (r[mi[a], ti[b]] - r[std, ti[b]]) / gains[b]
            t_ba = (r[mi[b], ti[a]] - r[std, ti[a]]) / gains[a]
            out[i, j] = max(0.0, 0.5 * (t_ab + t_ba))
    return OverlapMatrix(names, out, undefined, gains)
