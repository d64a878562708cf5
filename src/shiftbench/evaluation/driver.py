"""The evaluation driver: the one lifecycle every benchmark runs through.

A benchmark declares (:mod:`shiftbench.evaluation.protocol`); this module runs it:

1. asks the benchmark for its :class:`~shiftbench.evaluation.protocol.Plan` (or one per
   evaluation, e.g. per held-out split), loading the model when the plan asks for it;
2. resolves the label space (the model's classes, the data's, or a list) and maps every
   source's labels into it, refusing data whose classes fall outside it;
3. registers the model, the sources, the label space, the evaluation and one run per
   condition in the results store; ``rerun`` deletes the requested runs first. The model is
   stored with its weights' checksum and each source with the digest of its content
   (:meth:`~shiftbench.evaluation.data.Source.content_digest`), so other weights or changed data
   make a new evaluation instead of resuming (or skipping) one of the old;
4. resumes: items already recorded are not predicted again, runs whose items are all
   recorded are marked complete, the others running;
5. runs the shared loop (:func:`~shiftbench.evaluation.runner.run_conditions`, here or
   through an executor such as a Ray cluster's) with the benchmark's record writer; a run is
   marked complete as soon as its last item is recorded, failed when an error stops the loop;
6. asks the benchmark for its typed summary, recomputed from the store.

This is the only module that registers anything in the store or changes a run's status.
With ``store=None`` the evaluation goes to a temporary store that is deleted afterwards.
:func:`run_plan` runs one plan that no registered benchmark made (the library's in-memory
evaluations) through the same steps 2 to 5.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from ..errors import InvalidArgumentError
from .models import DEFAULT_MODEL, Classifier, LabelSpace, load_model, resolve_label_space
from .protocol import Benchmark, Plan, Planned, Progress, Settings, Summary
from .runner import Executor, Work, package_versions, run_conditions, want_prefetch
from .store import DEFAULT_STORE, ResultsStore

__all__ = ["Evaluated", "Outcome", "TopK", "WriterContext", "run", "run_plan"]

R = TypeVar("R")


@dataclass
class WriterContext:
    """What a record writer gets: the open store, the runs and the items of each condition.

    Attributes:
        db: the open results store (write with ``write_batch`` / ``write_sequences``).
        run_ids: condition -> run id.
        items: condition -> its items (key, label as indices into the source's classes).
        label_maps: condition -> the map of its source's labels into the label space.
        pending: condition -> item keys still to record.
        frames: condition -> frames per item.
        classifier: the model (for messages).
        space: the label space.
    """

    db: ResultsStore
    run_ids: Mapping[Any, int]
    items: Mapping[Any, list[Any]]
    label_maps: Mapping[Any, np.ndarray]
    pending: Mapping[Any, set[str]]
    frames: Mapping[Any, int]
    classifier: Classifier
    space: LabelSpace


class TopK:
    """The default record writer: each image's label and top-5 classes (``write_batch``)."""

    def __init__(self, ctx: WriterContext) -> None:
        self.db, self.run_ids = ctx.db, ctx.run_ids

    def write(self, condition: Any, batch: Any, labels: np.ndarray, logits: torch.Tensor | None) -> list[str]:
        rid = self.run_ids[condition]
        skipped = [k for k, _ in batch.skipped]
        if logits is None:
            self.db.write_batch(rid, [], [], [], batch.skipped)
            return skipped
        top = torch.topk(logits, k=min(5, logits.shape[1]), dim=1).indices.numpy()
        self.db.write_batch(rid, batch.keys, labels.tolist(), top.tolist(), batch.skipped)
        return [*batch.keys, *skipped]


class _StoreSink:
    """The loop's sink: the benchmark's writer records, the driver keeps the runs' status."""

    def __init__(self, db: ResultsStore, run_ids: Mapping[Any, int], writer: Any, pending: Mapping[Any, set[str]]):
        self.db, self.run_ids, self.writer = db, run_ids, writer
        self.left = {c: set(keys) for c, keys in pending.items()}

    def write(self, condition: Any, batch: Any, labels: np.ndarray, logits: torch.Tensor | None) -> int:
        keys = self.writer.write(condition, batch, labels, logits)
        left = self.left.get(condition)
        if left is not None and keys:
            left.difference_update(keys)
            if not left:  # complete as soon as its last item is recorded: a later error leaves it complete
                self.db.finish_run(self.run_ids[condition])
        skipped = {k for k, _ in batch.skipped}
        return sum(1 for k in keys if k not in skipped)

    def finish(self, conditions: Sequence[Any]) -> None:
        for c in conditions:
            self.db.finish_run(self.run_ids[c])

    def fail(self, conditions: Sequence[Any], reason: str) -> None:
        self.db.fail_runs([self.run_ids[c] for c in conditions], reason)


@dataclass
class Evaluated:
    """One evaluation the driver ran, handed to the benchmark's ``score``.

    Attributes:
        id: the evaluation's id in the store.
        plan: the benchmark's plan.
        settings: the benchmark's settings.
        classifier: the model.
        space: the label space.
        run_ids: condition -> run id (the requested conditions only).
        written: predictions recorded by this call (0: everything came from the store).
        store: the store file (None: a temporary store, gone after the call).
    """

    id: int
    plan: Plan
    settings: Settings
    classifier: Classifier
    space: LabelSpace
    run_ids: dict[Any, int]
    written: int
    store: Path | None


@dataclass
class Outcome:
    """What :func:`run` returns: the benchmark's summary and the evaluations behind it."""

    summary: Summary
    evaluations: list[Evaluated] = field(default_factory=list)

    @property
    def written(self) -> int:
        return sum(e.written for e in self.evaluations)


class _Context:
    """The :class:`~shiftbench.evaluation.protocol.PlanContext` the driver hands to ``plan``."""

    def __init__(self, model: Any, weights: str | None, device: str | None, store: Path | None, rerun: bool,
                 remote: bool = False) -> None:
        self.model_spec, self.weights, self.device, self.store, self.rerun = model, weights, device, store, rerun
        self.remote = remote
        self._clf: Classifier | None = None

    def classifier(self) -> Classifier:
        if self._clf is None:
            self._clf = load_model(self.model_spec, weights=self.weights, device=self.device)
        return self._clf


@contextmanager
def _open_store(store: str | Path | ResultsStore | None) -> Iterator[tuple[ResultsStore, Path | None]]:
    if isinstance(store, ResultsStore):
        yield store, store.path
        return
    if store is None:
        with tempfile.TemporaryDirectory(prefix="shiftbench-") as tmp:
            with ResultsStore(Path(tmp) / "results.sqlite") as db:
                yield db, None
        return
    with ResultsStore(store) as db:
        yield db, db.path


def run(
    bench: Benchmark[Any],
    settings: Settings,
    *,
    model: Any = DEFAULT_MODEL,
    weights: str | None = None,
    device: str | None = None,
    store: str | Path | ResultsStore | None = DEFAULT_STORE,
    batch_size: int = 8,
    rerun: bool = False,
    progress: Progress | None = None,
    executor: Executor | None = None,
    prefetch: bool | None = None,
) -> Outcome:
    """Evaluate ``model`` on a benchmark: plan, register, resume, loop, store, score.

    Args:
        bench: the benchmark.
        settings: its :attr:`~shiftbench.evaluation.protocol.Benchmark.Settings`.
        model: a name (see :func:`~shiftbench.evaluation.models.load_model`), an ``nn.Module``, a
            callable returning logits or a :class:`~shiftbench.evaluation.models.Classifier`.
        weights: a local checkpoint for a named model.
        device: where the model runs ("cpu", "cuda", ...).
        store: the results store (a path or an open store); None: a temporary one.
        batch_size: items (frames) per forward pass.
        rerun: delete the stored runs of the requested conditions first.
        progress: receives the progress.
        executor: runs the model elsewhere (e.g. on a Ray cluster); the stored rows are the same.
        prefetch: decode and corrupt the next batches in a thread while the model runs (None: the plan's
            choice, else only where that thread gets a core of its own; perf/eval_overhead.py measures it).

    Raises:
        ShiftbenchError: bad settings, data or model output (no run is complete unless all its items are recorded).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise InvalidArgumentError("batch_size", batch_size, "an integer >= 1")
    if not isinstance(rerun, bool):
        raise InvalidArgumentError("rerun", rerun, "True or False")
    if not isinstance(settings, bench.Settings):
        raise InvalidArgumentError("settings", type(settings).__name__, f"{bench.Settings.__name__} of {bench.name}")
    path = None if store is None or isinstance(store, ResultsStore) else Path(store)
    ctx = _Context(model, weights, device, path, rerun, executor is not None)
    plans = bench.plan(settings, ctx)
    plans = plans if isinstance(plans, list) else [plans]
    done: list[Evaluated] = []
    summaries = []
    for plan in plans:
        with _open_store(store if plan.keep else None) as (db, where):
            done.append(_evaluate(bench.name, settings, plan, ctx, db, where, int(batch_size), rerun, progress, executor,
                                  prefetch))
            summaries.append(bench.score(db, done[-1]))
    summary = summaries[0] if len(summaries) == 1 else bench.combine(summaries)  # type: ignore[attr-defined]
    return Outcome(summary, done)


def run_plan(
    plan: Plan,
    score: Callable[[ResultsStore, Evaluated], R],
    *,
    name: str,
    device: str | None = None,
    batch_size: int = 8,
    progress: Progress | None = None,
    store: str | Path | ResultsStore | None = None,
) -> R:
    """Run one plan that no registered benchmark made, and score it: the library's in-memory evaluations
    (ImageNet-P's :func:`~shiftbench.perturbations.evaluate_sequences`, the structural hold-outs' ``predict``) go
    through the same lifecycle and loop as every benchmark, by default in a temporary store.

    Args:
        plan: the plan; its ``model`` is the classifier (it must be set).
        score: reads the result back (from the store, or from what the plan's writer kept).
        name: the evaluation's benchmark name in the store.
        device, batch_size, progress, store: as in :func:`run`.
    """
    if plan.model is None:
        raise InvalidArgumentError("plan.model", None, "the classifier the plan runs")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise InvalidArgumentError("batch_size", batch_size, "an integer >= 1")
    ctx = _Context(plan.model, None, device, None, False)
    with _open_store(store) as (db, where):
        done = _evaluate(name, Settings(), plan, ctx, db, where, int(batch_size), False, progress, None, plan.prefetch)
        return score(db, done)


def _label_space(plan: Plan, clf: Classifier) -> tuple[LabelSpace, dict[int, np.ndarray]]:
    """The label space of a plan, and each source's labels mapped into it (by ``id(source)``)."""
    first = [plan.source] if plan.source is not None else []
    sources = list({id(s): s for s in (*first, *(p.source for p in plan.conditions))}.values())
    if plan.space is not None:
        space = plan.space
    else:
        model_classes = plan.model_classes if plan.model_classes is not None else clf.classes
        data_classes = plan.data_classes if plan.data_classes is not None else sources[0].classes
        space = resolve_label_space(model_classes, data_classes, plan.classes, default=plan.default_space)
        if space.mode == "list":
            for src in sources:
                src.select_classes(space.classes)
    if plan.label_map is not None:
        return space, {id(s): plan.label_map for s in sources}
    inside = set(space.classes)
    for src in sources if plan.check_absent else ():
        absent = [c for c in src.classes if c not in inside]
        if absent and space.mode != "list":
            raise InvalidArgumentError("data", src.location, f"classes among the label space ({len(space.classes)} "
                                       "classes)", f"Not in it: {', '.join(absent[:5])}.")
    index = {c: i for i, c in enumerate(space.classes)}
    return space, {id(s): np.array([index.get(c, -1) for c in s.classes], dtype=np.int64) for s in sources}


def _register(name: str, plan: Plan, clf: Classifier, space: LabelSpace, db: ResultsStore) -> tuple[int, dict[int, int]]:
    """Register the model, the sources, the label space and the evaluation; (evaluation id, source ids)."""
    mid = db.register_model(*(plan.model_record or (clf.name, clf.identity, clf.checksum, clf.details)))
    sids: dict[int, int] = {}
    first = plan.source if plan.source is not None else plan.conditions[0].source
    for src in (first, *(p.source for p in plan.conditions)):
        if id(src) not in sids:
            made = plan.source_record() if callable(plan.source_record) else plan.source_record
            kind, identity, location, classes = made if not sids and made else (
                src.kind, src.identity, src.location, src.classes)
            # by content: data changed since (images added or rewritten) are another source, so another evaluation
            digest = src.content_digest() if hasattr(src, "content_digest") else "unknown"
            sids[id(src)] = db.register_source(kind, f"{identity}|data={digest}", location, classes,
                                               {"content": digest})
    lid = db.register_label_space(space.digest, space.mode, space.classes)
    eid = db.register_evaluation(mid, sids[id(first)], name, plan.edition, plan.stored_seed, plan.release, lid, plan.options)
    return eid, sids


def _evaluate(
    name: str, settings: Settings, plan: Plan, ctx: _Context, db: ResultsStore, where: Path | None,
    batch_size: int, rerun: bool, progress: Progress | None, executor: Executor | None, prefetch: bool | None,
) -> Evaluated:
    """One plan: register, resume, loop."""
    clf = plan.model if plan.model is not None else ctx.classifier()
    if plan.model is not None and executor is None:
        clf.to(ctx.device or "cpu")
    space, maps = _label_space(plan, clf)
    eid, sids = _register(name, plan, clf, space, db)
    if rerun:
        wanted = {(p.name, p.level) for p in plan.conditions}
        db.delete_runs([r.id for r in db.runs(eid) if (r.condition, r.level) in wanted])
    versions = package_versions(plan.versions)
    run_ids: dict[Any, int] = {}
    items: dict[Any, list[Any]] = {}
    pending: dict[Any, set[str]] = {}
    for p in plan.conditions:
        items[p.condition] = its = p.source.items(p.condition)
        rid = run_ids[p.condition] = db.register_run(eid, sids[id(p.source)], p.name, p.level, len(its), versions,
                                                     frames=p.frames)
        todo = {it.key for it in its} - db.done_keys(rid)
        if todo:
            pending[p.condition] = todo
        else:
            db.finish_run(rid)
    db.mark_running([run_ids[c] for c in pending])
    frames = {p.condition: p.frames for p in plan.conditions}
    lmaps = {p.condition: maps[id(p.source)] for p in plan.conditions}
    wctx = WriterContext(db, run_ids, items, lmaps, pending, frames, clf, space)
    writer = (plan.writer or TopK)(wctx)
    by_source: dict[int, Work] = {}
    for p in plan.conditions:
        if p.condition in pending:
            w = by_source.setdefault(id(p.source), Work(p.source, maps[id(p.source)], {}))
            w.pending[p.condition] = pending[p.condition]
            if p.frames > 1:
                w.frames[p.condition] = p.frames
    if prefetch is None:
        prefetch = plan.prefetch if plan.prefetch is not None else want_prefetch(clf.device)
    written = run_conditions(
        clf, space, list(by_source.values()), _StoreSink(db, run_ids, writer, pending), batch_size=batch_size,
        seed=plan.seed, release=plan.release, progress=progress, prefetch=prefetch, describe=plan.describe,
        executor=executor,
    )
    return Evaluated(eid, plan, settings, clf, space, run_ids, written, where)


def planned(conditions: Sequence[tuple[Any, Any, str, int]], frames: Mapping[Any, int] | None = None) -> list[Planned]:
    """:class:`Planned` conditions from ``(condition, source, name, level)`` tuples."""
    return [Planned(c, s, n, lvl, (frames or {}).get(c, 1)) for c, s, n, lvl in conditions]
