"""Bar chart of the ImageNet-D error analysis (004 Figure 2); needs matplotlib (``shiftbench[plot]``)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..evaluation.errors import MissingPackageError
from .metrics import PredictionCount

__all__ = ["plot_error_analysis", "INSIDE_COLOR", "OUTSIDE_COLOR"]

INSIDE_COLOR = "#1f77b4"  # blue: the predicted class is inside ImageNet-D
OUTSIDE_COLOR = "#ff7f0e"  # orange: outside ImageNet-D


def plot_error_analysis(
    analysis: Mapping[str, Sequence[PredictionCount]], path: str | Path, *, title: str | None = None
) -> Path:
    """Write one horizontal bar panel per domain: most frequent predictions, blue inside / orange outside ImageNet-D.

    Raises:
        MissingPackageError: matplotlib is not installed (the message gives the install command).
    """
    if importlib.util.find_spec("matplotlib") is None:
        raise MissingPackageError(
            "matplotlib",
            "the ImageNet-D error-analysis chart",
            "pip install 'shiftbench[plot]'  (or: pip install matplotlib)",
        )
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    domains = [d for d, rows in analysis.items() if rows]
    n = max(len(domains), 1)
    cols = min(3, n)
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[len(domains) :]:
        ax.axis("off")
    for ax, d in zip(axes.flat, domains, strict=False):
        rows = list(analysis[d])[::-1]
        ax.barh(
            [r.name for r in rows],
            [100.0 * r.share for r in rows],
            color=[INSIDE_COLOR if r.inside else OUTSIDE_COLOR for r in rows],
        )
        ax.set_title(d)
        ax.set_xlabel("% of predictions")
        ax.tick_params(axis="y", labelsize=8)
    fig.legend(
        handles=[
            Patch(color=INSIDE_COLOR, label="inside ImageNet-D"),
            Patch(color=OUTSIDE_COLOR, label="outside ImageNet-D"),
        ],
        loc="lower center",
        ncol=2,
    )
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95 if title else 1))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
