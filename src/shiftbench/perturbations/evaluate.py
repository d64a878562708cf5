"""On-the-fly ImageNet-P evaluation in memory: sequences generated from photos (or released ones) through a model.

:func:`evaluate_sequences` and :func:`evaluate_released` are runs of the evaluation driver
(:func:`shiftbench.evaluation.driver.run_plan`) in a temporary store: the same frame batches
(:class:`~shiftbench.perturbations.pipeline` sources) and loop as ``shiftbench evaluate
--benchmark imagenet-p``, with a record writer that keeps, per video and frame, only what the
metrics need: the top-5 classes (ordinal ranks; the top-1 class is the first). From those every
metric of every difficulty follows (:func:`~shiftbench.perturbations.score_top5`), so a temporal
sequence is generated and predicted once for difficulties 1, 2 and 3.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..errors import InvalidArgumentError
from ..evaluation.data import Condition, WorkBatch
from ..evaluation.driver import run_plan
from ..evaluation.models import Classifier, LabelSpace, parse_device
from ..evaluation.protocol import Plan, Planned
from ._source import PreparedImages, prepare
from ._spec import check_difficulty, get_perturbation, list_perturbations
from .metrics import PBaseline, top5_from_logits
from .pipeline import FrameSource, Video, VideoBlock, VideoSource
from .scores import PSummary, SequenceScores, score_top5, summarize_p
from .sequences import perturb_chunks

__all__ = [
    "SequenceScores",
    "PSummary",
    "PEvaluation",
    "score_top5",
    "summarize_p",
    "evaluate_sequences",
    "evaluate_released",
    "ModelFn",
]

ModelFn = Callable[[torch.Tensor], Any]
"""Maps a uint8 B x 3 x H x W batch (on the evaluation device) to B x C logits."""


@dataclass
class PEvaluation:
    """Result of :func:`evaluate_sequences`.

    Attributes:
        scores: (perturbation, difficulty) -> :class:`SequenceScores`.
        summaries: difficulty -> :class:`PSummary`.
        edition: edition of the sequences.
        seed: seed of the sequences.
        n_videos: videos per perturbation.
        frames: frames passed through the model.
        timing: seconds spent generating (``generate_s``), in the model
            (``model_s``), ranking (``rank_s``) and in total (``total_s``).
    """

    scores: dict[tuple[str, int], SequenceScores]
    summaries: dict[int, PSummary]
    edition: str
    seed: int
    n_videos: int
    frames: int
    timing: dict[str, float] = field(default_factory=dict)

    def table(self, difficulty: int = 1) -> list[dict[str, Any]]:
        """One row per perturbation at ``difficulty`` (FP in percent, as the papers print it)."""
        rows = []
        for (name, d), s in self.scores.items():
            if d != difficulty:
                continue
            rows.append(
                {
                    "perturbation": name,
                    "difficulty": d,
                    "fp_percent": 100.0 * s.fp,
                    "ut5d": s.ut5d,
                    "fr_percent": None if s.fr is None else 100.0 * s.fr,
                    "t5d_percent": None if s.t5d is None else 100.0 * s.t5d,
                    "frame_accuracy": s.frame_accuracy,
                }
            )
        return rows


def _check_positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidArgumentError(name, value, "a positive integer")
    return int(value)


def _difficulties(difficulty: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(difficulty, (list, tuple)):
        if not difficulty:
            raise InvalidArgumentError("difficulty", difficulty, "1..3 or a non-empty list of them")
        return tuple(sorted({check_difficulty(d) for d in difficulty}))
    return (check_difficulty(difficulty),)


class _Timing:
    """Seconds spent generating frames, in the model and ranking its outputs; frames ranked."""

    def __init__(self) -> None:
        self.generate_s = self.model_s = self.rank_s = 0.0
        self.frames = 0


class _Photos(VideoSource):
    """Prepared photos (:func:`~shiftbench.perturbations.prepare`) as videos ``"0".."N-1"``, generated in memory."""

    kind, location, on_the_fly, has_labels, classes = "in-memory", "memory", True, False, ()

    def __init__(self, prep: PreparedImages, timing: _Timing) -> None:
        self.prep, self.timing, self.edition = prep, timing, prep.edition
        self.identity = f"in-memory {len(prep)} images, edition {prep.edition}"

    def videos(self, name: str, level: int) -> list[Video]:
        return [Video(str(i), -1) for i in range(len(self.prep))]

    def blocks(self, name: str, level: int, todo: list[Video], *, seed: int, device: torch.device,
               group: int) -> Iterator[VideoBlock]:
        rows = [int(v.key) for v in todo]
        runs: list[tuple[int, int]] = []  # (first, count): up to ``group`` consecutive images at a time
        for r in rows:
            if runs and runs[-1][0] + runs[-1][1] == r and runs[-1][1] < group:
                runs[-1] = (runs[-1][0], runs[-1][1] + 1)
            else:
                runs.append((r, 1))
        for first, n in runs:
            it = perturb_chunks(self.prep.subset(first, first + n), name, level, seed=seed, device=device)
            while True:
                t0 = time.perf_counter()
                chunk = next(it, None)
                self.timing.generate_s += time.perf_counter() - t0
                if chunk is None:
                    break
                f0, frames = chunk
                yield VideoBlock([str(i) for i in range(first, first + n)], [-1] * n, f0, frames)


class _Clips(VideoSource):
    """Released sequences already in memory (T x H x W x 3 uint8 each) as videos ``"0".."N-1"``."""

    kind, location, on_the_fly, has_labels, classes = "in-memory", "memory", False, False, ()

    def __init__(self, clips: list[np.ndarray], edition: str) -> None:
        self.clips, self.edition = clips, edition
        self.identity = f"in-memory {len(clips)} videos"

    def videos(self, name: str, level: int) -> list[Video]:
        return [Video(str(i), -1) for i in range(len(self.clips))]

    def blocks(self, name: str, level: int, todo: list[Video], *, seed: int, device: torch.device,
               group: int) -> Iterator[VideoBlock]:
        for v in todo:
            x = torch.from_numpy(np.ascontiguousarray(np.asarray(self.clips[int(v.key)]).transpose(0, 3, 1, 2)))
            yield VideoBlock([v.key], [-1], 0, x[None])


class _Outputs(Classifier):
    """``model_fn`` as the loop's classifier: the uint8 frames as they are (on the device), its logits as float64."""

    def __init__(self, model_fn: ModelFn, device: torch.device, timing: _Timing) -> None:
        # wrapped: a module given as model_fn stays as the caller left it (mode, device)
        super().__init__(lambda x: model_fn(x), name=getattr(model_fn, "__qualname__", type(model_fn).__name__),
                         transform=lambda x: x, checksum="in-memory")
        self.device, self.timing = device, timing

    def to(self, device: torch.device | str) -> Classifier:  # the caller placed its model
        return self

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        n = int(images.shape[0])
        t0 = time.perf_counter()
        out = self.forward(images.to(self.device))
        if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
            out = out[0]
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.timing.model_s += time.perf_counter() - t0
        logits = (out.detach().to("cpu", torch.float64) if isinstance(out, torch.Tensor)
                  else torch.as_tensor(np.asarray(out, dtype=np.float64)))
        if logits.ndim != 2 or logits.shape[0] != n or logits.shape[1] < 5:
            raise InvalidArgumentError(
                "model_fn", f"output of shape {tuple(logits.shape)}", f"logits of shape ({n}, C) with C >= 5")
        return logits


