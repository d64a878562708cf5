"""ImageNet-C and its editions (ImageNet-C 299, Tiny-ImageNet-C, CIFAR-10-C / CIFAR-100-C).

Conditions: corruption x severity (1..5) plus the clean images (severity 0).
Data: clean photos corrupted on the fly (``--data``) or a released tree / CIFAR
arrays (``--released``). Records: each image's label and top-5 classes. Score:
clean error, CE per corruption, mCE and relative mCE, normalised by AlexNet's
published errors or a stored model (Hendrycks & Dietterich, ICLR 2019).

With no data: EfficientNet-Lite0 on the 20 ImageNet images inside the foolbox
wheel, every registered ImageNet-C corruption at severities 1..5, computed on the
fly; a demonstration of the pipeline, not a benchmark.
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..checks import check_severity, suggest
from ..corruptions import list_corruptions
from ..editions import get_edition
from ..errors import InvalidArgumentError, InvalidSeverityError, UnknownNameError
from ..evaluation.baselines import alexnet_baseline, resolve_baseline
from ..evaluation.data import CLEAN, ImageFolderSource, Source, foolbox_imagenet, open_released
from ..evaluation.metrics import (
    ALL_CORRUPTIONS,
    BENCHMARK_CORRUPTIONS,
    FAMILIES,
    Baseline,
    group_of,
    summarize,
)
from ..evaluation.metrics import Summary as CorruptionSummary
from ..evaluation.models import read_class_list
from ..evaluation.protocol import Benchmark, Metric, Plan, Planned, Report, Section, Settings, Summary, option
from ..evaluation.report import ReportRow, baseline_row, render_details, render_table, to_csv, to_json
from ..evaluation.store import CLEAN_NAME, ResultsStore, RunInfo
from ..evaluation.testtime import with_test_time
from . import register_benchmark
from .papers import HENDRYCKS2019

__all__ = [
    "ImageNetC",
    "ImageNetCSettings",
    "EvaluationResult",
    "corruption_plan",
    "corruption_result",
    "parse_severities",
    "resolve_corruptions",
    "resolve_classes",
    "report_rows",
    "demo_notes",
    "report_figures",
    "stored_model_metric",
]

NAME = "imagenet-c"
TITLE = "ImageNet-C (Hendrycks & Dietterich, ICLR 2019)"


@dataclass(frozen=True)
class ImageNetCSettings(Settings):
    """The options of ImageNet-C (and its editions)."""

    data: str | Path | Source | None = option(
        None, metavar="PATH", help="Clean images (ImageFolder: <data>/<wnid>/<image>), corrupted on the fly. With "
        "--released: the clean images for the clean error. Default: the 20 demo images.")
    released: str | Path | Source | None = option(
        None, metavar="PATH", help="Released dataset: ImageNet-C / Tiny-ImageNet-C tree, CIFAR-10-C/100-C folder.")
    edition: str | None = option(None, help="224 (default), 299, 64 (Tiny), 32 (CIFAR); released data: detected.")
    corruptions: str | Sequence[str] | None = option(
        None, help="Comma-separated names, wildcards or groups (benchmark, extra, noise, blur...). Default: all.")
    severities: str | int | Sequence[int] = option("1-5", help="e.g. 1-5 or 1,3,5.")
    seed: int = option(0, minimum=0, help="Seed of the on-the-fly corruptions.")
    release: bool = option(False, help="Store-and-reload each corrupted image as JPEG q85, like the released datasets.")
    baseline: str | Baseline = option(
        "alexnet", help="CE baseline: alexnet (published), none, a model name in the store, eval:<id>, or a .json file.")
    classes: str | Sequence[str] = option(
        "auto", help="Label space: auto, model (all model outputs), data (restrict logits to the data's classes), or a "
        "file of class ids (wnids) to restrict to.")
    clean: bool = option(True, help="Also evaluate the clean images (needed for relative mCE).")
    tta: str | None = option(
        None, help="Test-time augmentation, ten-crop (Hendrycks & Dietterich, 2018, Appendix D: the mean softmax of the "
        "4 corner and centre crops and their mirrors).")
    preprocess: str | None = option(
        None, help="Preprocessing of every input, clahe (contrast limited adaptive histogram equalization) or "
        "nlm-denoise (non-local means at the estimated noise level), as Hendrycks & Dietterich, 2018, Sections 3.4-3.5.")


def resolve_classes(classes: Any) -> Any:
    """``auto`` / ``model`` / ``data`` as they are; any other string is a file of class ids; a list stays a list."""
    if isinstance(classes, str) and classes in ("auto", "model", "data"):
        return classes
    if isinstance(classes, (str, Path)):
        return list(read_class_list(classes))
    return list(classes)


def parse_severities(spec: str | int | Sequence[int] | None) -> list[int]:
    """Severities from ``"1-5"``, ``"1,3,5"``, ``3`` or ``[1, 2]``; sorted, without duplicates.

    Raises:
        InvalidSeverityError / InvalidArgumentError: anything but integers in 1..5.
    """
    if spec is None:
        return [1, 2, 3, 4, 5]
    values: list[Any]
    if isinstance(spec, str):
        values = []
        for part in spec.replace(" ", "").split(","):
            if not part:
                continue
            if "-" in part:
                lo, _, hi = part.partition("-")
                if not (lo.isdigit() and hi.isdigit()) or int(lo) > int(hi):
                    raise InvalidArgumentError(
                        "severities", spec, "integers 1..5 as a list or range, e.g. '1-5' or '1,3,5'"
                    )
                values.extend(range(int(lo), int(hi) + 1))
            elif part.isdigit():
                values.append(int(part))
            else:
                raise InvalidArgumentError(
                    "severities", spec, "integers 1..5 as a list or range, e.g. '1-5' or '1,3,5'"
                )
    elif isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        values = [int(spec)]
    elif isinstance(spec, Sequence) and not isinstance(spec, bool):
        values = list(spec)
    else:
        raise InvalidArgumentError("severities", spec, "integers 1..5 as a list or range, e.g. '1-5' or '1,3,5'")
    if not values:
        raise InvalidArgumentError("severities", spec, "at least one severity in 1..5")
    out: set[int] = set()
    for v in values:
        try:
            out.add(check_severity(v, "severities"))
        except InvalidSeverityError as e:
            raise InvalidSeverityError("severities", spec, "integers in 1..5", f"{v!r} is not one.") from e
    return sorted(out)


def resolve_corruptions(
    spec: str | Sequence[str] | None, benchmark: Any, *, on_the_fly: bool
) -> tuple[list[str], list[str]]:
    """The corruptions to evaluate, and the benchmark's ones this build cannot compute.

    Args:
        spec: None (all of the benchmark), a comma-separated string or a list of
            names, wildcards (``"*blur"``) or groups (``"benchmark"``, ``"extra"``,
            ``"noise"``...).
        benchmark: the benchmark (its ``name`` and ``corruptions``, in the papers' order).
        on_the_fly: True when the engine computes the corruptions (then only
            registered ones are possible); False for released data (any of the
            benchmark's names).

    Returns:
        ``(selected in the papers' order, unavailable benchmark corruptions)``.
    """
    names = list(benchmark.corruptions)
    registered = [c for c in list_corruptions() if c in names] if on_the_fly else names
    unavailable = [c for c in names if c not in registered]
    if spec is None:
        return registered, unavailable
    parts = [p.strip() for p in (spec.split(",") if isinstance(spec, str) else spec) if p and p.strip()]
    if not parts:
        raise InvalidArgumentError("corruptions", spec, "at least one corruption name, wildcard or group")
    if on_the_fly:
        try:
            chosen = list_corruptions(parts)
        except UnknownNameError as e:
            raise UnknownNameError("corruptions", e.value, e.choices, e.suggestions) from e
        outside = [c for c in chosen if c not in names]
        if outside:
            raise InvalidArgumentError(
                "corruptions", ", ".join(outside), f"corruptions of {benchmark.name}: {', '.join(names)}"
            )
        return chosen, unavailable

    chosen = []
    for p in parts:
        key = p.lower().replace("-", "_")
        if key in ("all", "*"):
            hits = names
        elif key in ("benchmark", "extra"):
            hits = [c for c in names if group_of(c) == key]
        elif key in FAMILIES:
            hits = [c for c in names if c in FAMILIES[key]]
        else:
            hits = [c for c in names if fnmatch.fnmatchcase(c, key)]
            if not hits:
                raise UnknownNameError("corruptions", p, names, suggest(key, names))
        chosen.extend(h for h in hits if h not in chosen)
    return [c for c in names if c in chosen], unavailable


@dataclass
class EvaluationResult(Summary):
    """What an ImageNet-C evaluation did and the scores recomputed from the store.

    Attributes:
        evaluation_id: the evaluation's id in the store.
        store_path: the store file (None: a temporary store).
        summary: the Table-1 scores (:class:`~shiftbench.evaluation.metrics.Summary`).
        model: the model's name; ``model_checksum`` its weights' checksum.
        data: a description of the (corrupted) data.
        clean_data: a description of the clean data, None if not evaluated.
        settings: benchmark, edition, seed, release mode, corruptions, severities, label space, baseline.
        runs: the runs of the requested conditions, with counts.
        new_predictions: predictions written by this call (0: all reused from the store).
        unavailable: benchmark corruptions this build cannot compute on the fly.
        notes: sentences a report must print besides ``summary.notes``.
        demo: the 20 demo images (no data given).
    """

    HEADLINE = (Metric("clean_error", "lower", "clean error"), Metric("mce", "lower", "mCE"),
                Metric("relative_mce", "lower", "relative mCE"))

    evaluation_id: int
    store_path: Path | None
    summary: CorruptionSummary
    model: str
    model_checksum: str
    data: str
    clean_data: str | None
    settings: dict[str, Any]
    runs: list[RunInfo]
    new_predictions: int
    unavailable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    demo: bool = False

    @property
    def clean_error(self) -> float | None:
        return self.summary.clean_error

    @property
    def mce(self) -> float | None:
        return self.summary.mce

    @property
    def relative_mce(self) -> float | None:
        return self.summary.relative_mce

    @property
    def n_images(self) -> int:
        """Largest number of images evaluated in one run."""
        return max((r.n_predicted for r in self.runs), default=0)

    @property
    def n_skipped(self) -> int:
        """Unreadable images skipped, summed over the runs."""
        return sum(r.n_skipped for r in self.runs)


def corruption_plan(
    s: Any, clf: Any, corrupted: Source, clean: Source | None, names: list[str], sev: list[int], edition: str,
    **context: Any,
) -> Plan:
    """The plan of a corruption benchmark: clean (unless ``s.clean`` is False) and corruption x severity."""
    default_mode = (
        "data" if edition == "64" and clf.classes is not None and len(corrupted.classes) < len(clf.classes) else "model"
    )
    conds = [Planned(CLEAN, clean, CLEAN_NAME, 0)] if clean is not None and s.clean else []
    conds += [Planned((c, v), corrupted, c, v) for c in names for v in sev]
    return Plan(
        conds, edition, source=corrupted, seed=s.seed, stored_seed=s.seed if corrupted.on_the_fly else -1,
        release=s.release, classes=resolve_classes(s.classes), default_space=default_mode,
        data_classes=corrupted.classes,
        context={"names": names, "severities": sev, "edition": edition, "on_the_fly": corrupted.on_the_fly,
                 "kind": corrupted.kind, "data": corrupted.describe(),
                 "clean_data": None if clean is None or not s.clean else clean.describe(), **context},
    )


def corruption_result(db: ResultsStore, ev: Any, baseline: Any, benchmark: str) -> EvaluationResult:
    """The scores of a corruption benchmark's evaluation, recomputed from the store."""
    c, clf = ev.plan.context, ev.classifier
    names, sev, ed, seed, release = c["names"], c["severities"], c["edition"], ev.plan.seed, ev.plan.release
    clean_err, table, _ = db.error_table(ev.id)
    table = {k: {v: e for v, e in d.items() if v in sev} for k, d in table.items() if k in set(names)}
    table = {k: d for k, d in table.items() if d}
    base, why_not = resolve_baseline(baseline, store=db, edition=ed, source_kind=c["kind"])
    summary = summarize(clf.name, table, clean_err, base)
    notes: list[str] = []
    if why_not and baseline is not None and not (isinstance(baseline, str) and baseline.lower() == "none"):
        notes.append(f"CE not normalised: {why_not}.")
    if c.get("unavailable"):
        notes.append(
            f"Not available in this build (not registered with the corruption engine): {', '.join(c['unavailable'])}."
        )
    if c["on_the_fly"]:
        notes.append(
            f"Corruptions computed on the fly (seed {seed}, edition {ed}, release mode "
            f"{'on: JPEG q85 like the released files' if release else 'off'}); published ImageNet-C numbers come "
            "from the released JPEGs, whose errors differ by a few points."
        )
    runs = [r for r in db.runs(ev.id) if r.id in set(ev.run_ids.values())]
    skipped = sum(r.n_skipped for r in runs)
    if skipped:
        notes.append(f"{skipped} image(s) could not be read and were skipped (listed in the store).")
    settings = {
        "benchmark": benchmark, "edition": ed, "seed": seed if c["on_the_fly"] else None, "release": release,
        "corruptions": names, "severities": sev, "label_space": f"{ev.space.mode} ({len(ev.space.classes)} classes)",
        "baseline": summary.baseline, "baseline_source": summary.baseline_source, "on_the_fly": c["on_the_fly"],
    }
    return EvaluationResult(ev.id, ev.store, summary, clf.name, clf.checksum, c["data"], c["clean_data"], settings,
                            runs, ev.written, c.get("unavailable", []), notes, bool(c.get("demo")))


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
    from ..evaluation.figures import ReportFigure, bar_chart, line_chart, published_scatter, small_multiples
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
class ImageNetC(Benchmark[ImageNetCSettings]):
    name = NAME
    title = TITLE
    measures = "Top-1 error under 15 (+4 extra) corruptions at 5 severities: CE, mCE, relative mCE."
    headline = ("clean_error", "mce", "relative_mce")
    full_images = 50_000  # the ImageNet validation set (Hendrycks & Dietterich, 2019)
    full_set = "the 50,000 ImageNet validation images, each corruption at each severity (Hendrycks & Dietterich, 2019)"
    paper = HENDRYCKS2019
    Settings = ImageNetCSettings
    corruptions: tuple[str, ...] = ALL_CORRUPTIONS
    default_edition = "224"
    conditions = "corruption x severity 1..5, and clean (severity 0); editions 224, 299, 64 (Tiny), 32 (CIFAR)"
    sources = ("on the fly from clean photos (--data)", "released ImageNet-C / Tiny-ImageNet-C tree, CIFAR-10-C/100-C arrays")
    records = "per image: label and top-5 classes"

    def plan(self, s: ImageNetCSettings, ctx: Any) -> Plan:
        sev = parse_severities(s.severities)
        if s.released is not None and s.release:
            raise InvalidArgumentError("release", s.release, "False with --released (released images are JPEGs already)")
        ed = get_edition(s.edition).name if s.edition is not None else None
        clf = with_test_time(ctx.classifier(), tta=s.tta, preprocess=s.preprocess)
        lim, bad = s.limit, s.bad_images
        clean: Source | None
        if s.released is not None:
            names, _ = resolve_corruptions(s.corruptions, self, on_the_fly=False)
            corrupted = s.released if isinstance(s.released, Source) else open_released(
                s.released, names, sev, edition=ed, limit=lim, bad_images=bad)
            ed = corrupted.edition
            clean = s.data if isinstance(s.data, Source) or s.data is None else ImageFolderSource(
                s.data, edition=ed, limit=lim, bad_images=bad)
            unavailable: list[str] = []
        else:
            ed = ed or self.default_edition
            names, unavailable = resolve_corruptions(s.corruptions, self, on_the_fly=True)
            corrupted = s.data if isinstance(s.data, Source) else (
                foolbox_imagenet(edition=ed, limit=lim, bad_images=bad) if s.data is None
                else ImageFolderSource(s.data, edition=ed, limit=lim, bad_images=bad))
            clean = corrupted
        plan = corruption_plan(s, clf, corrupted, clean, names, sev, ed, unavailable=unavailable,
                               demo=s.data is None and s.released is None)
        if clf is not ctx.classifier():  # stored as a model of its own (its identity names the methods)
            plan.model = clf
        return plan

    def score(self, store: ResultsStore, evaluation: Any) -> EvaluationResult:
        return corruption_result(store, evaluation, evaluation.settings.baseline, self.name)

    def render(self, result: EvaluationResult, *, details: bool = True) -> Report:
        rows = report_rows(result)
        notes = [
            f"Model {result.model} ({result.model_checksum[:19]}...) on {result.data}"
            + (f"; clean images: {result.clean_data}" if result.clean_data and result.clean_data != result.data else ""),
            *demo_notes(result, result.demo),
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

        return Report(lambda: to_json(rows, notes), lambda: to_csv(rows), table)

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

        return Section("rows", json.loads(to_json(all_rows))["rows"], lambda: to_csv(all_rows), table)

    def report_figures(self, store: Path, section: Section) -> list[Any]:
        return report_figures(section.value)
