"""ImageNet-C and its editions (ImageNet-C 299, Tiny-ImageNet-C, CIFAR-10-C / CIFAR-100-C).

Conditions: corruption x severity (1..5) plus the clean images (severity 0).
Data: clean photos corrupted on the fly (``--data``) or a released tree / CIFAR
arrays (``--released``). Records: each image's label and top-5 classes. Score:
clean error, CE per corruption, mCE and relative mCE, normalised by AlexNet's
published errors or a stored model (Hendrycks & Dietterich, ICLR 2019).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.table import Table

from ..distributed.predictions import RAY_OPTIONS, driver_device, ray_predictions
from ..evaluation.baselines import alexnet_baseline
from ..evaluation.metrics import BENCHMARK_CORRUPTIONS, summarize
from ..evaluation.models import load_model, read_class_list
from ..evaluation.protocol import Benchmark, Progress, Report, Section
from ..evaluation.report import ReportRow, baseline_row, render_details, render_table, to_csv, to_json
from ..evaluation.runner import BENCHMARKS, EvaluationResult, evaluate, resolve_baseline
from ..evaluation.store import ResultsStore
from ..evaluation.testtime import with_test_time
from ..errors import InvalidArgumentError
from . import register_benchmark

__all__ = ["ImageNetC", "report_rows", "demo_notes", "report_figures"]

NAME = "imagenet-c"


def demo_notes(result: EvaluationResult, demo: bool) -> list[str]:
    """Notes on how far the images go: the 20 demo photos, or few images per condition."""
    n = result.n_images
    notes: list[str] = []
    if demo:
        notes.append(
            f"These {n} images (ImageNet validation photos shipped inside the foolbox wheel) demonstrate the pipeline; "
            "they are no benchmark. Published ImageNet-C numbers use all 50 000 validation images."
        )
    elif 0 < n < 1000:
        notes.append(
            f"Only {n} images per condition: an error rate carries a standard error of up to "
            f"{50 / math.sqrt(n):.1f} points."
        )
    return notes


def report_rows(result: EvaluationResult) -> list[ReportRow]:
    """The report's rows: AlexNet's published errors (edition 224 with the AlexNet baseline), then the model."""
    rows: list[ReportRow] = []
    if result.summary.baseline == "AlexNet" and result.settings.get("edition") == "224":
        rows.append(baseline_row(alexnet_baseline(), BENCHMARK_CORRUPTIONS))
    rows.append(
        ReportRow(
            result.model,
            result.summary,
            result.n_images,
            {
                "evaluation": result.evaluation_id,
                "store": str(result.store_path),
                "model_checksum": result.model_checksum,
                "data": result.data,
                "clean_data": result.clean_data,
                "settings": result.settings,
            },
        )
    )
    return rows


def _pct(v: Any) -> float | None:
    return None if v is None else 100.0 * float(v)


def _pct_pair(ci: Any) -> tuple[float, float] | None:
    """A stored 95 % interval (fractions) in %."""
    return None if not ci else (100.0 * ci[0], 100.0 * ci[1])


def report_figures(rows: list[dict[str, Any]]) -> list[Any]:
    """The report's ImageNet-C figures from stored leaderboard rows (``shiftbench results`` JSON ``rows``).

    Hendrycks & Dietterich's (2018) Fig. 3 (mCE and relative mCE against clean error, published models of
    their Tables 1-2 next to the stored ones), error per severity (AlexNet's
    published errors dashed) and CE per corruption.
    """
    from ..report.figures import ReportFigure, bar_chart, line_chart, published_scatter, small_multiples
    from ..zoo.tables import table

    rows = [r for r in rows if not r.get("reference")]
    figs: list[Any] = []
    partial = any(r.get("mce") is not None and not r.get("mce_complete") for r in rows)
    warn = " Stored mCE values marked partial average fewer than 15 corruptions or severities: not comparable." if partial else ""
    for key, tid, fname, what in (("mce", "hendrycks2018:1", "mce-vs-error", "mCE"), ("relative_mce", "hendrycks2018:2", "relative-mce-vs-error", "Relative mCE")):
        t = table(tid)
        measured = [(r["label"], _pct(r.get("clean_error")), _pct(r.get(key))) for r in rows]
        if not any(m[1] is not None and m[2] is not None for m in measured):
            continue
        bars = {r["label"]: (_pct_pair(r.get("clean_error_ci")), _pct_pair(r.get(f"{key}_ci"))) for r in rows}
        fig = published_scatter(
            [(p.label, p.values.get("error"), p.values.get(key)) for p in t.rows], measured,
            xlabel="clean top-1 error (%)", ylabel=f"{what} (%)", reference=100.0, intervals=bars,
        )
        figs.append(ReportFigure(fname, f"{what} against clean error",
                                 f"Stored models (stars) next to the published models of {t.paper}, Table {t.table} "
                                 f"(grey; the paper's Figure 3 plots the same against accuracy). 100 = AlexNet. "
                                 f"Error bars: 95 % intervals (Wilson for the clean error, bootstrap over images for "
                                 f"{what}), where the report computed them.{warn}", fig))
    sev: dict[str, dict[int, float | None]] = {}
    base = alexnet_baseline()
    if rows:
        names = sorted({c for r in rows for c in r.get("corruptions", {}) if c in BENCHMARK_CORRUPTIONS})
        if names:
            sev["AlexNet (published)"] = {0: _pct(base.clean_error)} | {
                s: 100.0 * sum(base.errors[c][s] for c in names) / len(names) for s in range(1, 6)
            }
    for r in rows:
        per: dict[int, list[float]] = {}
        for c, d in r.get("corruptions", {}).items():
            if c in BENCHMARK_CORRUPTIONS:
                for s, e in d.get("errors", {}).items():
                    if e is not None:
                        per.setdefault(int(s), []).append(100.0 * e)
        pts: dict[int, float | None] = {0: _pct(r.get("clean_error"))}
        pts.update({s: sum(v) / len(v) for s, v in sorted(per.items())})
        sev[r["label"]] = pts
    if any(k != "AlexNet (published)" for k in sev):
        figs.append(ReportFigure(
            "error-per-severity", "Error per severity",
            "Top-1 error averaged over the stored benchmark corruptions, per severity (0 = clean); "
            "AlexNet's published errors on the same corruptions dashed.",
            line_chart(sev, xlabel="severity", ylabel="top-1 error (%)", dashed=["AlexNet (published)"]),
        ))
    cats = [c for c in BENCHMARK_CORRUPTIONS if any(c in r.get("corruptions", {}) for r in rows)]
    if cats:
        panels = {c: {"AlexNet (published)": {s: 100.0 * base.errors[c][s] for s in range(1, 6)}} for c in cats}
        for r in rows:
            for c, d in r.get("corruptions", {}).items():
                if c in panels:
                    panels[c][r["label"]] = {int(s): _pct(e) for s, e in sorted(d.get("errors", {}).items())}
        figs.append(ReportFigure(
            "error-per-corruption-severity", "Error per corruption and severity",
            "Top-1 error of each stored model per severity, one panel per corruption; AlexNet's published errors dashed.",
            small_multiples(panels, xlabel="severity", ylabel="top-1 error (%)", dashed=["AlexNet (published)"]),
        ))
    if cats:
        t1 = table("hendrycks2018:1")
        ref = t1.rows[-1]
        series: dict[str, dict[str, float | None]] = {
            f"{ref.label} (published)": {c: ref.values.get(c) for c in cats}
        }
        for r in rows:
            series[r["label"]] = {c: _pct(d.get("ce")) for c, d in r.get("corruptions", {}).items()}
        figs.append(ReportFigure(
            "ce-per-corruption", "Corruption Error per corruption",
            f"CE per corruption (100 = AlexNet, dashed line); {ref.label} from {t1.citation} in grey.",
            bar_chart(cats, series, ylabel="CE (%)", published=[f"{ref.label} (published)"], reference=100.0),
        ))
    return figs


def stored_model_metric(store: Path, key: str) -> dict[str, float]:
    """Model -> ``key`` of its stored ImageNet-C evaluation in % (e.g. ``clean_error``, ``mce``), for the figures
    other benchmarks draw against ImageNet-C; the latest evaluation of a model wins, the baseline row is left out."""
    from . import get_benchmark

    out: dict[str, float] = {}
    c = get_benchmark("imagenet-c").stored(store, model=None, baseline="alexnet", evaluation=None)
    for row in c.value if c is not None else []:
        if row.get(key) is not None and not row.get("reference"):
            out[row["model"]] = 100.0 * row[key]
    return out


def _print_notes(console: Any, notes: list[str]) -> None:
    for n in notes:
        console.print(f"• {n}", highlight=False, soft_wrap=False)


@register_benchmark
class ImageNetC(Benchmark):
    name = NAME
    title = BENCHMARKS[NAME].title
    measures = "Top-1 error under 15 (+4 extra) corruptions at 5 severities: CE, mCE, relative mCE."
    headline = ("clean_error", "mce", "relative_mce")
    full_images = 50_000  # the ImageNet validation set (Hendrycks & Dietterich, 2019)
    options = ("released", "edition", "corruptions", "severities", "seed", "release", "baseline", "classes", "clean",
               "tta", "preprocess", *RAY_OPTIONS)
    conditions = "corruption x severity 1..5, and clean (severity 0); editions 224, 299, 64 (Tiny), 32 (CIFAR)"
    sources = ("on the fly from clean photos (--data)", "released ImageNet-C / Tiny-ImageNet-C tree, CIFAR-10-C/100-C arrays")
    records = "per image: label and top-5 classes"

    def evaluate(self, settings: dict[str, Any], progress: Progress | None) -> Report:
        kw = dict(settings)
        for k in ("results_format", "results_file", "progress", "details", "benchmark", *RAY_OPTIONS):
            kw.pop(k, None)
        kw["device"] = driver_device(settings)
        details = bool(settings.get("details", True))
        demo = kw.get("data") is None and kw.get("released") is None
        classes: Any = kw.pop("classes", "auto")
        if classes not in ("auto", "model", "data"):
            classes = list(read_class_list(classes))
        model: Any = kw.pop("model")
        weights = kw.pop("weights", None)
        tta, preprocess = kw.pop("tta", None), kw.pop("preprocess", None)
        if weights is not None or tta or preprocess:
            if (tta or preprocess) and settings.get("ray") is not None:
                raise InvalidArgumentError("ray", settings.get("ray"), "no --ray with --tta or --preprocess (the "
                                           "wrapped model runs in this process)")
            model = with_test_time(load_model(model, weights=weights, device=kw.get("device")), tta=tta,
                                   preprocess=preprocess)
        store = kw.pop("store")
        status: list[str] = []
        with ray_predictions(settings) as executor:
            where = None if executor is None else executor.describe()
            result = evaluate(model, store=store, classes=classes, progress=progress, executor=executor, **kw)
        if executor is not None:
            status.append(f"Predicted on {where}: {executor.shards} shard(s); {executor.health()}.")
        if result.new_predictions == 0:
            status.append(
                f"All requested runs were already complete in {store}: scores recomputed from the stored predictions."
            )
        rows = report_rows(result)
        notes = [
            f"Model {result.model} ({result.model_checksum[:19]}...) on {result.data}"
            + (f"; clean images: {result.clean_data}" if result.clean_data and result.clean_data != result.data else ""),
            *demo_notes(result, demo),
            f"Baseline: {result.summary.baseline_source}." if result.summary.baseline else "Baseline: none.",
            *result.summary.notes,
            *result.notes,
            f"Stored as evaluation {result.evaluation_id} in {result.store_path} (`shiftbench results` lists all).",
        ]

        def table(console: Any) -> None:
            render_table(rows, console, title=f"{self.title}: Corruption Error (%)")
            if details:
                render_details(rows[-1], console)
            _print_notes(console, notes)

        return Report(lambda: to_json(rows, notes), lambda: to_csv(rows), table, status)

    def stored(self, store: Path, *, model: str | None, baseline: str, evaluation: int | None) -> Section | None:
        with ResultsStore(store, create=False) as db:
            evs = db.evaluations_of([NAME], model, evaluation)
            if not evs:
                return None
            groups: dict[tuple[str, str, str, str], list[ReportRow]] = {}
            for e in evs:
                clean, tab, incomplete = db.error_table(e.id)
                base, why = resolve_baseline(baseline, store=db, edition=e.edition, source_kind=e.source_kind)
                s = summarize(e.model, tab, clean, base)
                n = max((r.n_predicted for r in db.runs(e.id)), default=0)
                meta = {
                    "evaluation": e.id,
                    "data": f"{e.source_kind} {e.source}",
                    "edition": e.edition,
                    "seed": e.seed if e.seed >= 0 else None,
                    "release": e.release,
                    "label_space": f"{e.label_space} ({e.n_classes} classes)",
                    "incomplete_runs": len(incomplete),
                    "no_baseline_reason": why,
                }
                groups.setdefault((e.benchmark, e.edition, f"{e.source_kind} {e.source}", e.label_space), []).append(
                    ReportRow(f"{e.model} #{e.id}", s, n, meta)
                )
        all_rows = [r for rows in groups.values() for r in rows]

        def table(console: Any) -> None:
            for (bench, edition, data, space), rows in groups.items():
                rows.sort(key=lambda x: (x.summary.mce is None, x.summary.mce if x.summary.mce is not None else 0.0))
                render_table(rows, console, title=f"Leaderboard by mCE: {bench}, edition {edition}, {data} ({space} label space)")
                for row in rows:
                    s = row.summary
                    bits = [f"{row.label}: {row.n_images} images"]
                    if s.mce is not None:
                        bits.append(
                            f"mCE over {len(s.mce_corruptions)}/15 corruptions" + ("" if s.complete else " (partial)")
                        )
                    if row.meta["incomplete_runs"]:
                        bits.append(f"{row.meta['incomplete_runs']} incomplete run(s) left out")
                    reason = row.meta["no_baseline_reason"]
                    bits.append(
                        f"baseline {s.baseline or 'none'}"
                        + (f" ({reason})" if reason and baseline.lower() != "none" else "")
                    )
                    console.print("• " + "; ".join(bits), highlight=False)

        import json

        return Section("rows", json.loads(to_json(all_rows))["rows"], lambda: to_csv(all_rows), table)

    def report_figures(self, store: Path, section: Section) -> list[Any]:
        return report_figures(section.value)

    def stored_runs(self, store: Path, console: Any, *, model: str | None, evaluation: int | None) -> bool:
        with ResultsStore(store, create=False) as db:
            evs = db.evaluations_of([NAME], model, evaluation)
            if not evs:
                return False
            t = Table(title=f"Runs in {store}", title_justify="left", header_style="bold")
            for col in ("Eval", "Run", "Model", "Data", "Corruption", "Sev.", "Status", "Done", "Skipped", "Error (%)"):
                t.add_column(col)
            for e in evs:
                for r in db.runs(e.id):
                    err_pct = "–" if r.top1_error is None else f"{100 * r.top1_error:.1f}"
                    t.add_row(
                        str(e.id), str(r.id), e.model, e.source_kind, r.corruption, str(r.severity), r.status,
                        f"{r.n_predicted + r.n_skipped}/{r.n_expected}", str(r.n_skipped), err_pct,
                    )
        console.print(t)
        return True