class _Top5:
    """The record writer: each frame's top-5 classes into the N x T x 5 array of its condition (no store rows)."""

    def __init__(self, top5: Mapping[Condition, np.ndarray], timing: _Timing) -> None:
        self.top5, self.timing = top5, timing
        self.left = {c: np.full(a.shape[0], a.shape[1]) for c, a in top5.items()}

    def write(self, condition: Condition, batch: WorkBatch, labels: np.ndarray, logits: torch.Tensor | None) -> list[str]:
        if logits is None:
            return []
        t0 = time.perf_counter()
        rows = np.array([int(k) for k in batch.keys], dtype=np.int64)
        self.top5[condition][rows, np.asarray(batch.frames, dtype=np.int64)] = top5_from_logits(logits)
        left = self.left[condition]
        np.subtract.at(left, rows, 1)
        self.timing.rank_s += time.perf_counter() - t0
        self.timing.frames += len(rows)
        return [str(r) for r in dict.fromkeys(rows.tolist()) if left[r] == 0]


class _Callback:
    """The driver's progress as ``progress(perturbation, frames_done, frames_total)`` per perturbation and level."""

    def __init__(self, fn: Callable[[str, int, int], None], totals: Mapping[str, tuple[str, int]]) -> None:
        self.fn, self.totals, self.done = fn, totals, dict.fromkeys(totals, 0)

    def start(self, total: int, description: str) -> None:
        pass

    def advance(self, n: int, description: str) -> None:
        name, total = self.totals[description]
        self.done[description] += n
        self.fn(name, self.done[description], total)

    def stop(self) -> None:
        pass


