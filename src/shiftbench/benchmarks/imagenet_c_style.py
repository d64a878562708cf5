"""ImageNet-C style transfer: the ``style_transfer`` corruption scored like an ImageNet-C corruption.

Hendrycks & Dietterich (2018 draft, Section 4.2 and Appendix C) corrupt ImageNet validation
images with AdaIN style transfer at five severities; AlexNet's error averages 75.7 % over them
(only that mean was published). Conditions: the clean images and ``style_transfer`` at
severities 1..5. Data: clean photos stylised on the fly (``--data``; default the 20 demo
images) or a folder written by ``shiftbench generate imagenet-c --corruptions style_transfer``
(``--released``). Records: each image's label and top-5 classes (the ImageNet-C runner stores
them). Scores: error per severity, CE against AlexNet's published mean, relative CE, and CE per
severity against a stored model (``--baseline <model>``).

The style folder, backend and schedule fix the pixels, so they are part of the data source's
identity and location in the store: two style sets never share an evaluation or a leaderboard.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from ..errors import InvalidArgumentError, UnknownNameError
from ..evaluation.data import Condition, ImageFolderSource, Item, Source, WorkBatch, foolbox_imagenet, open_released
from ..evaluation.metrics import Baseline
from ..evaluation.protocol import Benchmark, Metric, Plan, Report, Section, Settings, Summary, option
from ..evaluation.store import EvaluationInfo, ResultsStore, records_to_csv
from ..style import StyleConfig, configure, style_backend, style_settings, style_source
from . import register_benchmark
from .imagenet_c import EvaluationResult, corruption_plan, corruption_result, parse_severities
from .papers import HENDRYCKS2018
from .style_scores import ALEXNET_MEAN_ERROR, SEVERITIES, per_severity_ce, style_scores

__all__ = ["ImageNetCStyle", "StyleSettings", "StyleResult", "style_tag", "score_evaluation"]

NAME = "imagenet-c-style"
CORRUPTION = "style_transfer"
TITLE = "ImageNet-C style transfer (Hendrycks & Dietterich, 2018 draft, Section 4.2)"

ALEXNET_NOTE = (
    f"CE is normalised by AlexNet's published mean style-transfer error ({ALEXNET_MEAN_ERROR:.1%} over the five "
    "severities; its per-severity errors were never published, so CE needs all five severities and a per-severity "
    "CE against AlexNet cannot be computed)."
)


def style_tag(settings: dict[str, Any]) -> str:
    """What fixes the stylised pixels besides seed and image, in one line: style-set digest, backend, schedule."""
    styles = settings.get("styles") or {}
    backend = settings.get("backend") or {}
    name = backend.get("backend", "?") if isinstance(backend, dict) else str(backend)
    ident = hashlib.sha256(json.dumps(backend, sort_keys=True, default=str).encode()).hexdigest()[:12]
    sched = settings.get("schedule") or {}
    return (f"styles={str(styles.get('digest', '?'))[:16]}({styles.get('count', '?')}) backend={name}:{ident}"
            f" schedule={str(sched.get('digest', '?'))[:16]}")


def _configured(styles: str | None, backend: str | None) -> dict[str, Any]:
    """Apply ``--styles`` / ``--style-backend`` (else the environment) and return the complete style settings."""
    if styles is not None:
        configure(styles=styles)
    if backend is not None:
        configure(backend=backend)
    style_source()  # SHIFTBENCH_STYLE_DIR, or a typed error naming `styles`
    style_backend()  # built now: missing weights or packages are reported before any image
    return style_settings()


def _manifest_style(root: Path) -> dict[str, Any] | None:
    """The style settings a ``shiftbench generate`` folder recorded (None: not recorded)."""
    try:
        doc = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    st = doc.get("style") if isinstance(doc, dict) else None
    return st if isinstance(st, dict) else None


def _tag(src: Source, tag: str) -> Source:
    """Make the source's identity and location carry the style settings (so style sets never mix)."""
    src.identity = f"{src.identity}|{tag}"
    src.location = f"{src.location} ({tag})"
    return src


