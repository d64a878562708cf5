"""ImageNet-D reports: the per-domain table with the error analysis, the notes, JSON/CSV records, the leaderboard.

The benchmark itself (options, evaluation, results listing) is :mod:`shiftbench.benchmarks.imagenet_d`.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..errors import ShiftbenchError
from .evaluate import ImageNetDResult, stored_correlations
from .mapping import DOMAINS, benchmark_name
from .metrics import ALEXNET_SOURCE, alexnet_errors, confusion_matrix

__all__ = [
    "result_rows",
    "result_notes",
    "result_json",
    "result_csv",
    "render_result",
    "correlation_notes",
    "render_leaderboard",
    "leaderboard_csv",
    "confusion_outputs",
    "imagenet_val_record",
    "render_imagenet_val",
]

def _pct(x: float | None, nd: int = 1) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{nd}f}"


def result_rows(r: ImageNetDResult) -> list[dict[str, Any]]:
    base = alexnet_errors()
    out = []
    for d in r.domains:
        f = r.filtered.get(d)
        out.append(
            {
                "model": r.model,
                "mapping": r.mapping,
                "domain": d,
                "images": r.n_images.get(d, 0),
                "top1_error": r.errors.get(d),
                "top5_error": r.top5_errors.get(d),
                "alexnet_error": base[d],
                "de": r.de.get(d),
                "filtered_error": f.filtered_error if f else None,
                "rejected": f.rejected if f else None,
                "mde": r.mde,
            }
        )
    return out


def render_result(r: ImageNetDResult, console: Console, details: bool, notes: list[str]) -> None:
    """The per-domain table (top-1 / top-5 error, AlexNet, DE, filtered error), mDE, the error analysis and notes."""
    t = Table(
        title=f"ImageNet-D ({r.mapping} mapping): {r.model}: top-1 error (%) and Domain Error",
        title_justify="left",
        header_style="bold",
    )
    for col in ("Domain", "Images", "Top-1 err", "Top-5 err", "AlexNet err", "DE (%)", "Filtered err", "Rejected"):
        t.add_column(col, justify="left" if col == "Domain" else "right")
    for row in result_rows(r):
        t.add_row(
            row["domain"],
            str(row["images"]),
            _pct(row["top1_error"]),
            _pct(row["top5_error"]),
            _pct(row["alexnet_error"]),
            _pct(row["de"]),
            _pct(row["filtered_error"]),
            _pct(row["rejected"]),
        )
    t.add_section()
    t.add_row("mDE", "", "", "", "", "–" if r.mde is None else f"{r.mde:.1f}", "", "", style="bold")
    console.print(t)
    if details:
        for d in r.domains:
            rows = r.analysis.get(d) or []
            if not rows:
                continue
            a = Table(title=f"{d}: most frequent predictions", title_justify="left", header_style="bold")
            for col in ("#", "ImageNet class", "Index", "Predictions", "Share (%)", "ImageNet-D"):
                a.add_column(col, justify="right" if col in ("#", "Index", "Predictions", "Share (%)") else "left")
            for p in rows:
                flag = f"inside ({', '.join(p.maps_to[:3])})" if p.inside else "outside"
                a.add_row(str(p.rank), p.name, str(p.index), str(p.count), f"{100 * p.share:.1f}", flag)
            console.print(a)
    for n in notes:
        console.print(f"• {n}", highlight=False)


def correlation_notes(store: str | Path) -> list[str]:
    """Rank correlations between domains over the models stored in ``store`` (one note each)."""
    try:
        corr = stored_correlations(store)
    except (ShiftbenchError, OSError):
        return []
    out = []
    for (a, b), (rho, n) in corr.items():
        if rho is not None:
            out.append(f"Spearman rank correlation {a} vs {b} over {n} stored models: {rho:+.2f}")
    return out




def result_notes(result: ImageNetDResult, store: str | Path | None, details: bool) -> list[str]:
    """Notes under the report: data, normalisation, missing domains, sampling error, left-out classes, the chart."""
    notes = [
        f"Data: {result.data}.",
        f"Class mapping: {result.mapping} (benchmark {benchmark_name(result.mapping)}).",
        f"DE and mDE are normalised by {ALEXNET_SOURCE}.",
    ]
    if result.mde is None:
        missing = [d for d in DOMAINS if d not in result.errors]
        notes.append(f"No mDE: it needs all six domains (missing {', '.join(missing)}).")
    n_min = min(result.n_images.values()) if result.n_images else 0
    if 0 < n_min < 1000:
        notes.append(
            f"Only {n_min} images in some domain: an error rate carries a standard error of up to "
            f"{50 / math.sqrt(n_min):.1f} points."
        )
    notes += [f"Warning: {w}" for w in result.warnings]
    outside = {d: n for d, n in result.outside_imagenet_d.items() if n}
    if outside:
        notes.append(
            "Left out by design (DomainNet classes outside ImageNet-D): "
            + ", ".join(f"{d} {n} image(s)" for d, n in outside.items())
        )
    if store and result.evaluation_id is not None:
        notes.append(
            f"Predictions stored as ImageNet-D evaluation {result.evaluation_id} in {store} (tables imagenet_d_*)."
        )
        if details:
            # named after the store too: two stores in one folder each keep their own chart
            chart = Path(store).parent / f"{Path(store).stem}-imagenet-d-eval{result.evaluation_id}-top-predictions.png"
            if importlib.util.find_spec("matplotlib") is not None:
                from .plot import plot_error_analysis

                title = f"ImageNet-D: most frequent predictions of {result.model}"
                plot_error_analysis(result.analysis, chart, title=title)
                notes.append(f"Error-analysis chart (blue: inside ImageNet-D, orange: outside): {chart}")
            else:
                notes.append("No error-analysis chart: it needs matplotlib (pip install 'shiftbench[plot]').")
            notes += correlation_notes(store)
    return notes


def result_json(result: ImageNetDResult, notes: list[str], confusion: dict[str, Any] | None = None) -> str:
    """The evaluation as JSON text (with its notes and the real domain's class-confusion matrix)."""
    return json.dumps({**result.to_dict(), "confusion_real": confusion or {}, "notes": notes}, indent=2) + "\n"


def result_csv(result: ImageNetDResult) -> str:
    """One CSV line per domain."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(result_rows(result)[0]) if result.domains else ["domain"])
    w.writeheader()
    w.writerows(result_rows(result))
    return buf.getvalue()


def render_leaderboard(records: list[dict[str, Any]], console: Console) -> None:
    """Stored ImageNet-D evaluations ordered by mDE, one leaderboard per class mapping (they score other class sets)."""
    for bench in sorted({r.get("benchmark", "imagenet-d") for r in records}):
        group = [r for r in records if r.get("benchmark", "imagenet-d") == bench]
        mapping = group[0].get("mapping", "paper")
        title = f"ImageNet-D leaderboard by mDE (top-1 error per domain, %; {mapping} mapping, benchmark {bench})"
        t = Table(title=title, title_justify="left", header_style="bold")
        for col in ("Model", "Images", *DOMAINS, "mDE"):
            t.add_column(col, justify="left" if col == "Model" else "right")
        for r in sorted(group, key=lambda r: (r["mde"] is None, r["mde"] or 0.0)):
            cells = [f"{100 * r['errors'][d]:.1f}" if d in r["errors"] else "–" for d in DOMAINS]
            mde = "–" if r["mde"] is None else f"{r['mde']:.1f}"
            t.add_row(f"{r['model']} #{r['evaluation']}", str(r["images"]), *cells, mde)
        console.print(t)
    console.print("mDE: mean over the six domains of the error divided by AlexNet's (ImageNet-D Table 2); – : domain not stored.")


def leaderboard_csv(records: list[dict[str, Any]]) -> str:
    """The leaderboard records as CSV, one ``error_<domain>`` column per domain."""
    flat = [
        {k: v for k, v in r.items() if k != "errors"} | {f"error_{d}": r["errors"].get(d) for d in DOMAINS}
        for r in records
    ]
    buf = io.StringIO()
    if flat:
        w = csv.DictWriter(buf, fieldnames=list(flat[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(flat)
    return buf.getvalue()


def confusion_outputs(
    result: ImageNetDResult, store: str | Path | None, details: bool
) -> tuple[dict[str, Any], list[str]]:
    """Rusak et al. (2022) section 1's check of the mapping: the class-confusion matrix on the real domain (JSON part, notes).

    With a store and ``details``, the matrix is also written next to the store as CSV and PNG.
    """
    p = result.predictions.get("real")
    if p is None or not p.keys:
        return {}, []
    cm = confusion_matrix(p.labels, p.top1, result.mapping)
    worst = cm.confusions(10)
    doc = {
        "columns": list(cm.columns),
        "classes": list(cm.classes),
        "counts": cm.counts.tolist(),
        "diagonal_share": cm.diagonal_share(),
        "ambiguous": cm.ambiguous,
        "confusions": [{"true": a, "predicted": b, "count": n, "share": s} for a, b, n, s in worst],
    }
    notes = [
        f"Mapping check (real domain): {c} images predicted as {q}: {n} ({100 * s:.0f} %)" for c, q, n, s in worst[:5]
    ]
    if store and result.evaluation_id is not None and details:
        base = Path(store).parent / f"imagenet-d-eval{result.evaluation_id}-confusion-real"
        rows = cm.to_rows()
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        base.with_suffix(".csv").write_text(buf.getvalue(), encoding="utf-8")
        notes.append(f"Class-confusion matrix of the real domain (CSV): {base.with_suffix('.csv')}")
        if importlib.util.find_spec("matplotlib") is not None:
            from .plot import plot_confusion_matrix

            plot_confusion_matrix(cm, base.with_suffix(".png"), title=f"{result.model}, real ({result.mapping})")
            notes.append(f"Class-confusion chart: {base.with_suffix('.png')}")
    return doc, notes


def imagenet_val_record(model: str, data: str, mapping: str, row: Any, skipped: int) -> dict[str, Any]:
    """Rusak et al. (2022) Table 4's first row (ImageNet val restricted to the ImageNet-D classes) as one flat record."""
    return {
        "model": model,
        "data": str(data),
        "mapping": mapping,
        "benchmark": benchmark_name(mapping),
        "images": row.n_total,
        "images_in_imagenet_d": row.n,
        "top1_error": row.error,
        "filtered_error": row.filtered_error,
        "rejected": row.rejected,
        "outside_imagenet_d": row.outside,
        "unreadable_skipped": skipped,
    }


def render_imagenet_val(rec: dict[str, Any], console: Console) -> None:
    """The Table 4 IN-val row as a table with its reading note."""
    t = Table(
        title=f"ImageNet-D Table 4, IN val row ({rec['mapping']} mapping): {rec['model']}", title_justify="left"
    )
    for col in ("Images", "In ImageNet-D", "Top-1 err", "Filtered err", "Rejected", "Outside ImageNet-D"):
        t.add_column(col, justify="right")
    t.add_row(
        str(rec["images"]),
        str(rec["images_in_imagenet_d"]),
        _pct(rec["top1_error"]),
        _pct(rec["filtered_error"]),
        _pct(rec["rejected"]),
        _pct(rec["outside_imagenet_d"]),
    )
    console.print(t)
    console.print(
        "• Labels and predictions mapped to ImageNet-D; scored on the images whose label is in ImageNet-D. "
        "Rusak et al. (2022) print 12.1 / 13.4 / 52.7 for a ResNet50 (docs/imagenet-d.md: what the 52.7 can be).",
        highlight=False,
    )
