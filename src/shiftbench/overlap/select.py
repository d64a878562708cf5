"""Algorithm 1 of Laugros et al. (2020): the largest benchmark of non-overlapping corruptions.

For an overlapping threshold t:

(2) take the largest subsets of the candidates whose pairwise overlapping scores are
    all under t, and
(3) among them, the one with the lowest mean pairwise overlapping score.

"Under the threshold" is read as ``O <= t``: with t = 0, Laugros et al.'s (2020) Appendix B builds a
benchmark of five corruptions whose overlaps are exactly 0, which ``O < 0`` could
never give.

Step (2) is a maximum-clique problem on the graph whose edges join corruptions with
``O <= t``. :func:`maximum_cliques` enumerates every maximum clique with the
Bron-Kerbosch algorithm (Tomita pivoting) on bitsets, pruning every branch that
cannot reach the size of the best clique found so far; it never enumerates the 2^n
subsets. Ties in the mean overlap (to 1e-12) go to the subset that comes first in
the candidates' order; :attr:`Selection.ties` lists the others.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from .scores import OverlapMatrix, check_overlap_matrix

__all__ = [
    "Selection",
    "maximum_cliques",
    "select_benchmark",
    "select_for_thresholds",
    "check_threshold",
    "mean_overlap",
]

_TIE = 1e-12


@dataclass(frozen=True)
class Selection:
    """The benchmark Algorithm 1 builds for one threshold.

    Attributes:
        threshold: the overlapping threshold.
        names: the selected corruptions, in the candidates' order.
        mean_overlap: mean pairwise overlapping score of ``names`` (0 for one corruption).
        max_overlap: largest pairwise score in ``names``.
        n_largest: how many subsets of this size satisfy the threshold.
        ties: other subsets of this size with the same mean overlap.
        excluded: candidates left out because their scores are undefined (NaN).
    """

    threshold: float
    names: tuple[str, ...]
    mean_overlap: float
    max_overlap: float
    n_largest: int
    ties: tuple[tuple[str, ...], ...] = ()
    excluded: tuple[str, ...] = field(default=())

    @property
    def size(self) -> int:
        return len(self.names)

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "names": list(self.names),
            "size": self.size,
            "mean_overlap": self.mean_overlap,
            "max_overlap": self.max_overlap,
            "n_largest": self.n_largest,
            "ties": [list(t) for t in self.ties],
            "excluded": list(self.excluded),
        }


def check_threshold(threshold: Any, argument: str = "threshold") -> float:
    """A threshold as float; must be a number in [0, 1]."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(argument, threshold, "a number in [0, 1]")
    t = float(threshold)
    if not math.isfinite(t) or not 0.0 <= t <= 1.0:
        raise InvalidArgumentError(argument, threshold, "a number in [0, 1] (overlapping scores are in [0, 1])")
    return t


def maximum_cliques(adjacency: Sequence[int], n: int) -> list[int]:
    """Every maximum clique of an undirected graph, as bitsets.

    Args:
        adjacency: ``adjacency[i]`` is the bitset of i's neighbours (without i).
        n: number of vertices.

    Returns:
        The maximum cliques (bitsets), each once; ``[0]`` for an empty graph.
    """
    best = [0]
    found: list[int] = []

    def expand(r: int, size: int, p: int, x: int) -> None:
        if p == 0:
            if x == 0:
                if size > best[0]:
                    best[0] = size
                    found.clear()
                if size == best[0]:
                    found.append(r)
            return
        if size + p.bit_count() < best[0]:
            return
        # Tomita pivot: the vertex of P | X with most neighbours in P
        px = p | x
        pivot, most = -1, -1
        while px:
            low = px & -px
            u = low.bit_length() - 1
            c = (p & adjacency[u]).bit_count()
            if c > most:
                pivot, most = u, c
            px ^= low
        cand = p & ~adjacency[pivot]
        while cand:
            low = cand & -cand
            v = low.bit_length() - 1
            if size + 1 + (p & adjacency[v]).bit_count() >= best[0]:
                expand(r | low, size + 1, p & adjacency[v], x & adjacency[v])
            p &= ~low
            x |= low
            cand ^= low
            if size + p.bit_count() < best[0]:
                return

    if n == 0:
        return [0]
    expand(0, 0, (1 << n) - 1, 0)
    return found


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def mean_overlap(values: np.ndarray, idx: Sequence[int]) -> float:
    """Mean of the pairwise scores of ``idx`` (0 for fewer than two)."""
    idx = list(idx)
    if len(idx) < 2:
        return 0.0
    sub = values[np.ix_(idx, idx)]
    iu = np.triu_indices(len(idx), 1)
    return float(sub[iu].mean())


