"""``shiftbench report``: one self-contained HTML file (inline CSS/JS, embedded figures) from a results store.

* :func:`build_report`: the report from every registered benchmark's stored evaluations.
* :class:`ReportFigure` (from :mod:`shiftbench.evaluation.figures`, the plotting helpers that a
  benchmark's ``report_figures`` hook uses).

Needs ``pip install 'shiftbench[report]'`` (jinja2, matplotlib).
"""

from __future__ import annotations

from ..evaluation.figures import ReportFigure
from .build import ReportResult, build_report

__all__ = ["ReportResult", "build_report", "ReportFigure"]
