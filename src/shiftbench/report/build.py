"""Build the self-contained HTML report from a results store: every registered benchmark's stored section.

The core names no benchmark: it iterates the registry, asks each benchmark for
its stored :class:`~shiftbench.evaluation.protocol.Section`, shows its records
as a sortable table, compares the benchmarks' ``headline`` keys across models,
and embeds the figures each benchmark draws in
:meth:`~shiftbench.evaluation.protocol.Benchmark.report_figures`.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..benchmarks import get_benchmark, list_benchmarks
from ..errors import InvalidArgumentError
from ..evaluation.errors import MissingPackageError
from ..evaluation.figures import ReportFigure, png_bytes, png_data_uri, pyplot, svg_text
from ..evaluation.protocol import Benchmark, Section, is_fraction_key
from ..evaluation.store import ResultsStore
from .intervals import EvaluationFacts, data_label, scrub_paths, store_facts

__all__ = [
    "ReportResult",
    "build_report",
    "render_html",
    "stored_sections",
    "collect",
    "compare_models",
    "study_figures",
    "records_table",
]

LONG_TEXT = 60

def _pct_cell(v: Any, ci: tuple[float, float] | None = None) -> tuple[str, str, str]:
    """A fraction as a percent cell, with its 95 % interval when known."""
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        return _fmt(v)
    shown = f"{100 * float(v):.2f}"
    full = ""
    if ci is not None:
        shown += f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
        full = "95 % interval in brackets"
    return (shown, repr(100 * float(v)), full)


@dataclass
class Table:
    columns: list[str]
    rows: list[list[tuple[str, str, str]]]  # (shown, sort key, full text for the title attribute)


@dataclass
class BenchmarkPart:
    name: str
    title: str
    measures: str
    table: Table | None
    raw: str
    figures: list[dict[str, str]] = field(default_factory=list)
    paper: str = ""
    """The paper the benchmark comes from: ``Authors (year). Title. Venue.``"""


@dataclass
class ReportResult:
    """What :func:`build_report` wrote: the HTML file, the figure files, and the benchmarks with results."""

    html: Path
    figure_files: list[Path]
    benchmarks: list[str]
    n_figures: int


def _fmt(v: Any) -> tuple[str, str, str]:
    if v is None:
        return ("–", "", "")
    if isinstance(v, bool):
        return (str(v).lower(), str(int(v)), "")
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return (str(v), "", "")
        shown = str(v) if isinstance(v, int) else f"{v:.4f}".rstrip("0").rstrip(".")
        return (shown, repr(float(v)), "")
    if isinstance(v, (list, tuple)):
        v = ", ".join(str(x) for x in v)
    elif isinstance(v, dict):
        v = json.dumps(v, default=str)
    text = str(v)
    if len(text) > LONG_TEXT:
        return (text[: LONG_TEXT - 1] + "…", text, text)
    return (text, text, "")


def _flatten(rec: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in rec.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v and len(prefix.split(".")) < 3:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def records_table(value: Any) -> Table | None:
    """A section's records (a list of dicts) as one table: nested dicts become dotted columns; fractions (errors,
    CE, mCE, FR, accuracies) in %, with the 95 % interval of a key ``K`` when a record carries ``K_ci``."""
    if not isinstance(value, list) or not value or not all(isinstance(r, dict) for r in value):
        return None
    flat = [_flatten({k: v for k, v in r.items() if not k.endswith("_ci")}) for r in value]
    cis = [{k[:-3]: v for k, v in r.items() if k.endswith("_ci") and isinstance(v, (list, tuple))} for r in value]
    cols: list[str] = []
    for r in flat:
        cols += [k for k in r if k not in cols]
    pct = {c for c in cols if is_fraction_key(c)
           and not any(isinstance(r.get(c), int) and not isinstance(r.get(c), bool) for r in flat)}  # counts stay
    rows = [[(_pct_cell(r.get(c), ci.get(c)) if c in pct else _fmt(r.get(c))) for c in cols] for r, ci in zip(flat, cis)]
    return Table([f"{c} (%)" if c in pct else c for c in cols], rows)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "figure"


def stored_sections(store: Path) -> list[tuple[Benchmark, Section]]:
    """Every registered benchmark that has evaluations in ``store``, with its stored section (registry order)."""
    out: list[tuple[Benchmark, Section]] = []
    for name in list_benchmarks():
        bench = get_benchmark(name)
        sec = bench.stored(store, model=None, baseline="alexnet", evaluation=None)
        if sec is not None:
            out.append((bench, sec))
    return out


def model_labels(facts: dict[int, EvaluationFacts]) -> dict[tuple[str, str], str]:
    """(model name, weights digest) -> the label the report shows: the name, with the digest's first 12 hex digits
    where two stored models share the name (different weights are different models)."""
    digests: dict[str, set[str]] = {}
    for f in facts.values():
        digests.setdefault(f.model, set()).add(f.checksum)
    return {(f.model, f.checksum): (f.model if len(digests[f.model]) == 1 else f"{f.model} [{_short(f.checksum)}]")
            for f in facts.values()}


def _short(checksum: str) -> str:
    algo, _, hexd = checksum.partition(":")
    return f"{algo}:{hexd[:12]}" if hexd else checksum[:19]


def annotate(sections: list[tuple[Benchmark, Section]], facts: dict[int, EvaluationFacts],
             known_paths: dict[str, str]) -> list[tuple[Benchmark, Section]]:
    """The sections with each record's model label (name and weights digest), weights digest, data label,
    image count and 95 % intervals (``K_ci``) added, and every local path replaced by a name and a digest."""
    labels = model_labels(facts)
    out = []
    for bench, sec in sections:
        if not isinstance(sec.value, list):
            out.append((bench, sec))
            continue
        recs = []
        for rec in sec.value:
            if not isinstance(rec, dict):
                recs.append(rec)
                continue
            rec = dict(rec)
            f = facts.get(rec.get("evaluation")) if isinstance(rec.get("evaluation"), int) else None
            if f is not None and not rec.get("reference") and str(rec.get("model")) == f.model:
                label = labels[(f.model, f.checksum)]
                if label != f.model:
                    rec["label"] = label if not rec.get("label") or rec.get("label") == f.model else f"{rec['label']} [{_short(f.checksum)}]"
                rec["model_label"] = label
                rec["weights_sha256"] = _short(f.checksum)
                rec.setdefault("n_images", f.n_images)
                if f.data:
                    rec["data"] = f.data
                for k, ci in f.intervals.items():
                    if rec.get(k) is not None:
                        rec[f"{k}_ci"] = list(ci)
            recs.append(scrub_paths(rec, known_paths))
        out.append((bench, dataclasses.replace(sec, value=recs)))
    return out


def collect(
    store: Path, *, with_figures: bool = True, sections: list[tuple[Benchmark, Section]] | None = None
) -> tuple[list[BenchmarkPart], dict[str, list[ReportFigure]]]:
    """Every registered benchmark's stored section as a report part, and its figures (by benchmark name)."""
    parts: list[BenchmarkPart] = []
    figures: dict[str, list[ReportFigure]] = {}
    for bench, sec in stored_sections(store) if sections is None else sections:
        parts.append(BenchmarkPart(bench.name, bench.title or bench.name, bench.measures, records_table(sec.value),
                                   json.dumps(sec.value, indent=1, default=str),
                                   paper=bench.paper.reference() if bench.paper is not None else ""))
        if with_figures:
            figures[bench.name] = list(bench.report_figures(store, sec))
    return parts, figures