class StyledSource(Source):
    """Clean photos stylised on the fly wherever their batches are made, with this run's style settings.

    Its identity and location are the photos' with the style tag (so style sets never share an
    evaluation, also after ``select_classes``). Sent to a Ray worker, it carries the style
    configuration by folder, backend name and weight paths (:class:`~shiftbench.style.StyleConfig`)
    and configures the worker's process before its first batch; the worker checks it sees the same
    style images and weights.
    """

    def __init__(self, base: Source, tag: str, config: StyleConfig) -> None:
        self.base, self.tag, self.config = base, tag, config
        self.kind, self.classes, self.edition, self.on_the_fly = base.kind, base.classes, base.edition, base.on_the_fly

    @property  # type: ignore[override]
    def identity(self) -> str:
        return f"{self.base.identity}|{self.tag}"

    @property  # type: ignore[override]
    def location(self) -> str:
        return f"{self.base.location} ({self.tag})"

    @property
    def shared_paths(self) -> dict[str, str]:
        """The folders every Ray node must see: the photos and the style images."""
        return {"--data": self.base.location, "--styles": self.config.styles}

    def conditions(self) -> list[Condition]:
        return self.base.conditions()

    def items(self, condition: Condition) -> list[Item]:
        return self.base.items(condition)

    def content_digest(self) -> str:
        return self.base.content_digest()

    def select_classes(self, classes: Sequence[str]) -> None:
        self.base.select_classes(classes)

    def batches(self, pending: Mapping[Condition, set[str]], *, batch_size: int, seed: int, release: bool,
                stop: threading.Event | None = None) -> Iterator[WorkBatch]:
        if any(c[0] == CORRUPTION for c, keys in pending.items() if keys):
            self.config.apply()
        return self.base.batches(pending, batch_size=batch_size, seed=seed, release=release, stop=stop)

    def describe(self) -> str:
        return f"{self.base.describe()} ({self.tag})"


def _baseline_eval(db: ResultsStore, spec: str, ev: EvaluationInfo) -> EvaluationInfo:
    """The stored style evaluation named by ``--baseline`` (model name or eval:<id>) on the same data and styles."""
    same = [e for e in db.evaluations_of([NAME]) if e.source == ev.source and e.edition == ev.edition]
    s = spec.strip()
    if s.startswith(("eval:", "#")):
        key = s.split(":", 1)[1] if s.startswith("eval:") else s[1:]
        hits = [e for e in same if str(e.id) == key]
    else:
        hits = [e for e in same if e.model == s]
    if not hits:
        names = sorted({e.model for e in same if e.id != ev.id})
        raise UnknownNameError("baseline", spec, ["alexnet", "none", *names], [])
    return hits[-1]


def score_evaluation(db: ResultsStore, ev: EvaluationInfo, baseline: str) -> dict[str, Any]:
    """Scores of one stored style evaluation: errors per severity, CE (AlexNet's mean or a stored model), notes."""
    clean, table, incomplete = db.error_table(ev.id)
    errors = {int(s): e for s, e in table.get(CORRUPTION, {}).items()}
    rec: dict[str, Any] = {
        "benchmark": NAME, "evaluation": ev.id, "model": ev.model, "data": ev.source, "edition": ev.edition,
        "seed": ev.seed if ev.seed >= 0 else None, "images": max((r.n_predicted for r in db.runs(ev.id)), default=0),
        "clean_error": clean, **{f"error_s{s}": errors.get(s) for s in SEVERITIES},
        "mean_error": None, "ce": None, "relative_ce": None, "baseline": None,
        **{f"ce_s{s}": None for s in SEVERITIES}, "incomplete_runs": len(incomplete), "notes": [],
    }
    if len(errors) < len(SEVERITIES):
        missing = [s for s in SEVERITIES if s not in errors]
        rec["notes"].append(f"CE needs all five severities; missing {missing}.")
        return rec
    b = (baseline or "alexnet").strip()
    base_err = base_clean = None
    if b.lower() not in ("alexnet", "none"):
        bev = _baseline_eval(db, b, ev)
        bclean, btab, _ = db.error_table(bev.id)
        base_err = {int(s): e for s, e in btab.get(CORRUPTION, {}).items()}
        if len(base_err) < len(SEVERITIES):
            raise InvalidArgumentError("baseline", baseline, "a stored evaluation with all five severities complete")
        base_clean, rec["baseline"] = bclean, f"{bev.model} #{bev.id}"
    try:
        sc = style_scores(errors, clean_error=clean, baseline=base_err,
                          baseline_clean_error=base_clean if clean is not None else None)
    except InvalidArgumentError as e:  # the baseline's errors do not rise above its clean error: no relative CE
        sc = style_scores(errors, clean_error=clean, baseline=base_err)
        rec["notes"].append(f"No relative CE against {rec['baseline']}: {str(e).splitlines()[0]}")
    rec["mean_error"] = sc.mean_error
    if b.lower() == "alexnet":
        rec.update(ce=sc.ce, relative_ce=sc.relative_ce, baseline="AlexNet (published mean)")
        rec["notes"].append(ALEXNET_NOTE)
    elif base_err is not None:
        rec.update(ce=sc.baseline_ce, relative_ce=sc.baseline_relative_ce)
        rec.update({f"ce_s{s}": v for s, v in per_severity_ce(errors, base_err).items()})
    return rec


