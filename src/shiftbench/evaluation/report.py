"""Reports: a Table-1 style table (rich), JSON and CSV.

Every report states the baseline, which corruptions entered mCE (and which are
missing), that the extra corruptions are separate, and how many images stand
behind the numbers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from .metrics import (
    BENCHMARK_CORRUPTIONS,
    EXTRA_CORRUPTIONS,
    FAMILIES,
    Baseline,
    Summary,
    family_of,
)
from .store import records_to_csv

__all__ = ["ReportRow", "SHORT_NAMES", "baseline_row", "render_table", "render_details", "to_json", "to_csv", "FORMATS"]

FORMATS = ("table", "json", "csv")

SHORT_NAMES: dict[str, str] = {
    "gaussian_noise": "Gauss.",
    "shot_noise": "Shot",
    "impulse_noise": "Impul.",
    "defocus_blur": "Defoc.",
    "glass_blur": "Glass",
    "motion_blur": "Motion",
    "zoom_blur": "Zoom",
    "snow": "Snow",
    "frost": "Frost",
    "fog": "Fog",
    "brightness": "Bright",
    "contrast": "Contr.",
    "elastic_transform": "Elast.",
    "pixelate": "Pixel",
    "jpeg_compression": "JPEG",
    "speckle_noise": "Speckle",
    "gaussian_blur": "G.Blur",
    "spatter": "Spatter",
    "saturate": "Satur.",
}
"""Column titles after Table 1 of the ImageNet-C paper (shortened to six letters; extras added)."""

_TABLE1_GROUP = {
    **{c: "Noise" for c in FAMILIES["noise"]},
    **{c: "Blur" for c in FAMILIES["blur"]},
    **{c: "Weather" for c in FAMILIES["weather"]},
    **{c: "Digital" for c in FAMILIES["digital"]},
}


@dataclass
class ReportRow:
    """One line of a Table-1 style report.

    Attributes:
        label: the row title (model name, possibly with its evaluation id).
        summary: the scores.
        n_images: images per condition behind the numbers (None for published rows).
        meta: anything else the JSON/CSV outputs should carry (evaluation id, data, settings).
        reference: True for a published baseline row (AlexNet = 100).
    """

    label: str
    summary: Summary
    n_images: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    reference: bool = False


def baseline_row(baseline: Baseline, corruptions: Sequence[str]) -> ReportRow:
    """The baseline's own row (CE 100 everywhere by definition), for reference at the top of a table."""
    from .metrics import summarize

    errors = {c: baseline.errors[c] for c in corruptions if c in baseline.errors}
    s = summarize(baseline.name, errors, baseline.clean_error, baseline)
    return ReportRow(f"{baseline.name} (baseline)", s, baseline.n_images, {"source": baseline.source}, reference=True)


def _pct(v: float | None, digits: int) -> str:
    return "–" if v is None else f"{100.0 * v:.{digits}f}"


def _columns(rows: Sequence[ReportRow]) -> tuple[list[str], list[str]]:
    present = {s.name for r in rows for s in r.summary.scores}
    bench = list(BENCHMARK_CORRUPTIONS)
    extra = [c for c in EXTRA_CORRUPTIONS if c in present]
    others = sorted(c for c in present if c not in BENCHMARK_CORRUPTIONS and c not in EXTRA_CORRUPTIONS)
    return bench, extra + others