def _as_matrix(overlaps: Any, names: Sequence[str] | None) -> tuple[list[str], np.ndarray]:
    if isinstance(overlaps, OverlapMatrix):
        if names is not None:
            overlaps = overlaps.subset(names)
        return list(overlaps.names), overlaps.values
    m = check_overlap_matrix(overlaps, names, allow_nan=True)
    return (list(names) if names is not None else [f"c{i}" for i in range(m.shape[0])]), m


def select_benchmark(overlaps: OverlapMatrix | Any, threshold: float, names: Sequence[str] | None = None) -> Selection:
    """Algorithm 1, steps (2) and (3), for one threshold.

    Args:
        overlaps: an :class:`OverlapMatrix`, or a square symmetric array of scores.
        threshold: in [0, 1]; pairs with ``O <= threshold`` may be together.
        names: names of the rows of an array (or a subset of an OverlapMatrix's names).

    Candidates with undefined (NaN) scores are left out and listed in ``excluded``.
    """
    t = check_threshold(threshold)
    all_names, m = _as_matrix(overlaps, names)
    # leave out undefined candidates: repeatedly the one with the most NaN scores, until none is left
    keep = list(range(len(all_names)))
    nan_rows: list[int] = []
    while keep:
        sub_nan = np.isnan(m[np.ix_(keep, keep)]).sum(axis=1)
        if not sub_nan.any():
            break
        worst = keep[int(np.flatnonzero(sub_nan == sub_nan.max())[-1])]
        nan_rows.append(worst)
        keep.remove(worst)
    nan_rows.sort()
    excluded = tuple(all_names[i] for i in nan_rows)
    names_k = [all_names[i] for i in keep]
    v = m[np.ix_(keep, keep)] if keep else np.zeros((0, 0))
    n = len(names_k)
    if n == 0:
        raise InvalidArgumentError("overlaps", "no candidate with defined scores", "at least one corruption")
    adj = [0] * n
    for i in range(n):
        for j in range(n):
            if i != j and v[i, j] <= t:
                adj[i] |= 1 << j
    cliques = maximum_cliques(adj, n)
    scored = []
    for c in cliques:
        idx = _bits(c)
        scored.append((mean_overlap(v, idx), idx))
    lowest = min(s for s, _ in scored)
    best = sorted([idx for s, idx in scored if s <= lowest + _TIE])
    chosen = best[0]
    sub = v[np.ix_(chosen, chosen)]
    off = sub[~np.eye(len(chosen), dtype=bool)]
    return Selection(
        threshold=t,
        names=tuple(names_k[i] for i in chosen),
        mean_overlap=mean_overlap(v, chosen),
        max_overlap=float(off.max()) if off.size else 0.0,
        n_largest=len(cliques),
        ties=tuple(tuple(names_k[i] for i in idx) for idx in best[1:]),
        excluded=excluded,
    )


def select_for_thresholds(
    overlaps: OverlapMatrix | Any, thresholds: Sequence[float], names: Sequence[str] | None = None
) -> list[Selection]:
    """Algorithm 1 for each threshold (Laugros et al. (2020, Appendix B) use 0, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5)."""
    if isinstance(thresholds, (int, float)) or not isinstance(thresholds, Sequence) or not thresholds:
        raise InvalidArgumentError("thresholds", thresholds, "a non-empty list of numbers in [0, 1]")
    ts = [check_threshold(t, "thresholds") for t in thresholds]
    return [select_benchmark(overlaps, t, names) for t in ts]
