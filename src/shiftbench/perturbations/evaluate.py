"""On-the-fly ImageNet-P evaluation: generate sequences in memory, stream them through a model.

:func:`evaluate_sequences` keeps, per video and frame, only what the metrics
need: the top-5 classes (ordinal ranks; the top-1 class is the first). From
those every metric of every difficulty follows (:func:`score_top5`), so a
temporal sequence is generated and predicted once for difficulties 1, 2 and 3.
:func:`evaluate_released` does the same for released MP4 / ``.npy`` data.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..errors import InvalidArgumentError
from ..evaluation.models import parse_device
from ._source import prepare
from ._spec import TEST_PERTURBATIONS, check_difficulty, get_perturbation, list_perturbations
from .metrics import (
    PBaseline,
    alexnet_p_baseline,
    flips_per_video,
    top5_distances_per_video,
    top5_from_logits,
)
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


@dataclass(frozen=True)
class SequenceScores:
    """Scores of one perturbation at one difficulty.

    Attributes:
        perturbation: name.
        difficulty: 1..3.
        top5: N x T x 5 top-5 classes per frame (int16; column 0 is the prediction).
        fp_per_video: N flip probabilities.
        ut5d_per_video: N mean top-5 distances.
        fp: flip probability (fraction), mean over videos.
        ut5d: unnormalised top-5 distance, mean over videos.
        fr: FP / FP of the baseline (None without a baseline for this edition and difficulty).
        t5d: uT5D / uT5D of the baseline (None likewise).
        frame_accuracy: share of frames whose prediction equals the label (None without labels).
    """

    perturbation: str
    difficulty: int
    top5: np.ndarray
    fp_per_video: np.ndarray
    ut5d_per_video: np.ndarray
    fp: float
    ut5d: float
    fr: float | None
    t5d: float | None
    frame_accuracy: float | None = None

    @property
    def predictions(self) -> np.ndarray:
        """N x T top-1 classes."""
        return self.top5[..., 0].astype(np.int64)


@dataclass(frozen=True)
class PSummary:
    """Aggregates over the 10 test perturbations at one difficulty.

    Attributes:
        difficulty: 1..3.
        mfr: mean flip rate (None unless all 10 were evaluated and normalised).
        mt5d: mean T5D (likewise).
        mean_fp: plain mean FP over the test perturbations evaluated (the
            reference CIFAR-P script's "Mean Flipping Prob").
        perturbations: test perturbations included.
    """

    difficulty: int
    mfr: float | None
    mt5d: float | None
    mean_fp: float | None
    perturbations: tuple[str, ...]


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


def _resolve_baseline(
    baseline: PBaseline | Mapping[int, PBaseline] | None | bool, edition: str, difficulty: int
) -> PBaseline | None:
    if baseline is False:
        return None
    if baseline is None or baseline is True:
        b = alexnet_p_baseline()
        return b if (b.edition == edition and b.difficulty == difficulty) else None
    if isinstance(baseline, PBaseline):
        return baseline if baseline.difficulty == difficulty else None
    if isinstance(baseline, Mapping):
        return baseline.get(difficulty)
    raise InvalidArgumentError("baseline", type(baseline).__name__, "a PBaseline, a {difficulty: PBaseline} mapping, None or False")


def score_top5(
    top5: np.ndarray,
    perturbation: str,
    difficulty: int = 1,
    *,
    labels: np.ndarray | None = None,
    edition: str = "224",
    baseline: PBaseline | Mapping[int, PBaseline] | None | bool = None,
) -> SequenceScores:
    """All ImageNet-P scores of one perturbation from per-frame top-5 lists.

    Args:
        top5: N x T x 5 classes per frame, best first (ordinal ranks).
        perturbation: name (decides noise vs temporal traversal).
        difficulty: 1..3.
        labels: N true classes (optional; gives the frame accuracy).
        edition: edition of the data (the AlexNet baseline exists for 224 only).
        baseline: None (AlexNet where it applies), False (no normalisation), a
            :class:`PBaseline` or a {difficulty: PBaseline} mapping.
    """
    spec = get_perturbation(perturbation)
    d = check_difficulty(difficulty)
    t5 = np.asarray(top5)
    if t5.ndim != 3 or t5.shape[-1] != 5:
        raise InvalidArgumentError("top5", tuple(t5.shape), "an N x T x 5 array")
    fpv = flips_per_video(t5[..., 0], spec.noise, d)
    utv = top5_distances_per_video(t5, spec.noise, d)
    fp, ut = float(fpv.mean()), float(utv.mean())
    b = _resolve_baseline(baseline, edition, d)
    fr = t5d = None
    if b is not None and spec.name in b.fp and spec.name in b.ut5d:
        fr = fp / float(b.fp[spec.name])
        t5d = ut / float(b.ut5d[spec.name])
    acc = None
    if labels is not None:
        lab = np.asarray(labels).reshape(-1)
        if lab.shape[0] != t5.shape[0]:
            raise InvalidArgumentError("labels", f"{lab.shape[0]} labels", f"one per video ({t5.shape[0]})")
        acc = float((t5[..., 0] == lab[:, None]).mean())
    return SequenceScores(spec.name, d, t5.astype(np.int16), fpv, utv, fp, ut, fr, t5d, acc)


def summarize_p(scores: Iterable[SequenceScores], difficulty: int) -> PSummary:
    """mFR, mT5D and the plain mean FP over the test perturbations scored at ``difficulty``."""
    d = check_difficulty(difficulty)
    by_name = {s.perturbation: s for s in scores if s.difficulty == d and s.perturbation in TEST_PERTURBATIONS}
    names = tuple(p for p in TEST_PERTURBATIONS if p in by_name)
    complete = len(names) == len(TEST_PERTURBATIONS)
    frs = [v for v in (by_name[p].fr for p in names) if v is not None]
    t5s = [v for v in (by_name[p].t5d for p in names) if v is not None]
    mfr = float(np.mean(frs)) if complete and len(frs) == len(names) else None
    mt5d = float(np.mean(t5s)) if complete and len(t5s) == len(names) else None
    mean_fp = float(np.mean([by_name[p].fp for p in names])) if names else None
    return PSummary(d, mfr, mt5d, mean_fp, names)


class _Ranker:
    """Feeds frames to the model in fixed-size batches and records top-5 lists."""

    def __init__(self, model_fn: ModelFn, batch_size: int, device: torch.device, sink: np.ndarray) -> None:
        self.model_fn = model_fn
        self.batch_size = batch_size
        self.device = device
        self.sink = sink  # N x T x 5
        self.frames: list[torch.Tensor] = []
        self.where: list[np.ndarray] = []
        self.pending = 0
        self.model_s = 0.0
        self.rank_s = 0.0
        self.count = 0

    def add(self, frames: torch.Tensor, where: np.ndarray) -> None:
        self.frames.append(frames)
        self.where.append(where)
        self.pending += int(frames.shape[0])
        while self.pending >= self.batch_size:
            self._run(self.batch_size)

    def flush(self) -> None:
        while self.pending:
            self._run(min(self.pending, self.batch_size))

    def _run(self, n: int) -> None:
        x = torch.cat(self.frames)
        w = np.concatenate(self.where)
        batch, rest = x[:n], x[n:]
        self.frames = [rest] if rest.shape[0] else []
        self.where = [w[n:]] if rest.shape[0] else []
        self.pending -= n
        t0 = time.perf_counter()
        out = self.model_fn(batch.to(self.device))
        if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
            out = out[0]
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t1 = time.perf_counter()
        logits = out.detach().to("cpu", torch.float64) if isinstance(out, torch.Tensor) else torch.as_tensor(np.asarray(out, dtype=np.float64))
        if logits.ndim != 2 or logits.shape[0] != n or logits.shape[1] < 5:
            raise InvalidArgumentError(
                "model_fn", f"output of shape {tuple(logits.shape)}", f"logits of shape ({n}, C) with C >= 5"
            )
        top5 = top5_from_logits(logits)
        idx = w[:n]
        self.sink[idx[:, 0], idx[:, 1]] = top5
        self.model_s += t1 - t0
        self.rank_s += time.perf_counter() - t1
        self.count += n


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


def _groups(n: int, size: int) -> Iterator[tuple[int, int]]:
    for a in range(0, n, size):
        yield a, min(n, a + size)


def evaluate_sequences(
    model_fn: ModelFn,
    images: Any,
    labels: Sequence[int] | np.ndarray | None = None,
    perturbations: str | list[str] | tuple[str, ...] = "test",
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
    ``batch_size`` frames, and reduced at once to per-frame top-5 lists, so
    memory stays bounded whatever the number of images.

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
    scores: dict[tuple[str, int], SequenceScores] = {}
    gen_s = model_s = rank_s = 0.0
    total_frames = 0
    for name in names:
        spec = get_perturbation(name)
        t = spec.frames(prep.edition)
        levels = diffs if spec.noise else (1,)
        for level in levels:
            top5 = np.zeros((n, t, 5), dtype=np.int64)
            ranker = _Ranker(model_fn, bs, dev, top5)
            group = max(1, math.ceil(2 * bs / t))
            done = 0
            for a, b in _groups(n, group):
                sub = prep.subset(a, b)
                it = perturb_chunks(sub, spec.name, level, seed=seed, device=dev)
                while True:
                    t0 = time.perf_counter()
                    item = next(it, None)
                    gen_s += time.perf_counter() - t0
                    if item is None:
                        break
                    f0, block = item
                    bsz, tc = int(block.shape[0]), int(block.shape[1])
                    where = np.stack(
                        np.meshgrid(np.arange(a, a + bsz), np.arange(f0, f0 + tc), indexing="ij"), axis=-1
                    ).reshape(-1, 2)
                    ranker.add(block.reshape(bsz * tc, *block.shape[2:]), where)
                    done += bsz * tc
                    if progress is not None:
                        progress(spec.name, done, n * t)
            ranker.flush()
            model_s += ranker.model_s
            rank_s += ranker.rank_s
            total_frames += ranker.count
            for d in diffs if not spec.noise else (level,):
                if not spec.noise and t <= d:
                    continue
                scores[(spec.name, d)] = score_top5(top5, spec.name, d, labels=lab, edition=prep.edition, baseline=baseline)
    summaries = {d: summarize_p(scores.values(), d) for d in diffs}
    total = time.perf_counter() - t_start
    timing = {"generate_s": gen_s, "model_s": model_s, "rank_s": rank_s, "total_s": total}
    return PEvaluation(scores, summaries, prep.edition, int(seed), n, total_frames, timing)


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
    """Score a model on released sequences (MP4 tree or CIFAR-P array).

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
        for v, frames in videos:
            clips.append(frames)
            labels.append(int(v.label))
    if not clips:
        raise InvalidArgumentError("videos", "no videos", "at least one video")
    t = int(clips[0].shape[0])
    top5 = np.zeros((len(clips), t, 5), dtype=np.int64)
    ranker = _Ranker(model_fn, bs, dev, top5)
    for i, c in enumerate(clips):
        x = torch.from_numpy(np.ascontiguousarray(np.asarray(c).transpose(0, 3, 1, 2)))
        ranker.add(x, np.stack([np.full(t, i), np.arange(t)], axis=-1))
    ranker.flush()
    lab = np.asarray(labels) if labels else None
    return [score_top5(top5, spec.name, d, labels=lab, edition=edition, baseline=baseline) for d in diffs]
