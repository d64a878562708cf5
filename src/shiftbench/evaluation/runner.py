"""The one evaluation loop: batches of pending items through the model, their logits checked and handed on.

:func:`run_conditions` is the loop every benchmark shares (through
:mod:`shiftbench.evaluation.driver`, which owns the store's lifecycle around it):
per source, batches of the pending items of each condition (decoded, corrupted;
in a thread ahead of the model with ``prefetch``) go through the model, here or
through an :class:`Executor` (e.g. a Ray cluster); the logits are restricted to
the label space, checked, and handed to a :class:`ResultSink`.
"""

from __future__ import annotations

import os
import platform
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from typing import Any, Protocol, TypeVar

import numpy as np
import torch

from ..errors import ShiftbenchError
from ..version import __version__
from .data import CLEAN, Condition, Source, WorkBatch
from .errors import ModelOutputError
from .models import Classifier, LabelSpace, check_logits
from .protocol import Progress

__all__ = [
    "package_versions",
    "run_conditions",
    "ResultSink",
    "Work",
    "Scored",
    "Executor",
    "want_prefetch",
]


def package_versions(extra: Sequence[str] = ()) -> dict[str, str]:
    """Versions of Python and of the packages that can change results (read once per process)."""
    return dict(_versions(tuple(extra)))


@lru_cache(maxsize=16)
def _versions(extra: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    out = {"python": platform.python_version(), "shiftbench": __version__, "torch": torch.__version__}
    for pkg in ("numpy", "pillow", "scipy", "opencv-python-headless", "efficientnet-lite-pytorch", *extra):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return tuple(out.items())


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
    if space.mode != "outputs" and logits.shape[1] != len(space.classes):
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
