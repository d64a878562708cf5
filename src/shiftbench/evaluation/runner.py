"""Run an evaluation: model x data x conditions -> results store -> metrics.

:func:`evaluate` registers the model, the data and one run per condition in the
results store, skips every image already stored (so an interrupted evaluation
resumes where it stopped), writes each batch of top-5 predictions in one
transaction, marks a run complete only when all its images are accounted for,
and computes the metrics from the stored predictions, never from in-memory
state.
"""

from __future__ import annotations

import os
import platform
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import torch

from ..version import __version__
from ..corruptions import list_corruptions
from ..checks import check_severity, suggest
from ..editions import get_edition
from ..errors import (
    InvalidArgumentError,
    InvalidSeverityError,
    ShiftbenchError,
    UnknownNameError,
)
from .baselines import alexnet_baseline, load_baseline_file
from .data import (
    CLEAN,
    Condition,
    ImageFolderSource,
    Source,
    WorkBatch,
    foolbox_imagenet,
    open_released,
)
from .errors import ModelOutputError
from .metrics import ALL_CORRUPTIONS, Baseline, Summary, summarize
from .models import (
    DEFAULT_MODEL,
    Classifier,
    LabelSpace,
    check_logits,
    load_model,
    resolve_label_space,
)
from .store import CLEAN_NAME, DEFAULT_STORE, ResultsStore, RunInfo

__all__ = [
    "Benchmark",
    "BENCHMARKS",
    "EvaluationResult",
    "Progress",
    "evaluate",
    "parse_severities",
    "resolve_corruptions",
    "resolve_baseline",
    "package_versions",
    "run_conditions",
    "ResultSink",
    "RunStoreSink",
    "Work",
    "Scored",
    "Executor",
    "want_prefetch",
]


@dataclass(frozen=True)
class Benchmark:
    """A corruption benchmark the runner knows.

    Attributes:
        name: CLI name.
        corruptions: all corruptions of the benchmark, in the papers' order.
        default_edition: edition of on-the-fly evaluations unless ``edition`` is given.
        title: for reports.
    """

    name: str
    corruptions: tuple[str, ...]
    default_edition: str
    title: str


BENCHMARKS: dict[str, Benchmark] = {
    "imagenet-c": Benchmark("imagenet-c", ALL_CORRUPTIONS, "224", "ImageNet-C (Hendrycks & Dietterich, ICLR 2019)"),
}


class Progress(Protocol):
    """Receives progress of an evaluation (the CLI shows it with rich)."""

    def start(self, total: int, description: str) -> None:
        """Called once with the number of images to predict."""

    def advance(self, n: int, description: str) -> None:
        """Called after each stored batch."""

    def stop(self) -> None:
        """Called at the end (also after an error or Ctrl-C)."""


@dataclass
class EvaluationResult:
    """What :func:`evaluate` did and the scores recomputed from the store.

    Attributes:
        evaluation_id: the evaluation's id in the store.
        store_path: the store file.
        summary: the Table-1 scores.
        model: the model's name; ``model_checksum`` its weights' checksum.
        data: a description of the (corrupted) data.
        clean_data: a description of the clean data, None if not evaluated.
        settings: benchmark, edition, seed, release mode, corruptions, severities, label space, baseline.
        runs: the runs of the requested conditions, with counts.
        new_predictions: predictions written by this call (0: all reused from the store).
        unavailable: benchmark corruptions this build cannot compute on the fly.
        notes: sentences a report must print besides ``summary.notes``.
    """

    evaluation_id: int
    store_path: Path
    summary: Summary
    model: str
    model_checksum: str
    data: str
    clean_data: str | None
    settings: dict[str, Any]
    runs: list[RunInfo]
    new_predictions: int
    unavailable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def n_images(self) -> int:
        """Largest number of images evaluated in one run."""
        return max((r.n_predicted for r in self.runs), default=0)

    @property
    def n_skipped(self) -> int:
        """Unreadable images skipped, summed over the runs."""
        return sum(r.n_skipped for r in self.runs)


