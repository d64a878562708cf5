"""ImageNet-P: prediction stability along perturbation sequences (Hendrycks & Dietterich, ICLR 2019).

Conditions: perturbation x difficulty (noise sequences: the noise strength;
the others: frames d apart). Data: sequences generated on the fly from clean
photos (``--data``), released ImageNet-P / Tiny-ImageNet-P MP4 videos or
CIFAR-P arrays (``--released``). Records: each video's per-frame top-5
classes. Score: flip probability, top-5 distance, FR / T5D against AlexNet,
mFR and mT5D.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError
from ..evaluation.protocol import Benchmark, Plan, Report, Section, Settings, option
from ..evaluation.store import ResultsStore, records_to_csv
from ..perturbations.metrics import PBaseline
from ..perturbations.pipeline import PEvaluationResult, p_plan, p_result
from ..perturbations.report import (
    render_result,
    render_results_section,
    result_json,
    result_notes,
    result_records,
    results_section,
)
from . import register_benchmark
from .imagenet_c import resolve_classes, stored_model_metric
from .papers import HENDRYCKS2019

__all__ = ["ImageNetP", "ImageNetPSettings", "report_figures", "architecture_figures"]


@dataclass(frozen=True)
class ImageNetPSettings(Settings):
    """The options of ImageNet-P."""

    data: str | Path | None = option(None, metavar="PATH", help="Clean images (ImageFolder or flat <wnid>_* folder); "
                                     "sequences are generated on the fly. Default: the 20 demo images.")
    released: str | Path | None = option(
        None, metavar="PATH", help="Released ImageNet-P / Tiny-ImageNet-P MP4 tree, or a CIFAR-P .npy folder.")
    edition: str | None = option(None, help="224 (default), 299, 64 (Tiny), 32 (CIFAR); released data: detected.")
    perturbations: str | Sequence[str] | None = option(
        None, help="Comma-separated perturbation names, wildcards or groups (test, validation). Default: test.")
    difficulties: str | int | Sequence[int] | None = option(
        None, help="Difficulties, e.g. 1-3 or 1,2 (default: 1, the level of the published AlexNet numbers).")
    seed: int = option(0, minimum=0, help="Seed of the on-the-fly sequences.")
    baseline: str | PBaseline | Mapping[int, PBaseline] | None = option(
        "alexnet", help="FR / T5D baseline: alexnet (published, 224 edition), none, a stored model name or eval:<id>.")
    classes: str | Sequence[str] = option(
        "auto", help="Label space: auto, model, data, or a file of class ids (wnids) to restrict to.")


def architecture_figures(records: list[dict[str, Any]], clean_error: dict[str, float]) -> list[Any]:
    """Hendrycks & Dietterich (2019) Figure 4: mFR and mT5D against clean top-1 error, the architectures of the
    hendrycks2019:P table (grey)
    and the stored models (stars; ``clean_error``: model name -> % from its stored ImageNet-C evaluation)."""
    from ..evaluation.figures import ReportFigure, published_scatter
    from ..zoo.tables import table

    t = table("hendrycks2019:P")
    figs: list[Any] = []
    scored = [r for r in records if r.get("mfr") is not None or r.get("mt5d") is not None]
    if not scored:
        return figs
    left_out = sorted({r["label"] for r in scored if r["model"] not in clean_error})
    partial = sorted({r["label"] for r in scored if r.get("test_perturbations") != 10})
    tail = ""
    if left_out:
        tail += f" Not shown, no ImageNet-C evaluation (clean error) stored: {', '.join(left_out)}."
    if partial:
        tail += f" Over fewer than the 10 test perturbations, not comparable: {', '.join(partial)}."
    for key, what in (("mfr", "mFR"), ("mt5d", "mT5D")):
        measured = [(r["label"], clean_error.get(r["model"]), None if r.get(key) is None else 100.0 * r[key])
                    for r in scored]
        figs.append(ReportFigure(
            f"{key}-vs-error", f"{what} against clean error (Hendrycks & Dietterich, 2019, Figure 4)",
            f"Stored models (stars; clean error from their ImageNet-C evaluation) next to the architectures the "
            f"ImageNet-P paper states (grey, {t.citation}; AlexNet = 100 by definition). "
            f"The paper's Figure 4 plots mT5D against accuracy.{tail}",
            published_scatter([(p.label, p.values.get("error"), p.values.get(key)) for p in t.rows], measured,
                              xlabel="clean top-1 error (%)", ylabel=f"{what} (%)", reference=100.0)))
    return figs


def report_figures(records: list[dict[str, Any]], clean_error: dict[str, float] | None = None) -> list[Any]:
    """The report's ImageNet-P figures from stored records: flip rate (FR, 100 = AlexNet) per perturbation,
    and with ``clean_error`` (model -> %) Hendrycks & Dietterich's (2019) Figure 4 (:func:`architecture_figures`).

    Where no record has an FR (no AlexNet numbers for the edition) the bars show the
    flip probability FP in % instead.
    """
    from ..evaluation.figures import ReportFigure, bar_chart

    perts = [k[3:] for k in (records[0] if records else {}) if k.startswith("fp_")]
    if not records or not perts:
        return []
    use_fr = any(r.get(f"fr_{p}") is not None for r in records for p in perts)
    key, unit = ("fr", "FR (%)") if use_fr else ("fp", "flip probability FP (%)")
    cats = [p for p in perts if any(r.get(f"{key}_{p}") is not None for r in records)]
    series = {r["label"]: {p: None if r.get(f"{key}_{p}") is None else 100.0 * r[f"{key}_{p}"] for p in cats}
              for r in records}
    caption = ("Flip rate per perturbation (100 = AlexNet, dashed line)." if use_fr else
               "Flip probability per perturbation (no AlexNet numbers for this edition, so no FR).")
    return [ReportFigure("flip-rate", "Prediction flips per perturbation", caption,
                         bar_chart(cats, series, ylabel=unit, reference=100.0 if use_fr else None)),
            *(architecture_figures(records, clean_error) if clean_error is not None else [])]


def _with(s: ImageNetPSettings, **changes: Any) -> ImageNetPSettings:
    import dataclasses

    return dataclasses.replace(s, **changes)


@register_benchmark
class ImageNetP(Benchmark[ImageNetPSettings]):
    name = "imagenet-p"
    title = "ImageNet-P (Hendrycks & Dietterich, ICLR 2019)"
    measures = "How often predictions flip along perturbation sequences: FP, uT5D, FR, T5D, mFR, mT5D."
    headline = ("mfr", "mt5d", "mean_fp")
    Settings = ImageNetPSettings
    conditions = "perturbation (10 test + 4 validation) x difficulty 1..3"
    sources = ("on the fly from clean photos (--data)", "released ImageNet-P / Tiny-ImageNet-P MP4 tree, CIFAR-P arrays")
    records = "per video: label and the top-5 classes of every frame"
    items = ("frames", "frames")
    full_images = 50_000  # one video per ImageNet validation image (the authors' make_imagenet_p.py perturbs them all)
    full_set = ("50,000 videos per perturbation and difficulty, one per ImageNet validation image (Hendrycks & "
                "Dietterich, 2019, Section 4; the authors' make_imagenet_p.py perturbs every validation image)")
    full_unit = "videos"
    paper = HENDRYCKS2019

    def plan(self, s: ImageNetPSettings, ctx: Any) -> Plan:
        if s.data is not None and s.released is not None:
            raise InvalidArgumentError(
                "--data",
                s.data,
                "no --data with --released",
                "The released videos hold their own clean frame; --data generates sequences on the fly. Pass one.",
            )
        classes = resolve_classes(s.classes)
        return p_plan(s if classes is s.classes else _with(s, classes=classes), ctx.classifier())

    def score(self, store: ResultsStore, evaluation: Any) -> PEvaluationResult:
        return p_result(store, evaluation, evaluation.settings.baseline)

    def render(self, r: PEvaluationResult, *, details: bool = True) -> Report:
        notes = result_notes(r)

        def table(console: Any) -> None:
            render_result(r, console, details=details)
            for n in notes:
                console.print(f"• {n}", highlight=False, soft_wrap=False)

        return Report(lambda: result_json(r, notes), lambda: records_to_csv(result_records(r)), table)

    def stored(self, store: Path, *, model: str | None, baseline: str, evaluation: int | None) -> Section | None:
        with ResultsStore(store, create=False) as db:
            evs = db.evaluations_of([self.name], model, evaluation)
            if not evs:
                return None
            records = results_section(db, evs, baseline)
        return Section("imagenet_p", records, lambda: records_to_csv(records),
                       lambda console: render_results_section(records, console))

    def report_figures(self, store: Path, section: Section) -> list[Any]:
        return report_figures(section.value, stored_model_metric(store, "clean_error"))