def compare_models(
    sections: list[tuple[Benchmark, Section]],
) -> tuple[list[str], list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The comparison across models (each benchmark's ``headline`` keys; a model's latest evaluation wins)
    and each model's records: (columns, rows, records by model).

    A model is its name and weights digest (:func:`annotate` puts ``model_label`` on each record): two stored
    models of the same name with different weights are two rows. Fractions are shown in %, with the 95 %
    interval when the record carries one."""
    columns: list[str] = []
    by_model: dict[str, dict[str, Any]] = {}
    meta: dict[str, dict[str, Any]] = {}
    per_model: dict[str, list[dict[str, Any]]] = {}
    for bench, sec in sections:
        if not isinstance(sec.value, list):
            continue
        for rec in sec.value:
            if not isinstance(rec, dict) or rec.get("reference") or "model" not in rec:
                continue
            model = str(rec.get("model_label") or rec["model"])
            row = by_model.setdefault(model, {})
            m = meta.setdefault(model, {"weights": rec.get("weights_sha256", ""), "small": []})
            cov = bench.coverage(rec)
            if cov is not None and cov[0] < cov[1]:
                m["small"].append(f"{bench.name}: {cov[0]:,} of {cov[1]:,} {bench.full_unit}")
            for k in bench.headline:
                col = f"{bench.name} {k}" + (" (%)" if is_fraction_key(k) else "")
                if col not in columns:
                    columns.append(col)
                if rec.get(k) is not None:
                    ci = rec.get(f"{k}_ci")
                    row[col] = _pct_cell(rec[k], tuple(ci) if ci else None) if is_fraction_key(k) else _fmt(rec[k])
            label = rec.get("label") or f"{model} #{rec.get('evaluation', '')}"
            per_model.setdefault(model, []).append(
                {"benchmark": bench.name, "label": label,
                 "values": [(k + (" (%)" if is_fraction_key(k) else ""),
                             (_pct_cell(rec.get(k), tuple(rec[f"{k}_ci"]) if rec.get(f"{k}_ci") else None)
                              if is_fraction_key(k) else _fmt(rec.get(k)))[0]) for k in bench.headline if k in rec]}
            )
    rows = [{"model": m, "weights": meta[m]["weights"], "small": sorted(set(meta[m]["small"])),
             "cells": [v.get(c, _fmt(None)) for c in columns]} for m, v in by_model.items()]
    return columns, rows, per_model


def study_figures(study: Path) -> list[ReportFigure]:
    """Overlap heatmaps of every study in an overlap-study store (Laugros et al., 2020 and 2021, Fig. 2); a study not finished yet
    gets a figure-less entry saying why."""
    from ..evaluation.figures import heatmap
    from ..overlap.scores import overlap_matrix
    from ..overlap.store import OverlapStore

    out: list[ReportFigure] = []
    with OverlapStore(study, readonly=True) as st:
        for sid, sname in st.studies():
            try:
                m = overlap_matrix(st.accuracy_matrix(sid), on_undefined="nan")
            except Exception as e:  # noqa: BLE001 - a study still running: the report says so
                out.append(ReportFigure(f"overlap-{_slug(sname)}", f"Overlap study {sname}", f"Not drawn: {e}", None))
                continue
            if not m.names:
                out.append(ReportFigure(f"overlap-{_slug(sname)}", f"Overlap study {sname}",
                                        "Not drawn: no corruption has both its model and its test stored yet.", None))
                continue
            out.append(ReportFigure(
                f"overlap-{_slug(sname)}", f"Overlapping scores: {sname}",
                "Symmetric overlapping score between corruptions (Laugros et al., 2020, eq. 2; 1 = the same shift, n/a = undefined).",
                heatmap(m.values, m.names, m.names, label="overlapping score")))
    return out


def build_report(
    store: str | Path,
    out: str | Path = "report.html",
    *,
    figures_dir: str | Path | None = None,
    study: str | Path | None = None,
    gallery_image: str | Path | None = None,
    gallery: bool = True,
) -> ReportResult:
    """Write the report (one self-contained HTML file) and, with ``figures_dir``, every figure as PNG and SVG.

    Raises:
        InvalidArgumentError: the store does not exist, or nothing is stored in it.
        MissingPackageError: jinja2 or matplotlib is missing (``pip install 'shiftbench[report]'``).
    """
    store = Path(store)
    if not store.is_file():
        raise InvalidArgumentError("--store", str(store), "an existing results store (made by shiftbench evaluate)")
    try:
        import jinja2
    except ImportError as e:
        raise MissingPackageError("jinja2", "`shiftbench report`", "pip install 'shiftbench[report]'") from e
    plt = pyplot()
    facts = store_facts(store)
    with ResultsStore(store) as db:
        known = {loc: data_label(loc, ident) for loc, ident in db.sources().items() if loc}
    sections = annotate(stored_sections(store), facts, known)
    parts, figs = collect(store, sections=sections)
    if not parts:
        raise InvalidArgumentError("--store", str(store), "a store holding at least one evaluation",
                                   "Run `shiftbench evaluate` first.")
    if study is not None:
        if not Path(study).is_file():
            raise InvalidArgumentError("--study", str(study), "an existing overlap-study store")
        figs["overlap-study"] = study_figures(Path(study))
    fig_dir = Path(figures_dir) if figures_dir is not None else None
    written: list[Path] = []
    n = 0
    by_name = {p.name: p for p in parts}
    extra: list[BenchmarkPart] = []
    try:
        for bname, flist in figs.items():
            part = by_name.get(bname)
            if part is None:
                part = BenchmarkPart(bname, "Overlap study", "Overlapping scores between corruptions", None, "")
                extra.append(part)
            for f in flist:
                entry = {"title": f.title, "caption": f.caption, "uri": "", "name": f.name}
                if f.figure is not None:
                    entry["uri"] = png_data_uri(f.figure)
                    n += 1
                    if fig_dir is not None:
                        stem = f"{_slug(bname)}_{_slug(f.name)}"
                        written += [_atomic_write(fig_dir / f"{stem}.png", png_bytes(f.figure, dpi=150)),
                                    _atomic_write(fig_dir / f"{stem}.svg", svg_text(f.figure).encode("utf-8"))]
                    plt.close(f.figure)
                part.figures.append(entry)
    finally:  # a failed write (no space, read-only folder) leaves no figure open
        for flist in figs.values():
            for f in flist:
                if f.figure is not None:
                    plt.close(f.figure)
    columns, model_rows, per_model = compare_models(sections)
    gal: list[Any] = []
    gal_note = "Left out (--no-gallery)."
    if gallery:
        from ..evaluation.metrics import ALL_CORRUPTIONS
        from .gallery import default_gallery_photo
        from .gallery import gallery as make_gallery

        photo = Path(gallery_image) if gallery_image is not None else default_gallery_photo()
        if photo is None:
            gal_note = ("No gallery: foolbox (the demo images) is not installed; pass --gallery-image PHOTO "
                        "or pip install --no-deps foolbox==3.3.4.")
        else:
            gal = make_gallery(photo, list(ALL_CORRUPTIONS))
            gal_note = f"{photo.name}, resized to 256 and centre-cropped to 224, seed 0."
    small = [f"{r['model']} ({'; '.join(r['small'])})" for r in model_rows if r["small"]]
    html = render_html(
        jinja2,
        store=store.name,
        small=small,
        parts=parts + extra,
        columns=columns,
        model_rows=model_rows,
        per_model=per_model,
        gallery=gal,
        gallery_note=gal_note,
    )
    path = _atomic_write(Path(out), html.encode("utf-8"))
    return ReportResult(path, written, [p.name for p in parts], n)


def render_html(jinja2: Any, **context: Any) -> str:
    """The report's HTML from the package template (autoescaped)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("shiftbench.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    rows: dict[tuple[str, int], str] = {}
    for g in context["gallery"]:
        rows[(g.corruption, g.severity)] = g.uri
    corruptions = list(dict.fromkeys(g.corruption for g in context["gallery"] if g.severity))
    return env.get_template("report.html.j2").render(
        version=__version__,
        generated=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        gallery_rows=corruptions,
        gallery_map=rows,
        **context,
    )


def _atomic_write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as an ordinary file would be (mkstemp makes it 0600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