def package_versions(extra: Sequence[str] = ()) -> dict[str, str]:
    """Versions of Python and of the packages that can change results."""
    out = {"python": platform.python_version(), "shiftbench": __version__, "torch": torch.__version__}
    for pkg in ("numpy", "pillow", "scipy", "opencv-python-headless", "efficientnet-lite-pytorch", *extra):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


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
    spec: str | Sequence[str] | None, benchmark: Benchmark, *, on_the_fly: bool
) -> tuple[list[str], list[str]]:
    """The corruptions to evaluate, and the benchmark's ones this build cannot compute.

    Args:
        spec: None (all of the benchmark), a comma-separated string or a list of
            names, wildcards (``"*blur"``) or groups (``"benchmark"``, ``"extra"``,
            ``"noise"``...).
        benchmark: the benchmark.
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
    import fnmatch

    from .metrics import FAMILIES, group_of

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


def resolve_baseline(
    spec: str | Baseline | None, *, store: ResultsStore | None, edition: str, source_kind: str | None = None
) -> tuple[Baseline | None, str | None]:
    """The CE baseline for ``spec`` and, when there is none, the reason.

    ``spec``: ``"alexnet"`` (published numbers; edition 224 only), ``"none"``, a
    baseline ``.json`` file, a model name in the store, ``"eval:<id>"``, or a
    :class:`Baseline`.
    """
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "none"):
        return None, "no baseline requested"
    if isinstance(spec, Baseline):
        return spec, None
    s = spec.strip()
    if s.lower() == "alexnet":
        if edition != "224":
            return None, (
                f"no published AlexNet errors exist for edition {edition} (only for the 224 edition); pass "
                "--baseline with a model evaluated in the store on the same data to normalise CE"
            )
        return alexnet_baseline(), None
    if s.lower().endswith(".json"):
        b = load_baseline_file(s)
        return b, None
    if store is None:
        raise InvalidArgumentError("baseline", spec, "'alexnet', 'none' or a baseline .json file (no store given)")
    b = store.baseline(s, edition=edition, source_kind=source_kind)
    if b.edition != edition:
        return None, f"baseline {b.name} was evaluated on edition {b.edition}, not {edition}"
    return b, None


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise InvalidArgumentError(name, value, f"an integer >= {low}")
    return int(value)


_DONE = object()
T = TypeVar("T")


def want_prefetch(device: str | torch.device) -> bool:
    """Whether a corruption thread beside the model helps: it needs a core the model does not use."""
    if torch.device(device).type != "cpu":
        return True
    return (os.cpu_count() or 1) > torch.get_num_threads()


def _prefetch(make: Callable[[], Iterator[T]], stop: threading.Event, depth: int = 2) -> Iterator[T]:
    """Run ``make()`` in a thread, ``depth`` batches ahead (decoding and corrupting overlap the model)."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for wb in make():
                if not put(wb):
                    return
            put(_DONE)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which re-raises it
            put(e)

    t = threading.Thread(target=work, name="shiftbench-prefetch", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while t.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(timeout=0.1)


def evaluate(
    model: str | torch.nn.Module | Classifier | Callable[[torch.Tensor], torch.Tensor] = DEFAULT_MODEL,
    *,
    data: str | Path | Source | None = None,
    released: str | Path | Source | None = None,
    benchmark: str = "imagenet-c",
    edition: str | None = None,
    corruptions: str | Sequence[str] | None = None,
    severities: str | int | Sequence[int] | None = None,
    seed: int = 0,
    release: bool = False,
    batch_size: int = 8,
    device: str | torch.device | None = None,
    store: str | Path | ResultsStore = DEFAULT_STORE,
    baseline: str | Baseline | None = "alexnet",
    classes: str | Sequence[str] = "auto",
    limit: int | None = None,
    bad_images: str = "skip",
    rerun: bool = False,
    clean: bool = True,
    progress: Progress | None = None,
    prefetch: bool | None = None,
    executor: Executor | None = None,
) -> EvaluationResult:
    """Evaluate a classifier on a corruption benchmark and store every prediction.

    With no arguments: EfficientNet-Lite0 on the 20 ImageNet images inside the
    foolbox wheel, every registered ImageNet-C corruption at severities 1..5,
    computed on the fly; a demonstration of the pipeline, not a benchmark.

    Args:
        model: a name (see :func:`~shiftbench.evaluation.models.load_model`), an
            ``nn.Module``, a callable returning logits, or a :class:`Classifier`.
        data: clean images (ImageFolder), corrupted on the fly; with ``released``
            they only provide the clean error.
        released: a released dataset (ImageNet-C style tree or CIFAR-10-C folder).
        benchmark: "imagenet-c".
        edition: "224" (default), "299", "64", "32"; for released data, detected
            from the images.
        corruptions: names, wildcards or groups; default: all of the benchmark
            (on the fly: all registered ones).
        severities: e.g. "1-5" (default), "1,3", 3.
        seed: seed of the on-the-fly corruptions (draws are keyed per image path).
        release: store-and-reload each corrupted image as JPEG q85, as the
            released datasets did (on-the-fly only).
        batch_size: images per forward pass.
        device: "cpu" (default), "cuda", "cuda:N", "mps".
        store: results store path or open :class:`ResultsStore`.
        baseline: "alexnet" (default), "none", a stored model name or
            "eval:<id>", a baseline .json file, or a :class:`Baseline`.
        classes: "auto", "model", "data", or class ids to restrict the logits to
            (see :func:`~shiftbench.evaluation.models.resolve_label_space`).
        limit: at most this many images per condition (spread evenly).
        bad_images: "skip" (count unreadable files) or "fail".
        rerun: delete the stored runs of the requested conditions first.
        clean: also evaluate the clean images (needed for relative mCE).
        progress: receives progress (the CLI's rich display).
        prefetch: decode and corrupt the next batches in a thread while the model
            runs. None (default): only where that thread gets a core of its own,
            i.e. the model runs on an accelerator or the CPU has cores beyond
            PyTorch's threads; on a small CPU the thread would slow the model
            down (perf/eval_overhead.py: +29 % on 2 cores, against +3.5 %
            for corrupting in line).
        executor: where the model runs (see :class:`Executor`, e.g.
            :class:`shiftbench.distributed.RayPredictions` for a Ray cluster); None:
            here. Either way this process alone writes the store, with the same rows.

    Raises:
        ShiftbenchError: bad arguments, data or model output (no run is marked
            complete unless all its images are stored).
        KeyboardInterrupt: on Ctrl-C; stored rows stay, the call can be repeated to resume.
    """
    if benchmark not in BENCHMARKS:
        raise UnknownNameError("benchmark", benchmark, list(BENCHMARKS), suggest(str(benchmark), list(BENCHMARKS)))
    bench = BENCHMARKS[benchmark]
    seed = _check_int("seed", seed, 0)
    batch_size = _check_int("batch_size", batch_size, 1)
    sev = parse_severities(severities)
    if not isinstance(release, bool):
        raise InvalidArgumentError("release", release, "True or False")
    if released is not None and release:
        raise InvalidArgumentError("release", release, "False with --released (released images are JPEGs already)")
    ed = get_edition(edition).name if edition is not None else None

    clf = load_model(model, device=device)

    # Data sources.
    clean_source: Source | None
    corrupted: Source
    unavailable: list[str]
    if released is not None:
        names, unavailable = resolve_corruptions(corruptions, bench, on_the_fly=False)
        corrupted = (
            released
            if isinstance(released, Source)
            else open_released(released, names, sev, edition=ed, limit=limit, bad_images=bad_images)
        )
        ed = corrupted.edition
        if data is None:
            clean_source = None
        elif isinstance(data, Source):
            clean_source = data
        else:
            clean_source = ImageFolderSource(data, edition=ed, limit=limit, bad_images=bad_images)
        unavailable = []
    else:
        ed = ed or bench.default_edition
        names, unavailable = resolve_corruptions(corruptions, bench, on_the_fly=True)
        if data is None:
            corrupted = foolbox_imagenet(edition=ed, limit=limit, bad_images=bad_images)
        elif isinstance(data, Source):
            corrupted = data
        else:
            corrupted = ImageFolderSource(data, edition=ed, limit=limit, bad_images=bad_images)
        clean_source = corrupted
    if not clean:
        clean_source = None

    # Label space: restrict logits to a class subset where asked (or where the benchmark is a subset).
    default_mode = (
        "data" if ed == "64" and clf.classes is not None and len(corrupted.classes) < len(clf.classes) else "model"
    )
    space = resolve_label_space(clf.classes, corrupted.classes, classes, default=default_mode)
    if space.mode == "list":
        corrupted.select_classes(space.classes)
        if clean_source is not None and clean_source is not corrupted:
            clean_source.select_classes(space.classes)
    for src in {id(s): s for s in (corrupted, clean_source) if s is not None}.values():
        absent = [c for c in src.classes if c not in set(space.classes)]
        if absent and space.mode != "list":
            raise InvalidArgumentError(
                "data",
                src.location,
                f"classes among the label space ({len(space.classes)} classes)",
                f"Not in it: {', '.join(absent[:5])}.",
            )
    label_maps = {
        id(src): np.array([space.classes.index(c) if c in space.classes else -1 for c in src.classes], dtype=np.int64)
        for src in (corrupted, clean_source)
        if src is not None
    }

    own_store = not isinstance(store, ResultsStore)
    db = ResultsStore(store) if not isinstance(store, ResultsStore) else store
    try:
        versions = package_versions()
        model_id = db.register_model(clf.name, clf.identity, clf.checksum, clf.details)
        src_id = db.register_source(corrupted.kind, corrupted.identity, corrupted.location, corrupted.classes, {})
        clean_id = 0
        if clean_source is not None:
            clean_id = db.register_source(
                clean_source.kind, clean_source.identity, clean_source.location, clean_source.classes, {}
            )
        ls_id = db.register_label_space(space.digest, space.mode, space.classes)
        stored_seed = seed if corrupted.on_the_fly else -1
        eval_id = db.register_evaluation(model_id, src_id, bench.name, ed, stored_seed, release, ls_id)

        conditions: list[tuple[Condition, Source]] = []
        if clean_source is not None:
            conditions.append((CLEAN, clean_source))
        conditions += [((c, s), corrupted) for c in names for s in sev]
        if rerun:
            wanted = {(CLEAN_NAME if c == CLEAN else c[0], c[1]) for c, _ in conditions}
            db.delete_runs([r.id for r in db.runs(eval_id) if (r.corruption, r.severity) in wanted])
        run_ids: dict[Condition, int] = {}
        pending: dict[Condition, set[str]] = {}
        for cond, src in conditions:
            items = src.items(cond)
            stored_src = src_id if src is corrupted else clean_id
            name = CLEAN_NAME if cond == CLEAN else cond[0]
            rid = db.register_run(eval_id, stored_src, name, cond[1], len(items), versions)
            run_ids[cond] = rid
            todo = {it.key for it in items} - db.done_keys(rid)
            if todo:
                pending[cond] = todo
        finished = [rid for cond, rid in run_ids.items() if cond not in pending]
        for rid in finished:
            db.finish_run(rid)
        db.mark_running([run_ids[c] for c in pending])

        if prefetch is None:
            prefetch = want_prefetch(device if device is not None else "cpu")
        by_source: dict[int, Work] = {}
        for cond, src in conditions:
            if cond in pending:
                by_source.setdefault(id(src), Work(src, label_maps[id(src)], {})).pending[cond] = pending[cond]
        written = run_conditions(
            clf, space, list(by_source.values()), RunStoreSink(db, run_ids), batch_size=batch_size, seed=seed,
            release=release, progress=progress, prefetch=prefetch, executor=executor,
        )

        clean_err, table, _ = db.error_table(eval_id)
        wanted_names = set(names)
        table = {c: {s: e for s, e in v.items() if s in sev} for c, v in table.items() if c in wanted_names}
        table = {c: v for c, v in table.items() if v}
        base, why_not = resolve_baseline(baseline, store=db, edition=ed, source_kind=corrupted.kind)
        summary = summarize(clf.name, table, clean_err, base)
        notes: list[str] = []
        if why_not and baseline is not None and not (isinstance(baseline, str) and baseline.lower() == "none"):
            notes.append(f"CE not normalised: {why_not}.")
        if unavailable:
            notes.append(
                f"Not available in this build (not registered with the corruption engine): {', '.join(unavailable)}."
            )
        if corrupted.on_the_fly:
            notes.append(
                f"Corruptions computed on the fly (seed {seed}, edition {ed}, release mode "
                f"{'on: JPEG q85 like the released files' if release else 'off'}); published ImageNet-C numbers come "
                "from the released JPEGs, whose errors differ by a few points."
            )
        runs = [r for r in db.runs(eval_id) if r.id in set(run_ids.values())]
        skipped = sum(r.n_skipped for r in runs)
        if skipped:
            notes.append(f"{skipped} image(s) could not be read and were skipped (listed in the store).")
        return EvaluationResult(
            evaluation_id=eval_id,
            store_path=db.path,
            summary=summary,
            model=clf.name,
            model_checksum=clf.checksum,
            data=corrupted.describe(),
            clean_data=None if clean_source is None else clean_source.describe(),
            settings={
                "benchmark": bench.name,
                "edition": ed,
                "seed": seed if corrupted.on_the_fly else None,
                "release": release,
                "corruptions": names,
                "severities": sev,
                "label_space": f"{space.mode} ({len(space.classes)} classes)",
                "baseline": summary.baseline,
                "baseline_source": summary.baseline_source,
                "on_the_fly": corrupted.on_the_fly,
            },
            runs=runs,
            new_predictions=written,
            unavailable=unavailable,
            notes=notes,
        )
    finally:
        if own_store:
            db.close()


class ResultSink(Protocol):
    """Where :func:`run_conditions` puts the model's outputs (a benchmark's results tables).

    ``write`` gets each batch with its labels mapped into the label space and the checked
    logits (B x classes of the label space; None for a batch of unreadable images only);
    ``finish`` the conditions that were run to the end; ``fail`` those left unfinished by an error.
    """

    def write(self, condition: Condition, batch: WorkBatch, labels: np.ndarray, logits: torch.Tensor | None) -> int:
        """Store one batch; returns the number of predictions written."""

    def finish(self, conditions: Sequence[Condition]) -> None:
        """Mark conditions complete."""

    def fail(self, conditions: Sequence[Condition], reason: str) -> None:
        """Mark conditions failed (they resume on the next run)."""


@dataclass
class Work:
    """The pending items of one source: ``pending[condition]`` item keys, labels mapped by ``label_map``.

    ``frames[condition]``: frames per item where items are sequences (ImageNet-P's videos; the
    source then yields batches of frames, :attr:`WorkBatch.frames`); progress counts frames.
    """

    source: Source
    label_map: np.ndarray
    pending: dict[Condition, set[str]]
    frames: dict[Condition, int] = field(default_factory=dict)


@dataclass
class Scored:
    """One batch an :class:`Executor` ran through the model.

    Attributes:
        work: index of its :class:`Work` in the list given to the executor.
        batch: its condition, image keys, labels (indices into the source's classes) and
            unreadable images; ``batch.images`` may be empty (the images stayed where the model ran).
        logits: the model's outputs restricted to the label space (B x classes), None for a batch
            of unreadable images only.
    """

    work: int
    batch: WorkBatch
    logits: torch.Tensor | None


class Executor(Protocol):
    """Runs the model somewhere else than in this loop (the optional hook of :func:`run_conditions`).

    ``run`` gets the driver's classifier, label space and pending work, and yields every pending
    image's logits exactly once (a batch may also carry unreadable images), in a fixed order for the
    same pending work. The loop writes them through the same sink as the local path, so the stored
    rows do not depend on where the model ran. ``stop`` is set when the loop ends early.
    """

    def run(
        self,
        clf: Classifier,
        space: LabelSpace,
        work: Sequence[Work],
        *,
        batch_size: int,
        seed: int,
        release: bool,
        stop: threading.Event,
    ) -> Iterator[Scored]:
        """Yield the scored batches of ``work``."""


def run_conditions(
    clf: Classifier,
    space: LabelSpace,
    work: Sequence[Work],
    sink: ResultSink,
    *,
    batch_size: int,
    seed: int,
    release: bool = False,
    progress: Progress | None = None,
    prefetch: bool = False,
    describe: Callable[[Condition], str] | None = None,
    executor: Executor | None = None,
) -> int:
    """The evaluation loop every benchmark shares; returns the number of predictions written.

    For each source, batches of its pending images per condition (decoded, corrupted by the
    source; in a thread ahead of the model with ``prefetch``) go through the model; the
    logits are restricted to the label space and checked (width, finite values), then handed
    to ``sink.write``. Every condition is finished at the end, or failed when a
    :class:`~shiftbench.errors.ShiftbenchError` stops the loop (the error is raised again).
    ``describe(condition)`` names a condition on the progress display and in errors (default
    ``"clean"`` / ``"<corruption> s<severity>"``). Items may be sequences of frames
    (``Work.frames``): each batch is then frames of several items, and the sink assembles
    an item's record once all its frames are ranked. Labels of -1 (unknown) stay -1.
    With ``executor`` the model runs there (e.g. on a Ray cluster) and this loop only checks
    and writes what it yields; ``prefetch`` then does not apply.
    """
    conds = [c for w in work for c, keys in w.pending.items() if keys]
    if not conds:
        return 0
    total = sum(len(keys) * w.frames.get(c, 1) for w in work for c, keys in w.pending.items())
    written = 0
    stop = threading.Event()
    if progress is not None:
        progress.start(total, "starting")
    try:
        if executor is not None:
            live = [Work(w.source, w.label_map, {c: keys for c, keys in w.pending.items() if keys}, w.frames) for w in work]
            for sc in executor.run(clf, space, live, batch_size=batch_size, seed=seed, release=release, stop=stop):
                wb = sc.batch
                written += _write_scored(clf, space, live[sc.work].label_map, sink, wb, sc.logits, describe)
                if progress is not None:
                    progress.advance(len(wb.keys) + len(wb.skipped), (describe or _describe)(wb.condition))
            sink.finish(conds)
            return written
        for w in work:
            todo = {c: keys for c, keys in w.pending.items() if keys}
            if not todo:
                continue

            def make(src: Source = w.source, todo: dict[Condition, set[str]] = todo) -> Iterator[WorkBatch]:
                return src.batches(todo, batch_size=batch_size, seed=seed, release=release, stop=stop)

            stream = _prefetch(make, stop) if prefetch else make()
            for wb in stream:
                written += _score(clf, space, w.label_map, sink, wb, describe)
                if progress is not None:
                    progress.advance(len(wb.keys) + len(wb.skipped), (describe or _describe)(wb.condition))
            stop.clear()
        sink.finish(conds)
    except ShiftbenchError as e:
        stop.set()
        sink.fail(conds, str(e))
        raise
    finally:
        stop.set()
        if progress is not None:
            progress.stop()
    return written


def _describe(condition: Condition) -> str:
    return "clean" if condition == CLEAN else f"{condition[0]} s{condition[1]}"


def _score(
    clf: Classifier,
    space: LabelSpace,
    lmap: np.ndarray,
    sink: ResultSink,
    wb: WorkBatch,
    describe: Callable[[Condition], str] | None = None,
) -> int:
    if int(wb.images.shape[0]) == 0:
        return sink.write(wb.condition, wb, np.zeros(0, dtype=np.int64), None) if wb.skipped else 0
    return _write_scored(clf, space, lmap, sink, wb, space.restrict(clf.logits(wb.images)), describe)


def _write_scored(clf: Classifier, space: LabelSpace, lmap: np.ndarray, sink: ResultSink, wb: WorkBatch,
                  logits: torch.Tensor | None, describe: Callable[[Condition], str] | None = None) -> int:
    """Check a batch's restricted logits (width, finite values) and hand it to the sink."""
    if logits is None or not wb.keys:
        return sink.write(wb.condition, wb, np.zeros(0, dtype=np.int64), None) if wb.skipped else 0
    if logits.shape[1] != len(space.classes):
        raise ModelOutputError(
            clf.name,
            "output width does not match the class set",
            f"{len(space.classes)} logits (the dataset's classes, in order)",
            f"{logits.shape[1]}",
            "Pass classes= with the model's class ids so its outputs can be mapped or restricted.",
        )
    if describe is not None:
        cond = describe(wb.condition)
    else:
        cond = "clean images" if wb.condition == CLEAN else f"{wb.condition[0]} severity {wb.condition[1]}"
    names = wb.keys if wb.frames is None else [f"{k} frame {f}" for k, f in zip(wb.keys, wb.frames, strict=True)]
    check_logits(clf.name, logits, names, cond)
    raw = wb.labels.numpy()
    labels = lmap[raw] if not raw.size or int(raw.min()) >= 0 else np.where(raw >= 0, lmap[np.maximum(raw, 0)], -1)
    return sink.write(wb.condition, wb, labels, logits)


class RunStoreSink:
    """ImageNet-C's sink: top-5 predictions per image into the results store's runs."""

    def __init__(self, db: ResultsStore, run_ids: Mapping[Condition, int]) -> None:
        self.db = db
        self.run_ids = run_ids

    def write(self, condition: Condition, batch: WorkBatch, labels: np.ndarray, logits: torch.Tensor | None) -> int:
        rid = self.run_ids[condition]
        if logits is None:
            self.db.write_batch(rid, [], [], [], batch.skipped)
            return 0
        top = torch.topk(logits, k=min(5, logits.shape[1]), dim=1).indices.numpy()
        self.db.write_batch(rid, batch.keys, labels.tolist(), top.tolist(), batch.skipped)
        return len(batch.keys)

    def finish(self, conditions: Sequence[Condition]) -> None:
        for c in conditions:
            self.db.finish_run(self.run_ids[c])

    def fail(self, conditions: Sequence[Condition], reason: str) -> None:
        self.db.fail_runs([self.run_ids[c] for c in conditions], reason)