def _table1(
    rows: Sequence[ReportRow], title: str | None, corruptions: Sequence[str], extra: Sequence[str], scores: bool
) -> Table:
    t = Table(
        title=title,
        title_justify="left",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    t.add_column("Network", no_wrap=True)
    if scores:
        t.add_column("Error", justify="right", no_wrap=True)
        t.add_column("mCE", justify="right", no_wrap=True)
        t.add_column("Rel.\nmCE", justify="right", no_wrap=True)
    last = ""
    for c in corruptions:
        grp = _TABLE1_GROUP.get(c, "")
        t.add_column(f"{grp if grp != last else ''}\n{SHORT_NAMES.get(c, c)}", justify="right", no_wrap=True)
        last = grp
    for i, c in enumerate(extra):
        t.add_column(
            f"{'Extra' if i == 0 else ''}\n{SHORT_NAMES.get(c, c)}", justify="right", style="dim", no_wrap=True
        )
    for r in rows:
        s = r.summary
        cells = [r.label]
        if scores:
            mce = _pct(s.mce, 1)
            if s.mce is not None and s.missing_benchmark:
                mce += "*"
            rmce = _pct(s.relative_mce, 1)
            if s.relative_mce is not None and s.missing_benchmark:
                rmce += "*"
            cells += [_pct(s.clean_error, 1), mce, rmce]
        for c in [*corruptions, *extra]:
            sc = s.score(c)
            cells.append("–" if sc is None else _pct(sc.ce, 0) if sc.ce is not None else f"({_pct(sc.mean_error, 0)})")
        t.add_row(*cells, style="italic" if r.reference else None)
    return t


def render_table(
    rows: Sequence[ReportRow], console: Console, *, title: str | None = None, extras: bool = False
) -> None:
    """Print Table 1: clean error, mCE, relative mCE and CE per benchmark corruption (percent).

    Benchmark corruptions without results show "–"; a CE without baseline shows
    the mean error in parentheses; "*" marks a partial mCE. With ``extras``, the
    extra corruptions follow under "Extra" (outside mCE); otherwise
    :func:`render_details` shows them. A console too narrow for the whole table
    gets it in two parts (noise and blur, then weather and digital).
    """
    bench, extra = _columns(rows)
    if not extras:
        extra = []
    whole = _table1(rows, title, bench, extra, True)
    if Measurement.get(console, console.options.update_width(10_000), whole).maximum <= console.width:
        console.print(whole)
        return
    first = [c for c in bench if _TABLE1_GROUP.get(c) in ("Noise", "Blur")]
    second = [c for c in bench if c not in first]
    console.print(_table1(rows, title, first, [], True))
    console.print(_table1(rows, None, second, extra, False))


def render_details(row: ReportRow, console: Console) -> None:
    """Print one model's per-corruption details: error per severity, mean error, CE and relative CE (percent)."""
    s = row.summary
    t = Table(
        title=f"{row.label}: top-1 error (%) per severity",
        title_justify="left",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    t.add_column("Corruption", no_wrap=True)
    t.add_column("Group")
    for sev in s.severities:
        t.add_column(f"s{sev}", justify="right")
    t.add_column("Mean", justify="right")
    t.add_column("CE", justify="right")
    t.add_column("Rel. CE", justify="right")
    for sc in s.scores:
        cells = [sc.name, sc.group if sc.group != "benchmark" else family_of(sc.name)]
        cells += [_pct(sc.errors.get(sev), 1) for sev in s.severities]
        cells += [_pct(sc.mean_error, 1), _pct(sc.ce, 1), _pct(sc.relative_ce, 1)]
        t.add_row(*cells, style="dim" if sc.group != "benchmark" else None)
    console.print(t)


def _summary_dict(s: Summary) -> dict[str, Any]:
    return {
        "model": s.model,
        "clean_error": s.clean_error,
        "mce": s.mce,
        "relative_mce": s.relative_mce,
        "mce_corruptions": list(s.mce_corruptions),
        "missing_benchmark_corruptions": list(s.missing_benchmark),
        "mce_complete": s.complete,
        "extra_mce": s.extra_mce,
        "severities": list(s.severities),
        "baseline": s.baseline,
        "baseline_source": s.baseline_source,
        "corruptions": {
            sc.name: {
                "group": sc.group,
                "family": sc.family,
                "errors": {str(k): v for k, v in sc.errors.items()},
                "mean_error": sc.mean_error,
                "ce": sc.ce,
                "relative_ce": sc.relative_ce,
            }
            for sc in s.scores
        },
        "notes": list(s.notes),
    }


UNITS = (
    "errors are fractions in [0, 1]; ce, mce, relative_ce and relative_mce are ratios to the baseline "
    "(1.0 = the baseline; the table prints them x 100)"
)


def to_json(rows: Sequence[ReportRow], notes: Sequence[str] = (), extra: dict[str, Any] | None = None) -> str:
    """The report as JSON text: one object per row, plus notes and units."""
    doc: dict[str, Any] = {
        "units": UNITS,
        "rows": [
            {"label": r.label, "reference": r.reference, "n_images": r.n_images, **r.meta, **_summary_dict(r.summary)}
            for r in rows
        ],
        "notes": list(notes),
    }
    if extra:
        doc.update(extra)
    return json.dumps(doc, indent=1, default=str) + "\n"


def to_csv(rows: Sequence[ReportRow]) -> str:
    """The report as CSV: one line per row, with CE, relative CE and per-severity errors per corruption."""
    records: list[dict[str, Any]] = []
    names = list(BENCHMARK_CORRUPTIONS) + list(EXTRA_CORRUPTIONS)
    names += sorted({sc.name for r in rows for sc in r.summary.scores} - set(names))
    for r in rows:
        s = r.summary
        rec: dict[str, Any] = {
            "label": r.label,
            "model": s.model,
            "reference": r.reference,
            "n_images": r.n_images,
            **{k: v for k, v in r.meta.items() if not isinstance(v, (dict, list))},
            "clean_error": s.clean_error,
            "mce": s.mce,
            "relative_mce": s.relative_mce,
            "mce_n_corruptions": len(s.mce_corruptions),
            "mce_complete": s.complete,
            "extra_mce": s.extra_mce,
            "baseline": s.baseline,
        }
        for c in names:
            sc = s.score(c)
            rec[f"ce_{c}"] = None if sc is None else sc.ce
            rec[f"relative_ce_{c}"] = None if sc is None else sc.relative_ce
            for sev in range(1, 6):
                rec[f"error_{c}_s{sev}"] = None if sc is None else sc.errors.get(sev)
        records.append(rec)
    keys: list[str] = []
    for rec in records:
        keys += [k for k in rec if k not in keys]
    return records_to_csv([{k: rec.get(k) for k in keys} for rec in records])
