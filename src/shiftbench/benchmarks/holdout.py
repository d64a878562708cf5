"""Structural hold-outs (Hendrycks & Dietterich, Sections 4.2-4.3): train without a part of a dataset, test on it.

:class:`HoldoutBenchmark` is the shared part of the structural hold-out benchmarks (``icons-50-style``,
``icons-50-subtype``, ``cifar-100-subclass``, ``imagenet-22k-subclass``): splits of a labelled dataset,
one model per split (the ``--model`` checkpoint, or the split's recipe trained first, seeded and
resumable, under ``<store folder>/structural-models/``), one evaluation per split with two conditions
(the held-out part and, where the split keeps one, a held-out share of the seen part), each item's label
and top-5 classes, accuracy on each part and the gap (seen - held out), per split and averaged over several.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from ..errors import InvalidArgumentError
from ..evaluation.models import DEFAULT_MODEL, Classifier, InputTransform, LabelSpace
from ..evaluation.protocol import Benchmark, Metric, Plan, Planned, Report, Section, Settings, Summary, option
from ..evaluation.store import ResultsStore, records_to_csv
from ..structural import LabelledImages, Split, read_emoji_styles, read_icons50
from ..structural.evaluate import ItemPredictions, PartSource, score
from ..training.recipes import TrainedModel, get_recipe, load_trained, train_classifier
from .papers import HENDRYCKS2018

__all__ = ["HoldoutBenchmark", "HoldoutSettings", "IconsSettings", "HoldoutSummary", "PartSource", "SplitSpace", "SubclassSettings",
           "classifier", "db_predictions", "holdout_figures", "read_icons_data", "parse_recipe", "seen_test_share", "spread"]


@dataclass(frozen=True)
class SubclassSettings(Settings):
    """The options of a structural hold-out without a choice of hold-out."""

    data: str | Path | None = option(None, metavar="PATH", help="The labelled dataset (see the benchmark).")
    seed: int = option(0, minimum=0, help="Seed of the split and of the training.")
    recipe: str | None = option(
        None, help="Without a --model checkpoint: the training recipe, NAME or NAME:key=value,... (e.g. "
        "icons50-wrn-16-4:arch=small_cnn,epochs=1); default: the paper's.")


@dataclass(frozen=True)
class HoldoutSettings(SubclassSettings):
    """The options of a structural hold-out benchmark."""

    holdout: str | None = option(
        None, help="The held-out part: a style (icons-50-style; 'all' = leave each out), subtypes "
        "(icons-50-subtype: paper, random or names) or k 1..3 (cifar-100-subclass).")


@dataclass(frozen=True)
class IconsSettings(HoldoutSettings):
    """The options of the ICONS-50 hold-outs: the seen-test share is a variant, off by default."""

    seen_test_share: float = option(
        0.0, minimum=0, help="Share of each seen class kept out of training to measure the seen accuracy and the "
        "gap (0, the default: train on all the seen data, as Hendrycks & Dietterich's script does; "
        "0.1: shiftbench's earlier split).")


@dataclass
class HoldoutSummary(Summary):
    """The splits' records (accuracy on each part and the gap) and their mean over several splits."""

    HEADLINE = (Metric("heldout_accuracy", "higher", "held-out accuracy"),
                Metric("seen_accuracy", "higher", "seen accuracy"), Metric("gap", "lower", "gap"))

    splits: list[dict[str, Any]]
    mean: dict[str, float | None] | None = None

    def _value(self, key: str) -> float | None:
        if self.mean is not None:
            return self.mean[key]
        v = self.splits[0].get(key) if self.splits else None
        return None if v is None else float(v)

    @property
    def heldout_accuracy(self) -> float | None:
        return self._value("heldout_accuracy")

    @property
    def seen_accuracy(self) -> float | None:
        return self._value("seen_accuracy")

    @property
    def gap(self) -> float | None:
        return self._value("gap")


@dataclass(frozen=True)
class SplitSpace(LabelSpace):
    """A split model's label space: all its classes, stored under the digest of the class list."""

    @property
    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.classes).encode()).hexdigest()


def read_icons_data(path: str | None) -> LabelledImages:
    """ICONS-50 (``Icons-50.npy`` or the folder release) or emoji-styles (its folder or ``.npz``)."""
    if path is None:
        raise InvalidArgumentError("data", None, "Icons-50.npy, the ICONS-50 folder release, or the emoji-styles folder")
    p = Path(path).expanduser()
    if p.suffix == ".npz" or (p.is_dir() and (p / "emoji-styles-32.npz").is_file()):
        return read_emoji_styles(p)
    return read_icons50(p)


