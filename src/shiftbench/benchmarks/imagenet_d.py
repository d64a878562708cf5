"""ImageNet-D: DomainNet's six domains seen through the ImageNet-1k classes (Rusak et al., 2022).

Conditions: the domains (clipart, infograph, painting, quickdraw, real,
sketch). Data: a DomainNet folder (``--data``). Records: each image's
DomainNet label and top-5 ImageNet-1k classes; a prediction is right when the
class maps to the label (one-to-many). Score: top-1 error per domain, DE
against AlexNet and mDE, plus the error analysis.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..domains.dataset import DomainNetDataset
from ..domains.evaluate import (
    DomainRecords,
    DomainSource,
    domain_result,
    stored_domain_errors,
    stored_options,
)
from ..domains.imagenet_val import imagenet_val_plan, imagenet_val_row, is_imagenet_folder
from ..domains.mapping import MAPPINGS, domainnet_classes, resolve_mapping
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
from ..errors import InvalidArgumentError
from ..evaluation.models import LabelSpace, imagenet_wnids
from ..evaluation.protocol import Benchmark, Metric, Plan, Planned, Report, Section, Settings, Summary, option
from ..evaluation.store import ResultsStore, records_to_csv
from . import register_benchmark
from .papers import RUSAK2022

__all__ = ["ImageNetD", "ImageNetDSettings", "ImageNetValResult", "report_figures"]


@dataclass(frozen=True)
class ImageNetDSettings(Settings):
    """The options of ImageNet-D."""

    data: str | Path | DomainNetDataset | None = option(
        None, metavar="PATH", help="The DomainNet folder (<root>/<domain>/<class>/<image>) or one domain folder; an "
        "ImageNet val folder gives Rusak et al.'s (2022) Table 4 IN val row.")
    mapping: str | None = option(
        None, help="Class mapping: paper (as published, the default) or wordnet (curated variant).",
        allowed=f"one of {', '.join(MAPPINGS)}")
    domains: str | Sequence[str] | None = option(None, help="Comma-separated domains (default: all six).")
    split: str = option("all", help="DomainNet split: all, train or test (its list files).")
    top: int = option(10, minimum=1, help="Classes per domain in the error analysis (Rusak et al., 2022, Figure 2).")


@dataclass
class ImageNetValResult(Summary):
    """Rusak et al.'s (2022) Table 4 IN val row: ``record`` (flat, as printed)."""

    HEADLINE = (Metric("error", "lower", "error"),)

    record: dict[str, Any]

    @property
    def error(self) -> float | None:
        return self.record.get("error")


def _check_model(clf: Any) -> None:
    if clf.classes is not None and tuple(clf.classes) != imagenet_wnids():
        raise InvalidArgumentError(
            "model", clf.name,
            "a classifier over the 1000 ImageNet-1k classes in index order (ImageNet-D maps DomainNet to them)",
        )


def report_figures(store: Path, records: list[dict[str, Any]]) -> list[Any]:
    """The report's ImageNet-D figures: top-1 error per domain next to Rusak et al.'s (2022) Table 3 vanilla ResNet-50,
    and their Figure 2's error analysis (most predicted classes per domain) of each stored evaluation."""
    from ..domains.evaluate import stored_error_analysis
    from ..domains.mapping import DOMAINS
    from ..domains.plot import error_analysis_figure
    from ..evaluation.figures import ReportFigure, bar_chart
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
class ImageNetD(Benchmark[ImageNetDSettings]):
    name = "imagenet-d"
    title = "ImageNet-D (Rusak et al., 2022)"
    measures = "Top-1 error on DomainNet's six domains mapped to ImageNet classes: DE, mDE, error analysis."
    headline = ("mde",)
    Settings = ImageNetDSettings
    conditions = "domain: clipart, infograph, painting, quickdraw, real, sketch"
    sources = (
        "a DomainNet folder <root>/<domain>/<class>/<image> (--data)",
        "an ImageNet val folder (--data): Rusak et al.'s (2022) Table 4 IN val row",
    )
    records = "per image: domain, DomainNet label and the top-5 ImageNet-1k classes"
    full_set = ("every image of the 164 ImageNet-D classes in DomainNet's train and test lists, per domain (Rusak et "
                "al., 2022); the count depends on the DomainNet download and the mapping, and no per-domain total is "
                "published, so the report cannot flag a smaller evaluation")
    paper = RUSAK2022
    refusals = {
        "baseline": "it normalises by AlexNet's published errors (ImageNet-D Table 2) only; leave --baseline out",
    }

    def plan(self, s: ImageNetDSettings, ctx: Any) -> Plan:
        if s.data is None:
            raise InvalidArgumentError(
                "--data", None, "the DomainNet folder (<root>/<domain>/<class>/<image>) or one domain folder",
                "--benchmark imagenet-d needs --data.",
            )
        m = s.data.mapping if isinstance(s.data, DomainNetDataset) and s.mapping is None else resolve_mapping(s.mapping)
        if not isinstance(s.data, DomainNetDataset) and is_imagenet_folder(s.data):
            plan = imagenet_val_plan(s.data, m, limit=s.limit, bad_images=s.bad_images)
            _check_model(ctx.classifier())
            return plan
        domains = [d.strip() for d in s.domains.split(",") if d.strip()] if isinstance(s.domains, str) else s.domains
        ds = s.data if isinstance(s.data, DomainNetDataset) else DomainNetDataset(
            s.data, domains=domains, split=s.split, limit=s.limit, bad_images=s.bad_images, mapping=m)
        _check_model(ctx.classifier())
        names = domainnet_classes()
        src = DomainSource(ds, {c: i for i, c in enumerate(names)}, s.bad_images)
        return Plan(
            [Planned((d, 0), src, d, 0) for d in ds.domains], "224", options=stored_options(m),
            space=LabelSpace(imagenet_wnids(), None, "model"), label_map=np.arange(len(names), dtype=np.int64),
            writer=lambda ctx: DomainRecords(ctx, m), describe=lambda c: c[0],
            context={"dataset": ds, "mapping": m},
        )

    def score(self, store: ResultsStore, evaluation: Any) -> Any:
        c = evaluation.plan.context
        if "dataset" not in c:  # the IN val row
            row, skipped = imagenet_val_row(store, evaluation)
            clf = evaluation.classifier
            return ImageNetValResult(imagenet_val_record(clf.name, c["data"], c["mapping"].name, row, skipped))
        return domain_result(store, evaluation, c["dataset"], c["mapping"], evaluation.settings.top)

    def render(self, result: Any, *, details: bool = True) -> Report:
        if isinstance(result, ImageNetValResult):
            rec = result.record
            return Report(lambda: json.dumps(rec, indent=2) + "\n", lambda: records_to_csv([rec]),
                          lambda console: render_imagenet_val(rec, console))
        store = result.store_path
        notes = result_notes(result, store, details)
        confusion, cm_notes = confusion_outputs(result, store, details)
        notes += cm_notes
        return Report(
            lambda: result_json(result, notes, confusion),
            lambda: result_csv(result),
            lambda console: render_result(result, console, details, notes),
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
