"""ICONS-50 style hold-out (Hendrycks & Dietterich, Section 4.2): train without one icon style, test on it.

Conditions: per split, the held-out style's images and a held-out share of the seen styles
(10 % of each class, seeded). Data (``--data``): ``Icons-50.npy``, the ICONS-50 folder release,
or the emoji-styles folder / ``.npz``. Records: each item's label and top-5 classes. Metrics:
accuracy on each part and the gap (seen - held out), per split and averaged with ``--holdout all``
(leave-one-style-out).

The model: ``--model`` a checkpoint written by
``shiftbench.training.recipes.train_classifier`` on the split's training part; without one
(``--model`` left at its default, or ``train``), the split's recipe (``--recipe``, default
``icons50-wrn-16-4``, the paper's WRN-16-4 for 50 epochs) is trained into
``<store folder>/structural-models/`` first: seeded (``--seed``) and resumed after an
interruption from its last finished epoch.

:class:`HoldoutBenchmark` is the shared part of the structural hold-out benchmarks.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from rich.table import Table

from ..errors import InvalidArgumentError
from ..distributed.predictions import RAY_OPTIONS, ray_predictions
from ..evaluation.data import Condition, Item, Source, WorkBatch
from ..evaluation.models import DEFAULT_MODEL, Classifier, InputTransform, resolve_label_space
from ..evaluation.protocol import Benchmark, Progress, Report, Section
from ..evaluation.runner import RunStoreSink, Work, package_versions, run_conditions
from ..evaluation.store import ResultsStore, records_to_csv
from ..structural import LabelledImages, Split, read_emoji_styles, read_icons50
from ..structural.evaluate import ItemPredictions, score
from ..structural.splits import leave_one_style_out, style_holdout
from ..training.recipes import TrainedModel, get_recipe, load_trained, train_classifier
from . import register_benchmark

__all__ = ["HoldoutBenchmark", "Icons50Style", "holdout_figures", "read_icons_data", "parse_recipe", "spread"]


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


class PartSource(Source):
    """One part of a split (its held-out or seen test images) as a source of the shared evaluation loop.

    One condition, ``(<part>:<split>, 0)``; items are keyed by the image's index in the split's
    source (the store's item ids); the images are resized to the model's input side here (Pillow
    bilinear), so a Ray worker that gets this source only batches and predicts them.
    """

    kind = "structural-part"
    on_the_fly = False
    edition = ""

    def __init__(self, condition: Condition, data: LabelledImages, index: Sequence[int], size: int) -> None:
        sub = data.subset(np.asarray(index, np.int64)).resized(size)
        self.condition = condition
        self.keys = [str(int(i)) for i in index]
        self.images, self.labels = sub.images, sub.labels
        self.classes = data.classes
        self.identity = self.location = f"{data.name}|{condition[0]}"

    def conditions(self) -> list[Condition]:
        return [self.condition]

    def items(self, condition: Condition) -> list[Item]:
        return [Item(k, int(lab)) for k, lab in zip(self.keys, self.labels, strict=True)] if condition == self.condition else []

    def select_classes(self, classes: Sequence[str]) -> None:
        raise InvalidArgumentError("classes", list(classes), "the split model's own classes (hold-outs keep all of them)")

    def batches(self, pending: Mapping[Condition, set[str]], *, batch_size: int, seed: int, release: bool,
                stop: threading.Event | None = None) -> Iterator[WorkBatch]:
        want = pending.get(self.condition) or set()
        rows = [i for i, k in enumerate(self.keys) if k in want]
        for a in range(0, len(rows), batch_size):
            if stop is not None and stop.is_set():
                return
            sel = rows[a : a + batch_size]
            x = torch.from_numpy(np.ascontiguousarray(self.images[sel].transpose(0, 3, 1, 2)))
            yield WorkBatch(self.condition, [self.keys[i] for i in sel],
                            torch.from_numpy(self.labels[sel].astype(np.int64)), x)


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
    paper's published held-out accuracy for the same split beside them (``published``: split -> (%, line of 000))."""
    from ..report.figures import ReportFigure, bar_chart

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


class HoldoutBenchmark(Benchmark):
    """A structural hold-out: splits of a labelled dataset, one model per split, accuracy per part and the gap.

    ``published_heldout``: the held-out accuracy (%) paper 000 states per split name, with the line of
    its text (drawn beside the stored ones in the report).
    """

    default_recipe = "icons50-wrn-16-4"
    headline = ("heldout_accuracy", "seen_accuracy", "gap")
    published_heldout: Mapping[str, tuple[float, int]] = {}
    options = ("holdout", "seed", "recipe", *RAY_OPTIONS)
    items = ("items", "items")
    records = "per item: label and top-5 classes"

    def read(self, settings: dict[str, Any]) -> LabelledImages:
        return read_icons_data(settings.get("data"))

    def splits(self, data: LabelledImages, settings: dict[str, Any]) -> list[Split]:
        raise NotImplementedError

    def model_for(self, split: Split, settings: dict[str, Any], store: Path) -> TrainedModel:
        """The ``--model`` checkpoint, or the split's recipe trained (resumably) under the store's folder."""
        model = settings.get("model")
        limit = settings.get("limit")
        if model not in (None, "", DEFAULT_MODEL, "train"):
            p = Path(str(model)).expanduser()
            if not p.is_file():
                raise InvalidArgumentError(
                    "model", model, "a checkpoint written by shiftbench.training.recipes.train_classifier for this split, "
                    "or 'train' (train the split's recipe first)")
            trained = load_trained(p, settings.get("device") or "cpu")
            if tuple(trained.classes) != tuple(split.classes):
                raise InvalidArgumentError("model", model, f"a model of the split's {len(split.classes)} classes",
                                           f"It has {len(trained.classes)}.")
            return trained
        spec = parse_recipe(settings.get("recipe"), self.default_recipe)
        train = split.train_source.subset(spread(split.train_idx, limit))
        tag = hashlib.sha256(json.dumps([split.held_out, split.info], sort_keys=True, default=str).encode()).hexdigest()[:8]
        folder = store.parent / "structural-models" / self.name / f"{split.name.replace(':', '-').replace('/', '_')}-{tag}"
        return train_classifier(train, spec, folder, seed=int(settings.get("seed") or 0),
                                device=settings.get("device") or "cpu",
                                run_name=f"{spec.name}-seed{int(settings.get('seed') or 0)}-n{len(train)}")

    def evaluate(self, settings: dict[str, Any], progress: Progress | None) -> Report:
        """Per split: its model (trained here, on ``--device``, unless given), then its two parts through the
        shared evaluation loop (with ``--ray`` the trained model is sent to the Ray workers), then the scores
        from the stored predictions."""
        store = Path(settings["store"])
        limit, bs = settings.get("limit"), int(settings.get("batch_size") or 256)
        # the workers get each split's trained model from here (never --model by name); a cluster that does not
        # answer fails before any training
        with ray_predictions({**settings, "model": None}) as executor:
            data = self.read(settings)
            splits = self.splits(data, settings)
            records = []
            with ResultsStore(store) as db:
                for split in splits:
                    records.append(self._evaluate_split(db, data, split, settings, store, limit, bs, progress, executor))
        return _report(self.title, records)

    def _evaluate_split(self, db: ResultsStore, data: LabelledImages, split: Split, settings: dict[str, Any],
                        store: Path, limit: int | None, bs: int, progress: Progress | None, executor: Any) -> dict[str, Any]:
        model = self.model_for(split, settings, store)
        name, checksum = f"{model.spec.arch} {model.checkpoint.stem}", _sha256(model.checkpoint)
        mid = db.register_model(name, f"structural:{model.checkpoint.resolve()}", checksum,
                                {"spec": model.spec.to_dict(), "split": split.to_dict()})
        sid = db.register_source(data.name.split()[0], f"{data.name}|{split.name}|{json.dumps([split.held_out, split.info], sort_keys=True, default=str)}",
                                 str(settings.get("data")), split.classes, {})
        lid = db.register_label_space(hashlib.sha256("\n".join(split.classes).encode()).hexdigest(), "model", split.classes)
        eid = db.register_evaluation(mid, sid, self.name, str(model.image_size), int(settings.get("seed") or 0), False, lid)
        parts = (("held_out", split.test_source, spread(split.heldout_idx, limit)),
                 ("seen_test", split.seen_source or split.train_source, spread(split.seen_test_idx, limit)))
        run_ids: dict[Condition, int] = {}
        work: list[Work] = []
        for part, source, idx in parts:
            cond = (f"{part}:{split.name}", 0)
            if settings.get("rerun"):
                db.delete_runs([r.id for r in db.runs(eid) if r.corruption == cond[0]])
            rid = run_ids[cond] = db.register_run(eid, sid, cond[0], 0, len(idx), package_versions())
            done = db.done_keys(rid)
            todo = [int(i) for i in idx if str(int(i)) not in done]
            if todo:
                work.append(Work(PartSource(cond, source, todo, model.image_size), np.arange(len(split.classes)),
                                 {cond: {str(i) for i in todo}}))
            else:
                db.finish_run(rid)
        if work:
            clf = classifier(model, name, checksum)
            if executor is None:
                clf.to(settings.get("device") or "cpu")
            space = resolve_label_space(clf.classes, split.classes, "model")
            db.mark_running([run_ids[c] for w in work for c in w.pending])
            # one transaction per batch: resumable
            run_conditions(clf, space, work, RunStoreSink(db, run_ids), batch_size=bs, seed=0, progress=progress,
                           executor=executor)
        preds: dict[str, ItemPredictions] = {}
        for (part, source, _), (cond, rid) in zip(parts, run_ids.items(), strict=True):
            keys, labels, top1 = db_predictions(db, eid, rid)
            order = np.argsort(keys)
            k = keys[order]
            group = (source.styles if split.kind == "style" and source.styles is not None else source.subtypes)[k]
            preds[part] = ItemPredictions(part, k, labels[order], top1[order], group)
        sub_split = Split(split.name, split.kind, split.held_out, split.train_source, split.test_source,
                          split.train_idx, preds["seen_test"].index, preds["held_out"].index, split.info, split.seen_source)
        sc = score(sub_split, preds["held_out"], preds["seen_test"])
        return {"benchmark": self.name, "evaluation": eid, "model": name, "checkpoint": str(model.checkpoint),
                "data": data.name, **_score_fields(sc.to_dict())}

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


def _report(title: str, records: list[dict[str, Any]]) -> Report:
    mean = None
    if len(records) > 1:
        mean = {k: float(np.mean([r[k] for r in records])) for k in ("heldout_accuracy", "seen_accuracy", "gap")}
    doc = {"splits": records, "mean": mean}

    def table(console: Any) -> None:
        _table(console, title, records)
        if mean:
            console.print(f"• Mean over {len(records)} splits: held out {_pct(mean['heldout_accuracy'])} %, seen "
                          f"{_pct(mean['seen_accuracy'])} %, gap {_pct(mean['gap'])} points.", highlight=False)

    flat = [{k: v for k, v in r.items() if k not in ("per_group", "held_out")} | {"held_out": ";".join(r["held_out"])} for r in records]
    return Report(lambda: json.dumps(doc, indent=1, default=str) + "\n", lambda: records_to_csv(flat), table)


@register_benchmark
class Icons50Style(HoldoutBenchmark):
    name = "icons-50-style"
    title = "ICONS-50 style hold-out (Hendrycks & Dietterich, Section 4.2)"
    measures = "Accuracy on a held-out icon style against a held-out share of the seen styles, and the gap."
    conditions = "per split: the held-out style, and 10 % of each class of the seen styles (seeded)"
    sources = ("Icons-50.npy or the ICONS-50 folder release (--data)", "the emoji-styles folder or .npz (--data)")
    published_heldout = {"style:microsoft": (57.0, 141), "style:apple": (93.0, 141)}  # Hendrycks & Dietterich (2018) Section 4.2

    def splits(self, data: LabelledImages, settings: dict[str, Any]) -> list[Split]:
        h = settings.get("holdout")
        seed = int(settings.get("seed") or 0)
        if h is not None and str(h).strip().lower() == "all":
            return leave_one_style_out(data, seed=seed)
        return [style_holdout(data, None if h in (None, "") else str(h).strip(), seed=seed)]
