"""Figures of the HTML report: one matplotlib figure each, drawn by generic helpers that benchmark modules call.

A benchmark module gives the report its figures through
:meth:`shiftbench.evaluation.protocol.Benchmark.report_figures`, returning
:class:`ReportFigure` objects built with the helpers here (published models
next to the user's models, per-severity curves, grouped bars, heatmaps). The
report embeds each as a PNG (base64) and ``--figures DIR`` also writes it as
PNG and SVG.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from .errors import MissingPackageError

__all__ = [
    "ReportFigure",
    "pyplot",
    "published_scatter",
    "line_chart",
    "small_multiples",
    "bar_chart",
    "heatmap",
    "png_bytes",
    "svg_text",
]

PUBLISHED_COLOR = "#8c8c8c"
USER_COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#e377c2", "#bcbd22")


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed).

    Raises:
        MissingPackageError: matplotlib is not installed (with the install command).
    """
    try:
        import matplotlib
    except ImportError as e:
        raise MissingPackageError(
            "matplotlib", "the figures of `shiftbench report`", "pip install 'shiftbench[report]'"
        ) from e
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


@dataclass
class ReportFigure:
    """One figure of the report.

    Attributes:
        name: file-name stem for ``--figures`` (letters, digits, ``-``, ``_``), unique within a benchmark.
        title: the heading above it.
        caption: one or two sentences: what it shows and where the published numbers come from.
        figure: the matplotlib figure.
    """

    name: str
    title: str
    caption: str
    figure: Any = field(repr=False)


def png_bytes(fig: Any, dpi: int = 96) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def svg_text(fig: Any) -> str:
    """The figure as SVG text."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def png_data_uri(fig: Any) -> str:
    """The figure as a ``data:image/png;base64,...`` URI."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(fig)).decode("ascii")


def text_label(name: Any) -> str:
    """A name (a model, a corruption, a study) as matplotlib text that shows exactly as written: ``$`` escaped
    (no mathtext: ``$\\frac{1}{$`` would not parse), a leading ``_`` kept visible (matplotlib leaves labels
    starting with ``_`` out of legends) and control characters escaped."""
    text = "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in str(name))
    text = text.replace("$", r"\$")
    return " " + text if text.startswith("_") else text