def _run(src: VideoSource, runs: list[tuple[str, int]], n: int, t_of: Mapping[str, int], model: _Outputs,
         batch_size: int, seed: int, timing: _Timing,
         progress: Callable[[str, int, int], None] | None = None) -> dict[Condition, np.ndarray]:
    """The driver's run of ``runs`` ((perturbation, level) of ``n`` videos): each one's N x T x 5 top-5 classes."""
    frames = {r: t_of[r[0]] for r in runs}
    top5 = {r: np.zeros((n, frames[r], 5), dtype=np.int64) for r in runs}
    source = FrameSource(src, frames, model.device)
    label = {r: f"{r[0]} d{r[1]}" for r in runs}
    plan = Plan([Planned(r, source, r[0], r[1], frames[r]) for r in runs], src.edition, seed=seed,
                space=LabelSpace((), None, "outputs"), label_map=np.full(1, -1, dtype=np.int64), check_absent=False,
                model=model, writer=lambda ctx: _Top5(top5, timing), describe=label.__getitem__, prefetch=False)
    callback = None if progress is None else _Callback(progress, {label[r]: (r[0], n * frames[r]) for r in runs})
    run_plan(plan, lambda db, ev: None, name="imagenet-p (in memory)", device=str(model.device), batch_size=batch_size,
             progress=callback)
    return top5


