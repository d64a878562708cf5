"""Bar chart of the ImageNet-D error analysis (Rusak et al., 2022, Figure 2); needs matplotlib (``shiftbench[plot]``)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..evaluation.errors import MissingPackageError
from .metrics import ConfusionMatrix, PredictionCount

__all__ = ["plot_error_analysis", "error_analysis_figure", "plot_confusion_matrix", "INSIDE_COLOR", "OUTSIDE_COLOR"]

INSIDE_COLOR = "#1f77b4"  # blue: the predicted class is inside ImageNet-D
OUTSIDE_COLOR = "#ff7f0e"  # orange: outside ImageNet-D


def _pyplot(what: str):  # type: ignore[no-untyped-def]
    if importlib.util.find_spec("matplotlib") is None:
        raise MissingPackageError("matplotlib", what, "pip install 'shiftbench[plot]'  (or: pip install matplotlib)")
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_confusion_matrix(cm: ConfusionMatrix, path: str | Path, *, title: str | None = None) -> Path:
    """Write the row-normalised class-confusion matrix (Rusak et al., 2022, section 1's check of the mapping) as an image.

    Rows: true ImageNet-D classes that have images; columns: the same classes plus predictions
    outside ImageNet-D (last column). A good mapping puts the mass on the diagonal.

    Raises:
        MissingPackageError: matplotlib is not installed (the message gives the install command).
    """
    plt = _pyplot("the ImageNet-D confusion-matrix chart")
    import numpy as np

    tot = cm.counts.sum(axis=1)
    rows = [i for i in range(len(cm.classes)) if tot[i]]
    cols = [*rows, len(cm.classes)]
    share = cm.counts[np.ix_(rows, cols)] / tot[rows][:, None]
    side = max(4.0, 0.12 * len(cols) + 2.5)
    fig, ax = plt.subplots(figsize=(side, side))
    im = ax.imshow(share, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
    names = [cm.classes[i] for i in rows]
    font = 9 if len(cols) <= 30 else 5
    ax.set_yticks(range(len(rows)), names, fontsize=font)
    ax.set_xticks(range(len(cols)), [*names, "outside"], rotation=90, fontsize=font)
    ax.set_ylabel("true class (DomainNet folder, merged)")
    ax.set_xlabel("predicted ImageNet class mapped to ImageNet-D")
    fig.colorbar(im, ax=ax, fraction=0.03, label="share of the true class's images")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def plot_error_analysis(
    analysis: Mapping[str, Sequence[PredictionCount]], path: str | Path, *, title: str | None = None
) -> Path:
    """Write one horizontal bar panel per domain: most frequent predictions, blue inside / orange outside ImageNet-D.

    Raises:
        MissingPackageError: matplotlib is not installed (the message gives the install command).
    """
    plt = _pyplot("the ImageNet-D error-analysis chart")
    fig = error_analysis_figure(analysis, title=title)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def error_analysis_figure(analysis: Mapping[str, Sequence[PredictionCount]], *, title: str | None = None):  # type: ignore[no-untyped-def]
    """The error-analysis chart of :func:`plot_error_analysis` as a matplotlib figure (not saved, not closed)."""
    plt = _pyplot("the ImageNet-D error-analysis chart")
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
    return fig