def parse_recipe(spec: str | None, default: str) -> Any:
    """``NAME`` or ``NAME:key=value,...`` (e.g. ``icons50-wrn-16-4:arch=small_cnn,epochs=1``) -> a TrainingSpec."""
    name, _, rest = (spec or default).partition(":")
    over: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        k, eq, v = part.partition("=")
        if not eq:
            raise InvalidArgumentError("recipe", spec, "NAME or NAME:key=value,... e.g. icons50-wrn-16-4:epochs=5")
        for cast in (int, float):
            try:
                over[k.strip()] = cast(v)
                break
            except ValueError:
                continue
        else:
            over[k.strip()] = v.strip()
    return get_recipe(name.strip(), **over)


def seen_test_share(s: Any) -> float:
    """``--seen-test-share``, checked: a share in [0, 1) of each seen class kept out of training."""
    v = getattr(s, "seen_test_share", 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
        raise InvalidArgumentError("seen_test_share", v, "a share in [0, 1) of each seen class (0: train on all of them)")
    return float(v)


def spread(idx: np.ndarray, limit: int | None) -> np.ndarray:
    """At most ``limit`` of ``idx``, spread evenly (all of them when ``limit`` is None)."""
    if not limit or len(idx) <= limit:
        return idx
    return idx[np.linspace(0, len(idx) - 1, int(limit)).round().astype(np.int64)]


def classifier(model: TrainedModel, name: str, checksum: str) -> Classifier:
    """A trained split model as the evaluation loop's classifier (on the CPU): uint8 images / 255, then the
    recipe's per-channel normalisation, as in training."""
    r = model.spec.recipe
    mean, std = tuple(float(v) for v in r.mean), tuple(float(v) for v in r.std)
    if len(mean) == 1:
        mean, std = mean * 3, std * 3
    return Classifier(model.net.to("cpu"), name=name, transform=InputTransform(None, mean, std, 255.0),  # type: ignore[arg-type]
                      classes=model.classes, checksum=checksum)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


PAPER = "Hendrycks & Dietterich (2018)"
"""The paper stating the published held-out accuracies (its draft of the ImageNet-C paper, Sections 4.2-4.3)."""


def holdout_figures(title: str, records: list[dict[str, Any]], published: Mapping[str, tuple[float, int]]) -> list[Any]:
    """Hendrycks & Dietterich (2018) Fig. 6 for a structural hold-out: seen against held-out accuracy of each stored evaluation, with the
    paper's published held-out accuracy for the same split beside them (``published``: split -> (%, line of the paper's text))."""
    from ..evaluation.figures import ReportFigure, bar_chart

    recs = [r for r in records if r.get("heldout_accuracy") is not None or r.get("seen_accuracy") is not None]
    if not recs:
        return []
    cats = [f"{r['model']} #{r['evaluation']} ({r['split']})" for r in recs]
    series: dict[str, dict[str, float | None]] = {
        "seen": {c: None if r.get("seen_accuracy") is None else 100.0 * r["seen_accuracy"] for c, r in zip(cats, recs)},
        "held out": {c: None if r.get("heldout_accuracy") is None else 100.0 * r["heldout_accuracy"]
                     for c, r in zip(cats, recs)},
    }
    pub_name = f"held out, published ({PAPER})"
    pub = {c: published[r["split"]][0] for c, r in zip(cats, recs) if r.get("split") in published}
    cited = sorted({f"{r['split']} {published[r['split']][0]:g} %"
                    for r in recs if r.get("split") in published})
    if pub:
        series[pub_name] = dict(pub)
    caption = ("Accuracy on the held-out part against the seen part's held-out test share, per stored evaluation "
               "(the paper's Figure 6 shows the same gap for ImageNet-22K subclasses). ")
    caption += (f"Grey: the held-out accuracy {PAPER} states for the same split: {'; '.join(cited)}."
                if cited else "The paper states no held-out accuracy for these splits.")
    return [ReportFigure("seen-vs-held-out", f"{title}: seen and held-out accuracy", caption,
                         bar_chart(cats, series, ylabel="accuracy (%)", published=[pub_name] if pub else []))]


class HoldoutBenchmark(Benchmark[HoldoutSettings]):
    """A structural hold-out: splits of a labelled dataset, one model per split, accuracy per part and the gap.

    Per split: its model (the ``--model`` checkpoint, or the split's recipe trained, resumably, under the
    store's folder on ``--device``), then its two parts through the evaluation driver (with ``--ray`` the
    trained model is sent to the Ray workers), then the scores from the stored predictions.
    ``published_heldout``: the held-out accuracy (%) Hendrycks & Dietterich (2018) state per split name, with the line of
    its text (drawn beside the stored ones in the report).
    """

    default_recipe = "icons50-wrn-16-4"
    paper = HENDRYCKS2018
    headline = ("heldout_accuracy", "seen_accuracy", "gap")
    published_heldout: Mapping[str, tuple[float, int]] = {}
    Settings = HoldoutSettings
    items = ("items", "items")
    records = "per item: label and top-5 classes"
    model_by_name = False

    def read(self, s: Any) -> LabelledImages:
        return read_icons_data(None if s.data is None else str(s.data))

    def splits(self, data: LabelledImages, s: Any) -> list[Split]:
        raise NotImplementedError

    def model_for(self, split: Split, s: Any, ctx: Any) -> TrainedModel:
        """The ``--model`` checkpoint, or the split's recipe trained (resumably) under the store's folder."""
        model = ctx.model_spec
        if model not in (None, "", DEFAULT_MODEL, "train"):
            p = Path(str(model)).expanduser()
            if not p.is_file():
                raise InvalidArgumentError(
                    "model", model, "a checkpoint written by shiftbench.training.recipes.train_classifier for this split, "
                    "or 'train' (train the split's recipe first)")
            trained = load_trained(p, ctx.device or "cpu")
            if tuple(trained.classes) != tuple(split.classes):
                raise InvalidArgumentError("model", model, f"a model of the split's {len(split.classes)} classes",
                                           f"It has {len(trained.classes)}.")
            return trained
        spec = parse_recipe(s.recipe, self.default_recipe)
        train = split.train_source.subset(spread(split.train_idx, s.limit))
        tag = hashlib.sha256(json.dumps([split.held_out, split.info], sort_keys=True, default=str).encode()).hexdigest()[:8]
        store = ctx.store if ctx.store is not None else Path.cwd() / "results.sqlite"
        folder = store.parent / "structural-models" / self.name / f"{split.name.replace(':', '-').replace('/', '_')}-{tag}"
        return train_classifier(train, spec, folder, seed=s.seed, device=ctx.device or "cpu",
                                run_name=f"{spec.name}-seed{s.seed}-n{len(train)}")

    def plan(self, s: Any, ctx: Any) -> list[Plan]:
        data = self.read(s)
        return [self._split_plan(data, split, s, ctx) for split in self.splits(data, s)]

    def _split_plan(self, data: LabelledImages, split: Split, s: Any, ctx: Any) -> Plan:
        model = self.model_for(split, s, ctx)
        name, checksum = f"{model.spec.arch} {model.checkpoint.stem}", _sha256(model.checkpoint)
        parts = (("held_out", split.test_source, spread(split.heldout_idx, s.limit)),
                 ("seen_test", split.seen_source or split.train_source, spread(split.seen_test_idx, s.limit)))
        parts = tuple(p for p in parts if p[0] == "held_out" or len(p[2]))  # no seen share kept out: one part
        conds = []
        for part, source, idx in parts:
            cond = (f"{part}:{split.name}", 0)
            conds.append(Planned(cond, PartSource(cond, source, [int(i) for i in idx], model.image_size), cond[0], 0))
        ident = f"{data.name}|{split.name}|{json.dumps([split.held_out, split.info], sort_keys=True, default=str)}"
        return Plan(
            conds, str(model.image_size), seed=0, stored_seed=s.seed, model=classifier(model, name, checksum),
            model_record=(name, f"structural:{model.checkpoint.resolve()}", checksum,
                          {"spec": model.spec.to_dict(), "split": split.to_dict()}),
            source_record=(data.name.split()[0], ident, str(s.data), split.classes),
            space=SplitSpace(tuple(split.classes), None, "model"), label_map=np.arange(len(split.classes)),
            prefetch=False, context={"split": split, "parts": parts, "data": data, "trained": model, "name": name},
        )

    def score(self, store: ResultsStore, evaluation: Any) -> HoldoutSummary:
        c = evaluation.plan.context
        split, parts = c["split"], c["parts"]
        preds: dict[str, ItemPredictions] = {}
        for (part, source, _), rid in zip(parts, evaluation.run_ids.values(), strict=True):
            keys, labels, top1 = db_predictions(store, evaluation.id, rid)
            order = np.argsort(keys)
            k = keys[order]
            group = (source.styles if split.kind == "style" and source.styles is not None else source.subtypes)[k]
            preds[part] = ItemPredictions(part, k, labels[order], top1[order], group)
        if "seen_test" not in preds:  # trained on all the seen data: no seen accuracy
            none = np.zeros(0, np.int64)
            preds["seen_test"] = ItemPredictions("seen_test", none, none, none, np.zeros(0, dtype=str))
        sub_split = Split(split.name, split.kind, split.held_out, split.train_source, split.test_source,
                          split.train_idx, preds["seen_test"].index, preds["held_out"].index, split.info, split.seen_source)
        sc = score(sub_split, preds["held_out"], preds["seen_test"])
        return HoldoutSummary([{"benchmark": self.name, "evaluation": evaluation.id, "model": c["name"],
                                "checkpoint": str(c["trained"].checkpoint), "data": c["data"].name,
                                **_score_fields(sc.to_dict())}])

    def combine(self, summaries: list[Summary]) -> HoldoutSummary:
        records = [r for sm in summaries for r in sm.splits]  # type: ignore[attr-defined]
        mean = None
        if len(records) > 1:
            mean = {k: _mean([r[k] for r in records]) for k in ("heldout_accuracy", "seen_accuracy", "gap")}
        return HoldoutSummary(records, mean)

    def render(self, summary: HoldoutSummary, *, details: bool = True) -> Report:
        return _report(self.title, summary.splits, summary.mean)

    def stored(self, store: Path, *, model: str | None, baseline: str, evaluation: int | None) -> Section | None:
        with ResultsStore(store, create=False) as db:
            recs = []
            for e in db.evaluations_of([self.name], model, evaluation):
                runs = {r.corruption.split(":", 1)[0]: r for r in db.runs(e.id) if r.status == "complete"}
                acc = {p: (None if r.top1_error is None else 1.0 - r.top1_error) for p, r in runs.items()}
                name = next((r.corruption.split(":", 1)[1] for r in db.runs(e.id)), "?")
                h, s = acc.get("held_out"), acc.get("seen_test")
                recs.append({"benchmark": self.name, "evaluation": e.id, "model": e.model, "split": name,
                             "heldout_accuracy": h, "seen_accuracy": s,
                             "gap": None if h is None or s is None else s - h,
                             "n_heldout": runs["held_out"].n_predicted if "held_out" in runs else 0,
                             "n_seen": runs["seen_test"].n_predicted if "seen_test" in runs else 0})
        if not recs:
            return None
        return Section(self.name.replace("-", "_"), recs, lambda: records_to_csv(recs),
                       lambda console: _table(console, f"{self.title}: stored", recs))

    def report_figures(self, store: Path, section: Section) -> list[Any]:
        return holdout_figures(self.title.split(" (")[0], section.value, self.published_heldout)


def _mean(values: list[Any]) -> float | None:
    """The mean of the values, None when any is None (a split without a seen share)."""
    return None if any(v is None for v in values) else float(np.mean(values))


def db_predictions(db: ResultsStore, evaluation_id: int, run_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Item keys (as ints), labels and top-1 classes of a run's stored predictions."""
    rows = [r for r in db.rows("predictions", evaluation_id) if r["run"] == run_id]
    return (np.array([int(r["image"]) for r in rows], np.int64), np.array([r["label"] for r in rows], np.int64),
            np.array([r["top1"] for r in rows], np.int64))


def _score_fields(d: dict[str, Any]) -> dict[str, Any]:
    return {"split": d["split"], "held_out": d["held_out"], "heldout_accuracy": d["heldout_accuracy"],
            "seen_accuracy": d["seen_accuracy"], "gap": d["gap"], "n_heldout": d["n_heldout"], "n_seen": d["n_seen"],
            "per_group": d["per_group"]}


def _pct(v: Any) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def _table(console: Any, title: str, recs: list[dict[str, Any]]) -> None:
    t = Table(title=f"{title} (accuracy, %)", title_justify="left", header_style="bold")
    for col in ("Split", "Model", "Held out", "Seen", "Gap", "N held out", "N seen"):
        t.add_column(col, justify="left" if col in ("Split", "Model") else "right")
    for r in recs:
        t.add_row(r["split"], r["model"], _pct(r["heldout_accuracy"]), _pct(r["seen_accuracy"]), _pct(r["gap"]),
                  str(r["n_heldout"]), str(r["n_seen"]))
    console.print(t)


def _report(title: str, records: list[dict[str, Any]], mean: dict[str, float | None] | None) -> Report:
    doc = {"splits": records, "mean": mean}

    def table(console: Any) -> None:
        _table(console, title, records)
        if mean:
            console.print(f"• Mean over {len(records)} splits: held out {_pct(mean['heldout_accuracy'])} %, seen "
                          f"{_pct(mean['seen_accuracy'])} %, gap {_pct(mean['gap'])} points.", highlight=False)

    flat = [{k: v for k, v in r.items() if k not in ("per_group", "held_out")} | {"held_out": ";".join(r["held_out"])} for r in records]
    return Report(lambda: json.dumps(doc, indent=1, default=str) + "\n", lambda: records_to_csv(flat), table)
