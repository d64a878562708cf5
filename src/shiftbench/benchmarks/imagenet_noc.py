"""ImageNet-NOC: the non-overlapping corruptions of Laugros, Caplier & Ospici (2020), or a saved selection.

Conditions: the clean images and each candidate corruption of the benchmark
(one value per image drawn from the corruption's whole range, no severity
levels). Data: clean photos (``--data``; default the 20 demo images).
Records: per image and condition, whether the top-1 class is right. Score:
error, CE against AlexNet's published errors (or a saved benchmark's own
baseline) and mCE.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from ..corruptions.candidates import CANDIDATES
from ..errors import DataError, InvalidArgumentError, ShiftbenchError
from ..evaluation.data import ImageFolderSource, foolbox_imagenet
from ..evaluation.protocol import Benchmark, Plan, Planned, Report, Section, Settings, option
from ..evaluation.store import ResultsStore, records_to_csv
from ..overlap.analysis import noc_corruption_error, noc_mean_corruption_error
from ..overlap.noc import BENCHMARK as NOC_BENCHMARK
from ..overlap.noc import (
    BORDER_OBSTRUCTION_NAME,
    CandidateSource,
    NocBenchmark,
    NocResult,
    find_benchmark,
    stored_options,
)
from . import register_benchmark
from .imagenet_c import resolve_classes, stored_model_metric
from .papers import LAUGROS2020

__all__ = ["ImageNetNOC", "NocSettings", "result_records", "stored_records", "report_figures"]


@dataclass(frozen=True)
class NocSettings(Settings):
    """The options of ImageNet-NOC."""

    data: str | Path | None = option(None, metavar="PATH", help="Clean ImageNet photos (ImageFolder: "
                                     "<data>/<wnid>/<image>); default: the 20 demo images.")
    corruptions: str | Sequence[str] | None = option(
        None, help="A subset of the benchmark's corruptions (comma-separated), a saved benchmark (.json file or "
        "saved:NAME in the store). Default: ImageNet-NOC's eight.")
    seed: int = option(0, minimum=0, help="Seed of the on-the-fly corruptions (one value per image from the range).")
    classes: str | Sequence[str] = option(
        "auto", help="Label space: auto, model, data, or a file of class ids (wnids) to restrict to.")


def _noc_selection(spec: Any, store: Path | None) -> tuple[NocBenchmark, list[str]]:
    """The benchmark (ImageNet-NOC or a saved one) and the corruptions to evaluate."""
    name: Any = NOC_BENCHMARK
    subset: list[str] | None = None
    if isinstance(spec, str) and spec:
        if spec.endswith(".json") or Path(spec).is_file():
            name = spec
        elif spec.startswith("saved:"):
            name = spec[len("saved:"):]
        else:
            subset = [c.strip() for c in spec.split(",") if c.strip()]
    elif spec:
        subset = list(spec)
    bench = find_benchmark(name, store if store is not None else Path("."))
    names = list(bench.corruptions)
    if subset:
        wanted = [c if c in CANDIDATES else f"noc_{c}" for c in subset]
        bad = [c for c, w in zip(subset, wanted) if w not in names]
        if bad:
            raise InvalidArgumentError("corruptions", ", ".join(bad), f"corruptions of {bench.name}: {', '.join(names)}")
        names = [c for c in names if c in wanted]
    return bench, names


def result_records(r: NocResult) -> list[dict[str, Any]]:
    """One record per condition (clean first): error, CE and the baseline's error."""
    base = {"model": r.model, "benchmark": r.benchmark.name, "data": r.data, "n_images": r.n_images,
            "evaluation": r.evaluation_id}
    out = [{**base, "condition": "clean", "error": r.clean_error, "ce": None,
            "baseline_error": r.benchmark.baseline.clean_error}]
    for c in r.benchmark.corruptions:
        if c in r.errors:
            out.append({**base, "condition": c, "error": r.errors[c], "ce": r.ce[c],
                        "baseline_error": r.benchmark.baseline.errors[c]})
    out.append({**base, "condition": "mCE", "error": None, "ce": r.mce, "baseline_error": None})
    return out