def _pct(v: Any) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def _render(records: list[dict[str, Any]], console: Any, title: str) -> None:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["data"], r["edition"]), []).append(r)
    for (data, edition), recs in groups.items():
        t = Table(title=f"{title}: {data}, edition {edition} (%)", title_justify="left", header_style="bold")
        for col in ("Model", "Images", "Clean err", *[f"Err s{s}" for s in SEVERITIES], "Mean err", "CE", "Rel. CE", "Baseline"):
            t.add_column(col, justify="left" if col in ("Model", "Baseline") else "right")
        for r in sorted(recs, key=lambda r: (r["ce"] is None, r["ce"] or 0.0)):
            t.add_row(f"{r['model']} #{r['evaluation']}", str(r["images"]), _pct(r["clean_error"]),
                      *[_pct(r[f"error_s{s}"]) for s in SEVERITIES], _pct(r["mean_error"]), _pct(r["ce"]),
                      _pct(r["relative_ce"]), r["baseline"] or "none")
        console.print(t)
        for note in dict.fromkeys(n for r in recs for n in r["notes"] if n):
            console.print(f"• {note}", highlight=False)


def _csv(records: list[dict[str, Any]]) -> str:
    return records_to_csv([{k: v for k, v in r.items() if k != "notes"} | {"notes": " ".join(r["notes"])} for r in records])


@dataclass(frozen=True)
class StyleSettings(Settings):
    """The options of the style-transfer benchmark."""

    data: str | Path | None = option(
        None, metavar="PATH", help="Clean images (ImageFolder), stylised on the fly; with --released: the clean "
        "images for the clean error. Default: the 20 demo images.")
    released: str | Path | None = option(
        None, metavar="PATH", help="A folder written by `shiftbench generate imagenet-c --corruptions style_transfer`.")
    severities: str | int | Sequence[int] = option("1-5", help="e.g. 1-5 or 1,3,5.")
    seed: int = option(0, minimum=0, help="Seed of the on-the-fly style transfer (styles drawn per image).")
    release: bool = option(False, help="Store-and-reload each stylised image as JPEG q85, like the released datasets.")
    baseline: str | Baseline = option(
        "alexnet", help="CE baseline: alexnet (its published mean error), none, or a stored model name / eval:<id>.")
    classes: str | Sequence[str] = option(
        "auto", help="Label space: auto, model, data, or a file of class ids (wnids) to restrict to.")
    clean: bool = option(True, help="Also evaluate the clean images (needed for relative CE).")
    styles: str | Path | None = option(
        None, metavar="PATH", help="Folder of style images (default: SHIFTBENCH_STYLE_DIR).")
    style_backend: str | None = option(
        None, help="adain (the paper's method) or magenta-lite (default: SHIFTBENCH_STYLE_BACKEND).")


@dataclass
class StyleResult(Summary):
    """The scores of one style-transfer evaluation (``record``: the JSON record) and the evaluation behind them."""

    HEADLINE = (Metric("ce", "lower", "CE"), Metric("relative_ce", "lower", "relative CE"),
                Metric("mean_error", "lower", "mean error"))

    record: dict[str, Any]
    tag: str
    result: EvaluationResult

    @property
    def ce(self) -> float | None:
        return self.record.get("ce")

    @property
    def relative_ce(self) -> float | None:
        return self.record.get("relative_ce")

    @property
    def mean_error(self) -> float | None:
        return self.record.get("mean_error")


