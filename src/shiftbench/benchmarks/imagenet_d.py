"""ImageNet-D: DomainNet's six domains seen through the ImageNet-1k classes (Rusak et al., 2022).

Conditions: the domains (clipart, infograph, painting, quickdraw, real,
sketch). Data: a DomainNet folder (``--data``). Records: each image's
DomainNet label and top-5 ImageNet-1k classes; a prediction is right when the
class maps to the label (one-to-many). Score: top-1 error per domain, DE
against AlexNet and mDE, plus the error analysis.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..domains.evaluate import evaluate_imagenet_d, stored_domain_errors
from ..domains.imagenet_val import evaluate_imagenet_val, is_imagenet_folder
from ..domains.report import (
    confusion_outputs,
    imagenet_val_record,
    leaderboard_csv,
    render_imagenet_val,
    render_leaderboard,
    render_result,
    result_csv,
    result_json,
    result_notes,
)
from ..distributed.predictions import RAY_OPTIONS, driver_device, ray_predictions
from ..errors import InvalidArgumentError
from ..evaluation.store import records_to_csv
from ..evaluation.protocol import Benchmark, CountCallback, Progress, Report, Section
from . import register_benchmark

__all__ = ["ImageNetD", "report_figures"]


def report_figures(store: Path, records: list[dict[str, Any]]) -> list[Any]:
    """The report's ImageNet-D figures: top-1 error per domain next to Rusak et al.'s (2022) Table 3 vanilla ResNet-50,
    and their Figure 2's error analysis (most predicted classes per domain) of each stored evaluation."""
    from ..domains.evaluate import stored_error_analysis
    from ..domains.mapping import DOMAINS
    from ..domains.plot import error_analysis_figure
    from ..report.figures import ReportFigure, bar_chart
    from ..zoo.tables import table

    if not records:
        return []
    t3 = table("rusak2022:3")
    ref = t3.rows[0]
    name = f"{ref.label} (published)"
    series: dict[str, dict[str, float | None]] = {name: {d: ref.values.get(d) for d in DOMAINS}}
    for r in records:
        series[f"{r['model']} #{r['evaluation']} ({r['mapping']})"] = {d: 100.0 * e for d, e in r["errors"].items()}
    figs = [ReportFigure(
        "domain-errors", "Top-1 error per domain",
        f"Top-1 error per ImageNet-D domain; {ref.label} from {t3.citation} in grey (the paper's mapping).",
        bar_chart(list(DOMAINS), series, ylabel="top-1 error (%)", published=[name]))]
    for r in records:
        analysis = stored_error_analysis(store, r["evaluation"], r["mapping"], top=8)
        if analysis:
            figs.append(ReportFigure(
                f"error-analysis-{r['evaluation']}", f"Error analysis: {r['model']} #{r['evaluation']}",
                "The ImageNet classes predicted most often per domain (Rusak et al., 2022, Figure 2): blue inside ImageNet-D, "
                "orange outside.",
                error_analysis_figure(analysis, title=f"{r['model']} #{r['evaluation']}")))
    return figs


@register_benchmark
class ImageNetD(Benchmark):
    name = "imagenet-d"
    title = "ImageNet-D (Rusak et al., 2022)"
    measures = "Top-1 error on DomainNet's six domains mapped to ImageNet classes: DE, mDE, error analysis."
    headline = ("mde",)
    options = ("mapping", *RAY_OPTIONS)
    conditions = "domain: clipart, infograph, painting, quickdraw, real, sketch"
    sources = (
        "a DomainNet folder <root>/<domain>/<class>/<image> (--data)",
        "an ImageNet val folder (--data): Rusak et al.'s (2022) Table 4 IN val row",
    )
    records = "per image: domain, DomainNet label and the top-5 ImageNet-1k classes"
    refusals = {
        "baseline": "it normalises by AlexNet's published errors (ImageNet-D Table 2) only; leave --baseline out",
    }

    def evaluate(self, settings: dict[str, Any], progress: Progress | None) -> Report:
        if settings.get("data") is None:
            raise InvalidArgumentError(
                "--data", None, "the DomainNet folder (<root>/<domain>/<class>/<image>) or one domain folder",
                "--benchmark imagenet-d needs --data.",
            )
        mapping = settings.get("mapping") or "paper"
        if is_imagenet_folder(settings["data"]):
            if settings.get("ray") is not None:
                raise InvalidArgumentError(
                    "--ray", settings["ray"], "no --ray with an ImageNet val folder",
                    "Its one pass (Rusak et al.'s (2022) Table 4 IN val row) runs here; --ray applies to the DomainNet domains.",
                )
            return self._imagenet_val(settings, mapping)
        store = settings.get("store")
        callback = None if progress is None else CountCallback(progress)
        try:
            with ray_predictions(settings) as executor:
                result = evaluate_imagenet_d(
                    settings.get("model") or "efficientnet-lite0",
                    settings["data"],
                    weights=settings.get("weights"),
                    batch_size=int(settings.get("batch_size") or 32),
                    device=driver_device(settings) or "cpu",
                    store=store,
                    limit=settings.get("limit"),
                    bad_images=settings.get("bad_images") or "skip",
                    rerun=bool(settings.get("rerun", False)),
                    progress=callback,
                    mapping=mapping,
                    executor=executor,
                )
        finally:
            if callback is not None:
                callback.close()
        details = bool(settings.get("details", True))
        notes = result_notes(result, store, details)
        confusion, cm_notes = confusion_outputs(result, store, details)
        notes += cm_notes
        return Report(
            lambda: result_json(result, notes, confusion),
            lambda: result_csv(result),
            lambda console: render_result(result, console, details, notes),
        )

    def _imagenet_val(self, settings: dict[str, Any], mapping: str) -> Report:
        """Rusak et al.'s (2022) Table 4 first row on an ImageNet validation folder (not stored: one pass, no conditions)."""
        model = settings.get("model") or "efficientnet-lite0"
        row, skipped = evaluate_imagenet_val(
            model,
            settings["data"],
            mapping=mapping,
            weights=settings.get("weights"),
            batch_size=int(settings.get("batch_size") or 32),
            device=settings.get("device") or "cpu",
            limit=settings.get("limit"),
            bad_images=settings.get("bad_images") or "skip",
        )
        rec = imagenet_val_record(model, settings["data"], mapping, row, skipped)
        return Report(
            lambda: json.dumps(rec, indent=2) + "\n",
            lambda: records_to_csv([rec]),
            lambda console: render_imagenet_val(rec, console),
        )

    def report_figures(self, store: Path, section: Section) -> list[Any]:
        return report_figures(store, section.value)

    def stored(self, store: Path, *, model: str | None, baseline: str, evaluation: int | None) -> Section | None:
        if evaluation is not None:
            return None  # --evaluation numbers the ImageNet-C/P evaluations
        records = [r for r in stored_domain_errors(store) if model is None or model in r["model"]]
        if not records:
            return None
        return Section("imagenet_d", records, lambda: leaderboard_csv(records),
                       lambda console: render_leaderboard(records, console))