def stored_records(store: Path, model: str | None = None) -> list[dict[str, Any]]:
    """Stored ImageNet-NOC (and saved-benchmark) evaluations: errors, CE and mCE where the baseline is known."""
    out: list[dict[str, Any]] = []
    with ResultsStore(store, create=False) as db:
        # border-obstruction runs through the driver under its own name; older stores kept it under ImageNet-NOC's
        evals = db.evaluations_of([NOC_BENCHMARK, BORDER_OBSTRUCTION_NAME], model)
        runs = {e.id: db.runs(e.id) for e in evals}
    for e in evals:
        bench_name = str(e.options.get("benchmark") or e.benchmark)
        errs = {r.condition: (r.top1_error, r.n_predicted) for r in runs[e.id] if r.top1_error is not None}
        try:
            bench: Any = find_benchmark(bench_name, store)
        except ShiftbenchError:  # a saved benchmark no longer found: errors without CE
            bench = None
        ce = {}
        if bench is not None:
            ce = {c: noc_corruption_error(errs[c][0], bench.baseline.errors[c]) for c in bench.corruptions if c in errs}
        complete = bench is not None and len(ce) == len(bench.corruptions)
        out.append({
            "label": f"{e.model} #{e.id}",
            "evaluation": e.id,
            "model": e.model,
            "benchmark": bench_name,
            "data": e.source,
            "seed": e.seed,
            "images": errs.get("clean", (None, 0))[1],
            "clean_error": errs["clean"][0] if "clean" in errs else None,
            "errors": {c: err for c, (err, _) in errs.items() if c != "clean"},
            "ce": ce,
            "mce": noc_mean_corruption_error(ce) if complete else None,
        })  # fmt: skip
    return out


def _render_stored(records: list[dict[str, Any]], console: Any) -> None:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(r["benchmark"], []).append(r)
    for bench, recs in groups.items():
        names = sorted({c for r in recs for c in r["errors"]})
        t = Table(title=f"Leaderboard by mCE: {bench} (CE per corruption, %)", title_justify="left", header_style="bold")
        for col in ("Model", "Images", "Clean err", "mCE", *[n.removeprefix("noc_") for n in names]):
            t.add_column(col, justify="left" if col == "Model" else "right")
        for r in sorted(recs, key=lambda r: (r["mce"] is None, r["mce"] or 0.0)):
            t.add_row(
                r["label"], str(r["images"]),
                "–" if r["clean_error"] is None else f"{100 * r['clean_error']:.1f}",
                "–" if r["mce"] is None else f"{100 * r['mce']:.1f}",
                *["–" if n not in r["ce"] else f"{100 * r['ce'][n]:.1f}" for n in names],
            )
        console.print(t)