def evaluate_sequences(
    model_fn: ModelFn,
    images: Any,
    labels: Sequence[int] | np.ndarray | None = None,
    perturbations: str | Sequence[str] = "test",
    difficulty: int | Sequence[int] = 1,
    seed: int = 0,
    batch_size: int = 64,
    device: torch.device | str | None = None,
    *,
    edition: str | int | None = None,
    keys: Sequence[Any] | None = None,
    preprocessed: bool = False,
    baseline: PBaseline | Mapping[int, PBaseline] | None | bool = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> PEvaluation:
    """Generate ImageNet-P sequences in memory and score a model on them.

    Sequences are generated for a few images at a time (enough frames for a
    couple of model batches), streamed through ``model_fn`` in batches of
    ``batch_size`` frames by the evaluation driver (in a temporary store), and
    reduced at once to per-frame top-5 lists, so memory stays bounded whatever
    the number of images.

    Args:
        model_fn: callable mapping a uint8 B x 3 x S x S batch on ``device``
            (S = the edition's size) to B x C logits (tensor or array). Put the
            model's normalisation inside it.
        images: source photos (see :func:`~shiftbench.perturbations.prepare`)
            or :class:`~shiftbench.perturbations.PreparedImages`.
        labels: true class per image (optional; adds the frame accuracy).
        perturbations: names, wildcards or groups (``"test"``, ``"validation"``, ``"all"``).
        difficulty: 1..3 or a list of them. Temporal sequences are generated
            once and scored at every requested stride; noise sequences are
            generated per difficulty.
        seed: seed of the sequences.
        batch_size: frames per model call.
        device: where frames are generated and the model runs.
        edition: ``"224"``, ``"299"``, ``"64"`` or ``"32"``.
        keys: per-image keys of the random draws (default: pixel digests).
        preprocessed: the images are edition-size crops without context.
        baseline: normalisation of FR/T5D (default: AlexNet, 224 edition,
            difficulty 1; ``False`` for none).
        progress: called as ``progress(perturbation, frames_done, frames_total)``.

    Returns:
        A :class:`PEvaluation` with per-perturbation scores, per-difficulty
        summaries (mFR and mT5D when all 10 test perturbations were run and a
        baseline applies) and the time split between generation and the model.

    Raises:
        InvalidArgumentError: a bad argument, or model outputs that are not B x C logits with C >= 5.
        ModelOutputError: non-finite logits (nothing of that batch is scored).
    """
    if not callable(model_fn):
        raise InvalidArgumentError("model_fn", type(model_fn).__name__, "a callable returning logits")
    bs = _check_positive("batch_size", batch_size)
    diffs = _difficulties(difficulty)
    names = list_perturbations(perturbations)
    if not names:
        raise InvalidArgumentError("perturbations", perturbations, "at least one perturbation")
    dev = parse_device(device)
    prep = prepare(images, edition, preprocessed=preprocessed, keys=keys)
    n = len(prep)
    lab = None
    if labels is not None:
        lab = np.asarray(labels).reshape(-1)
        if lab.shape[0] != n:
            raise InvalidArgumentError("labels", f"{lab.shape[0]} labels", f"one per image ({n})")
    t_start = time.perf_counter()
    timing = _Timing()
    specs = [get_perturbation(name) for name in names]
    runs = [(spec.name, level) for spec in specs for level in (diffs if spec.noise else (1,))]
    top5 = _run(_Photos(prep, timing), runs, n, {sp.name: sp.frames(prep.edition) for sp in specs},
                _Outputs(model_fn, dev, timing), bs, seed, timing, progress)
    scores: dict[tuple[str, int], SequenceScores] = {}
    for (name, level), t5 in top5.items():
        spec = get_perturbation(name)
        for d in diffs if not spec.noise else (level,):
            if not spec.noise and t5.shape[1] <= d:
                continue
            scores[(name, d)] = score_top5(t5, name, d, labels=lab, edition=prep.edition, baseline=baseline)
    summaries = {d: summarize_p(scores.values(), d) for d in diffs}
    total = time.perf_counter() - t_start
    times = {"generate_s": timing.generate_s, "model_s": timing.model_s, "rank_s": timing.rank_s, "total_s": total}
    return PEvaluation(scores, summaries, prep.edition, int(seed), n, timing.frames, times)


def evaluate_released(
    model_fn: ModelFn,
    videos: Iterable[Any],
    perturbation: str,
    difficulty: int | Sequence[int] = 1,
    batch_size: int = 64,
    device: torch.device | str | None = None,
    *,
    edition: str = "224",
    baseline: PBaseline | Mapping[int, PBaseline] | None | bool = None,
) -> list[SequenceScores]:
    """Score a model on released sequences (MP4 tree or CIFAR-P array), through the evaluation driver.

    Args:
        model_fn: as in :func:`evaluate_sequences`.
        videos: an :class:`~shiftbench.perturbations.video.ImageNetPVideos`
            (labels from its class folders) or an (N, T, H, W, 3) uint8 array
            such as :func:`~shiftbench.perturbations.video.read_cifar_p` returns.
        perturbation: name.
        difficulty: 1..3 or a list (temporal: strides over the same videos;
            noise: the data must be of that difficulty, one value).
        batch_size, device, edition, baseline: as in :func:`evaluate_sequences`.
    """
    spec = get_perturbation(perturbation)
    diffs = _difficulties(difficulty)
    if spec.noise and len(diffs) > 1:
        raise InvalidArgumentError("difficulty", difficulty, "one difficulty for noise data (each is a separate dataset)")
    bs = _check_positive("batch_size", batch_size)
    dev = parse_device(device)
    labels: list[int] = []
    clips: list[np.ndarray] = []
    if isinstance(videos, np.ndarray):
        clips = list(videos)
    else:
        for v, frames in videos:  # type: ignore[misc]
            clips.append(frames)
            labels.append(int(v.label))
    if not clips:
        raise InvalidArgumentError("videos", "no videos", "at least one video")
    timing = _Timing()
    run = (spec.name, diffs[0] if spec.noise else 1)
    top5 = _run(_Clips(clips, str(edition)), [run], len(clips), {spec.name: int(clips[0].shape[0])},
                _Outputs(model_fn, dev, timing), bs, 0, timing)[run]
    lab = np.asarray(labels) if labels else None
    return [score_top5(top5, spec.name, d, labels=lab, edition=edition, baseline=baseline) for d in diffs]