def _finite(v: object) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _finish(fig: Any, ax: Any, xlabel: str, ylabel: str, title: str, grid: str = "both") -> Any:
    """Axis labels, title, grid and legend, the same on every chart."""
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(axis=grid, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def published_scatter(
    published: Sequence[tuple[str, float | None, float | None]],
    measured: Sequence[tuple[str, float | None, float | None]],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    reference: float | None = None,
    intervals: Mapping[str, tuple[Sequence[float] | None, Sequence[float] | None]] | None = None,
) -> Any:
    """Published models (grey, labelled) and the user's models (colour) in one x-y plane.

    Points with a missing coordinate are left out. ``reference`` draws a dashed
    horizontal line (e.g. 100 = AlexNet's CE). ``intervals``: a measured model's
    (x interval, y interval), each ``(low, high)`` or None, drawn as error bars.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    pub = [(n, x, y) for n, x, y in published if _finite(x) and _finite(y)]
    if pub:
        ax.scatter([p[1] for p in pub], [p[2] for p in pub], color=PUBLISHED_COLOR, s=28, label="published", zorder=2)
        for n, x, y in pub:
            ax.annotate(text_label(n), (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7, color="#555555")
    mine = [(n, x, y) for n, x, y in measured if _finite(x) and _finite(y)]
    for i, (n, x, y) in enumerate(mine):
        colour = USER_COLORS[i % len(USER_COLORS)]
        ax.scatter([x], [y], color=colour, marker="*", s=140, label=text_label(n), zorder=3)
        xi, yi = (intervals or {}).get(n, (None, None))
        if xi is not None or yi is not None:
            ax.errorbar([x], [y], xerr=None if xi is None else [[x - xi[0]], [xi[1] - x]],
                        yerr=None if yi is None else [[y - yi[0]], [yi[1] - y]],
                        fmt="none", ecolor=colour, elinewidth=1, capsize=3, zorder=2)
    if reference is not None:
        ax.axhline(reference, color="#bbbbbb", linestyle="--", linewidth=1, zorder=1)
    return _finish(fig, ax, xlabel, ylabel, title)


def line_chart(
    series: Mapping[str, Mapping[Any, float | None]],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    dashed: Sequence[str] = (),
) -> Any:
    """One line per series over shared x values (e.g. error per severity); ``dashed``: series drawn dashed (published)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    _lines(ax, series, dashed)
    return _finish(fig, ax, xlabel, ylabel, title)


def _colours(names: Sequence[str], dashed: Sequence[str]) -> dict[str, str]:
    """One colour per series name (grey for the dashed, published ones), the same in every panel."""
    user = [n for n in dict.fromkeys(names) if n not in dashed]
    return {n: PUBLISHED_COLOR for n in dashed} | {n: USER_COLORS[i % len(USER_COLORS)] for i, n in enumerate(user)}


def _lines(ax: Any, series: Mapping[str, Mapping[Any, float | None]], dashed: Sequence[str],
           colours: Mapping[str, str] | None = None) -> None:
    col = colours if colours is not None else _colours(list(series), dashed)
    for name, pts in series.items():
        xs = [x for x in pts if _finite(pts[x])]
        if xs:
            style, size = ("--o", 4) if name in dashed else ("-o", 5)
            ax.plot(xs, [pts[x] for x in xs], style, color=col[name], label=text_label(name), markersize=size)


def small_multiples(
    panels: Mapping[str, Mapping[str, Mapping[Any, float | None]]],
    *,
    xlabel: str,
    ylabel: str,
    dashed: Sequence[str] = (),
    columns: int = 5,
) -> Any:
    """One small line chart per panel (e.g. per corruption: error per severity of each model), shared axes."""
    plt = pyplot()
    n = max(len(panels), 1)
    cols = min(columns, n)
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(2.6 * cols, 2.2 * nrows + 0.6), squeeze=False,
                             sharex=True, sharey=True)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    colours = _colours([n for series in panels.values() for n in series], dashed)
    for ax, (title, series) in zip(axes.flat, panels.items(), strict=False):
        _lines(ax, series, dashed, colours)
        ax.set_title(text_label(title), fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)
    for ax in axes[-1, :]:
        ax.set_xlabel(xlabel, fontsize=8)
    seen: dict[str, Any] = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=min(len(seen), 4) or 1, fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def bar_chart(
    categories: Sequence[str],
    series: Mapping[str, Mapping[str, float | None]],
    *,
    ylabel: str,
    title: str = "",
    published: Sequence[str] = (),
    reference: float | None = None,
) -> Any:
    """Grouped bars: one group per category, one bar per series (``published`` series in grey shades)."""
    import numpy as np

    plt = pyplot()
    n = max(len(series), 1)
    fig, ax = plt.subplots(figsize=(max(6.4, 0.45 * len(categories) * (1 + 0.3 * n)), 4.2))
    width = 0.8 / n
    x = np.arange(len(categories))
    k = 0
    for i, (name, vals) in enumerate(series.items()):
        ys = [vals.get(c) for c in categories]
        ys = [y if _finite(y) else 0.0 for y in ys]
        if name in published:
            color = PUBLISHED_COLOR
            hatch = "//" if i % 2 else None
        else:
            color, hatch = USER_COLORS[k % len(USER_COLORS)], None
            k += 1
        ax.bar(x + (i - (n - 1) / 2) * width, ys, width, label=text_label(name), color=color, hatch=hatch, edgecolor="white")
    if reference is not None:
        ax.axhline(reference, color="#777777", linestyle="--", linewidth=1)
    ax.set_xticks(x, [text_label(c.removeprefix("noc_")) for c in categories], rotation=45, ha="right", fontsize=8)
    return _finish(fig, ax, "", ylabel, title, grid="y")


def heatmap(values: Any, rows: Sequence[str], cols: Sequence[str], *, title: str = "", vmin: float = 0.0,
            vmax: float = 1.0, label: str = "") -> Any:
    """An annotated heatmap (NaN cells read n/a)."""
    import numpy as np

    plt = pyplot()
    v = np.asarray(values, dtype=float)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(cols) + 2.0), max(3.4, 0.5 * len(rows) + 1.6)))
    im = ax.imshow(np.ma.masked_invalid(v), vmin=vmin, vmax=vmax, cmap="viridis")
    ax.set_xticks(range(len(cols)), [text_label(c.removeprefix("noc_")) for c in cols], rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), [text_label(r.removeprefix("noc_")) for r in rows], fontsize=8)
    for i in range(v.shape[0]):
        for j in range(v.shape[1]):
            val = v[i, j]
            txt = "n/a" if math.isnan(val) else f"{val:.2f}"
            ax.text(j, i, txt, ha="center", va="center", fontsize=7,
                    color="dimgray" if math.isnan(val) else ("white" if val < vmin + 0.6 * (vmax - vmin) else "black"))
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=label)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