def _flat(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = sorted({c for r in records for c in r["errors"]})
    return [
        {k: v for k, v in r.items() if k not in ("errors", "ce")}
        | {f"error_{n}": r["errors"].get(n) for n in names}
        | {f"ce_{n}": r["ce"].get(n) for n in names}
        for r in records
    ]


def report_figures(records: list[dict[str, Any]], imagenet_c_relative_mce: dict[str, float] | None = None) -> list[Any]:
    """The report's ImageNet-NOC figures: CE per corruption next to the standard ResNet-50 of Laugros et al.'s
    Table 4, and ImageNet-NOC mCE against ImageNet-C relative mCE next to their Table 3, whose 'mCE.IC' column
    holds relative mCE (models with both stored; ``imagenet_c_relative_mce``: model name -> relative mCE in %)."""
    from ..evaluation.figures import ReportFigure, bar_chart, published_scatter
    from ..zoo.tables import table

    figs: list[Any] = []
    cats = sorted({c for r in records for c in r["ce"]})
    if cats:
        t4 = table("laugros2020:4")
        ref = t4.rows[0]
        name = f"{ref.label} ResNet-50 (published)"
        series: dict[str, dict[str, float | None]] = {name: {c: ref.values.get(c) for c in cats}}
        for r in records:
            series[r["label"]] = {c: 100.0 * v for c, v in r["ce"].items()}
        figs.append(ReportFigure(
            "ce-per-corruption", "Corruption Error per corruption",
            f"CE per corruption (100 = AlexNet, dashed line); the standard ResNet-50 of {t4.citation} in grey.",
            bar_chart(cats, series, ylabel="CE (%)", published=[name], reference=100.0)))
    ic = imagenet_c_relative_mce or {}
    measured = [(r["label"], ic.get(r["model"]), None if r["mce"] is None else 100.0 * r["mce"]) for r in records]
    if any(x is not None and y is not None for _, x, y in measured):
        t = table("laugros2020:3")
        figs.append(ReportFigure(
            "noc-vs-c-mce", "ImageNet-NOC mCE against ImageNet-C relative mCE",
            f"Stored models with both benchmarks (stars) next to the pretrained classifiers of {t.citation} (grey); "
            "the paper's 'mCE.IC' column is ImageNet-C relative mCE, so that is the x axis.",
            published_scatter([(p.label, p.values.get("imagenet_c_relative_mce"), p.values.get("imagenet_noc_mce"))
                               for p in t.rows],
                              measured, xlabel="ImageNet-C relative mCE (%)", ylabel="ImageNet-NOC mCE (%)",
                              reference=100.0)))
    return figs


@register_benchmark
class ImageNetNOC(Benchmark[NocSettings]):
    name = "imagenet-noc"
    title = "ImageNet-NOC (Laugros, Caplier & Ospici, 2020)"
    measures = "Top-1 error under 8 corruptions chosen not to overlap each other (non-overlapping corruptions): CE, mCE."
    headline = ("clean_error", "mce")
    full_images = 50_000  # the ImageNet validation set, as for ImageNet-C (Laugros, Caplier & Ospici, 2020)
    full_set = "the 50,000 ImageNet validation images, each corruption (Laugros, Caplier & Ospici, 2020, as ImageNet-C)"
    paper = LAUGROS2020
    Settings = NocSettings
    conditions = "clean, and each candidate corruption with one value per image from its whole range"
    sources = ("on the fly from clean photos (--data; default: the 20 demo images)",)
    records = "per image and condition: whether the top-1 class is right"
    refusals = {
        "severities": "its corruptions have no severity levels (one value per image from the whole range)",
        "edition": "it is defined at 224 px only",
        "baseline": "it normalises by AlexNet's published errors; a saved benchmark carries its own baseline",
    }

    def selection(self, s: Any, store: Path | None) -> tuple[NocBenchmark, list[str]]:
        """The benchmark (its corruptions and CE baseline) and the corruptions to evaluate."""
        return _noc_selection(s.corruptions, store)

    def plan(self, s: NocSettings, ctx: Any) -> Plan:
        bench, names = self.selection(s, ctx.store)
        ctx.classifier()
        src = (foolbox_imagenet(edition="224", limit=s.limit) if s.data is None
               else ImageFolderSource(s.data, edition="224", limit=s.limit))
        conds = ["clean", *names]
        cand = CandidateSource(src, conds)
        return Plan(
            [Planned(cand.condition(c), cand, c, 0) for c in conds], "224", seed=s.seed, stored_seed=s.seed,
            options=stored_options(bench), classes=resolve_classes(s.classes), check_absent=False,
            source_record=lambda: (src.kind, src.identity, src.describe(), src.classes),
            context={"benchmark": bench, "names": names, "data": src.describe()},
        )

    def score(self, store: ResultsStore, evaluation: Any) -> NocResult:
        c = evaluation.plan.context
        bench, names = c["benchmark"], c["names"]
        errs = {r.condition: (r.top1_error, r.n_predicted) for r in store.runs(evaluation.id) if r.top1_error is not None}
        missing = [k for k in ["clean", *names] if k not in errs]
        if missing:
            raise DataError(f"no stored predictions for {', '.join(missing)} (no readable images?)")
        n = errs["clean"][1]
        errors = {k: errs[k][0] for k in names}
        ce = {k: noc_corruption_error(errors[k], bench.baseline.errors[k]) for k in names}
        notes = [
            f"CE normalised by {bench.baseline.name}'s errors ({bench.baseline.source.split(':')[0]}); the corruptions "
            "were computed by shiftbench from the paper's descriptions, the baseline errors by the authors' code."
        ]
        if n < 1000:
            notes.append(
                f"Only {n} images: an error rate carries a standard error of up to {50 / math.sqrt(max(n, 1)):.1f} points."
            )
        if names != list(bench.corruptions):
            notes.append("mCE over a subset of the benchmark's corruptions: not comparable with the full benchmark's mCE.")
        return NocResult(bench, evaluation.classifier.name, c["data"], n, errs["clean"][0], errors, ce,
                         noc_mean_corruption_error(ce), evaluation.id, evaluation.store, evaluation.written, notes)

    def render(self, res: NocResult, *, details: bool = True) -> Report:
        return Report(
            lambda: json.dumps(res.to_dict(), indent=1) + "\n",
            lambda: records_to_csv(result_records(res)),
            lambda console: console.out(res.table(), end="", highlight=False),
        )

    def report_figures(self, store: Path, section: Section) -> list[Any]:
        return report_figures(section.value, stored_model_metric(store, "relative_mce"))

    def stored(self, store: Path, *, model: str | None, baseline: str, evaluation: int | None) -> Section | None:
        if evaluation is not None:
            return None
        records = stored_records(store, model)
        if not records:
            return None
        return Section("imagenet_noc", records, lambda: records_to_csv(_flat(records)),
                       lambda console: _render_stored(records, console))
