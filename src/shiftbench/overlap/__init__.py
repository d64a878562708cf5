"""Corruption overlap, benchmark balance and coverage, Algorithm 1 and ImageNet-NOC.

Implements Laugros, Caplier & Ospici: *Increasing the coverage and balance of
robustness benchmarks by using non-overlapping corruptions* (ICLR 2021 submission)
and *Using the overlapping score to improve corruption benchmarks* (ICIP 2021).
See ``docs/overlap.md``.
"""

from __future__ import annotations

from . import candidates
from .candidates import CANDIDATES, PAPER_CANDIDATES, candidate_names, corrupt_candidate

__all__ = ["candidates", "CANDIDATES", "PAPER_CANDIDATES", "candidate_names", "corrupt_candidate"]