@register_benchmark
class ImageNetCStyle(Benchmark[StyleSettings]):
    name = NAME
    title = TITLE
    measures = "Top-1 error under style transfer at 5 severities: CE against AlexNet's published 75.7 % mean, relative CE."
    Settings = StyleSettings
    corruptions = (CORRUPTION,)
    conditions = "clean (severity 0) and style_transfer at severities 1..5; styles drawn per image and severity"
    sources = (
        "on the fly from clean photos (--data; default the 20 demo images), styles from --styles / SHIFTBENCH_STYLE_DIR",
        "a folder written by `shiftbench generate imagenet-c --corruptions style_transfer` (--released)",
    )
    records = "per image: label and top-5 classes"
    full_images = 50_000  # "we corrupt ImageNet validation images" (Hendrycks & Dietterich, 2018, style transfer)
    full_set = "the 50,000 ImageNet validation images at each severity (Hendrycks & Dietterich, 2018)"
    paper = HENDRYCKS2018
    refusals = {"edition": "it is scored at 224 px, the edition of AlexNet's published error"}

    def plan(self, s: StyleSettings, ctx: Any) -> Plan:
        sev = parse_severities(s.severities)
        if s.released is not None and s.release:
            raise InvalidArgumentError("release", s.release, "False with --released (released images are JPEGs already)")
        limit, bad = s.limit, s.bad_images
        clf = ctx.classifier()
        if s.released is not None:
            if s.styles or s.style_backend:
                raise InvalidArgumentError("styles", s.styles or s.style_backend,
                                           "no --styles/--style-backend with --released (the folder is stylised already)")
            src = open_released(s.released, [CORRUPTION], sev, limit=limit, bad_images=bad)
            st = _manifest_style(Path(s.released))
            tag = style_tag(st) if st else "styles=unrecorded"
            corrupted: Source = _tag(src, tag)
            clean: Source | None = None if s.data is None else ImageFolderSource(
                s.data, edition=src.edition, limit=limit, bad_images=bad)
        else:
            st = _configured(None if s.styles is None else str(s.styles), s.style_backend)
            tag = style_tag(st)
            base = foolbox_imagenet(limit=limit, bad_images=bad) if s.data is None else ImageFolderSource(
                s.data, limit=limit, bad_images=bad)
            corrupted = StyledSource(base, tag, StyleConfig.current())
            clean = corrupted
        return corruption_plan(s, clf, corrupted, clean, [CORRUPTION], sev, corrupted.edition or "224", style=st,
                               tag=tag, demo=s.data is None and s.released is None)

    def score(self, store: ResultsStore, evaluation: Any) -> StyleResult:
        result = corruption_result(store, evaluation, "none", self.name)
        ev = store.evaluations_of([NAME], evaluation=evaluation.id)[0]
        rec = score_evaluation(store, ev, evaluation.settings.baseline or "alexnet")
        rec["style"] = evaluation.plan.context["style"]
        if evaluation.plan.context["demo"]:
            rec["notes"].append(f"These {result.n_images} demo images demonstrate the pipeline; they are no benchmark.")
        rec["notes"] += [n for n in result.notes if "published ImageNet-C numbers" not in n and not n.startswith("Not available")]
        return StyleResult(rec, evaluation.plan.context["tag"], result)

    def render(self, summary: StyleResult, *, details: bool = True) -> Report:
        rec, tag = summary.record, summary.tag

        def table(console: Any) -> None:
            _render([rec], console, f"{self.title}")
            console.print(f"• Style settings: {tag}; stored as evaluation {rec['evaluation']} in "
                          f"{summary.result.store_path}.", highlight=False)

        return Report(lambda: json.dumps(rec, indent=1, default=str) + "\n", lambda: _csv([rec]), table)

    def stored(self, store: Path, *, model: str | None, baseline: str, evaluation: int | None) -> Section | None:
        with ResultsStore(store, create=False) as db:
            evs = db.evaluations_of([NAME], model, evaluation)
            if not evs:
                return None
            recs = []
            for e in evs:
                try:
                    recs.append(score_evaluation(db, e, baseline))
                except (InvalidArgumentError, UnknownNameError):  # this one was not measured with the baseline's styles
                    recs.append(score_evaluation(db, e, "none") | {"notes": [f"baseline {baseline}: not stored on these data and styles"]})
        return Section("imagenet_c_style", recs, lambda: _csv(recs),
                       lambda console: _render(recs, console, "Leaderboard by style-transfer CE"))
