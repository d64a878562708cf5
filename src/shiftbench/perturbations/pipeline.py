"""ImageNet-P evaluation backed by the results store (``shiftbench evaluate --benchmark imagenet-p``).

:func:`p_plan` declares one run per perturbation and *level* for the evaluation
driver (:mod:`shiftbench.evaluation.driver`), which registers them in the results
store, streams the frames of every pending video through the model in batches, and
after each batch writes (:class:`VideoRecords`) the videos whose frames are all
ranked (their per-frame top-5 lists) in one transaction; :func:`p_result` scores it. The level is what is generated or read: the
noise difficulty for noise sequences, 1 for temporal ones (their difficulties
2 and 3 are strides over the same frames, so one stored run serves all three).
A killed run resumes with the videos it lacks; ``(run, video)`` is a primary
key, so no video is stored twice. Every score is then recomputed from the
stored rows, never from memory.

Data:

* on the fly: an ImageFolder (or a flat folder of ``<wnid>_*.JPEG``), or the
  20 foolbox photos of the demo; sequences are generated per image, keyed by
  the image's pixels (the same frames as :func:`~shiftbench.perturbations.evaluate_sequences`).
* released: an ImageNet-P / Tiny-ImageNet-P MP4 tree
  (``<root>/<p>[_<d>]/<wnid>/<file>.mp4``) or a CIFAR-10/100-P folder
  (``<root>/<p>.npy``, optionally ``labels.npy``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

from ..checks import check_seed
from ..editions import get_edition
from ..errors import DataError, InvalidArgumentError, UnknownNameError
from ..evaluation.data import (
    CLEAN,
    Condition,
    ImageFolderSource,
    Item,
    Source,
    WorkBatch,
    digest,
    files_digest,
    foolbox_imagenet,
    spread_evenly,
)
from ..evaluation.errors import ImageReadError, IncompleteDatasetError
from ..evaluation.models import Classifier
from ..evaluation.protocol import Metric, Plan, Planned, Summary
from ..evaluation.store import ResultsStore, RunInfo
from ..io import DECODE_ERRORS, load_image_rgb
from ._errors import CorruptVideoError, InvalidDifficultyError, UnknownPerturbationError
from ._source import prepare
from ._spec import TEST_PERTURBATIONS, check_difficulty, get_perturbation, list_perturbations
from .metrics import PBaseline, alexnet_p_baseline, top5_from_logits
from .scores import PSummary, SequenceScores, score_top5, summarize_p
from .sequences import perturb_chunks
from .video import cifar_p_path, folder_name, read_cifar_p, read_video

__all__ = [
    "BENCHMARK",
    "FrameSource",
    "PEvaluationResult",
    "Video",
    "VideoBlock",
    "VideoRecords",
    "VideoSource",
    "p_plan",
    "p_result",
    "parse_difficulties",
    "resolve_perturbations",
    "scores_from_store",
    "stored_p_baseline",
]

BENCHMARK = "imagenet-p"
_SIZES = {"224": 224, "299": 299, "64": 64, "32": 32}
_EDITION_BY_SIDE = {224: "224", 299: "299", 64: "64", 32: "32"}


# -- arguments -------------------------------------------------------------------------


def parse_difficulties(spec: str | int | Sequence[int] | None) -> list[int]:
    """Difficulties from ``"1-3"``, ``"1,3"``, ``2`` or ``[1, 2]`` (default: ``[1]``); sorted, no duplicates.

    Raises:
        InvalidDifficultyError: anything but integers in 1..3.
    """
    allowed = "integers 1..3 as a list or range, e.g. '1', '1-3' or '1,3'"
    if spec is None:
        return [1]
    values: list[Any] = []
    if isinstance(spec, str):
        for part in spec.replace(" ", "").split(","):
            if not part:
                continue
            lo, dash, hi = part.partition("-")
            if dash:
                if not (lo.isdigit() and hi.isdigit()) or int(lo) > int(hi):
                    raise InvalidDifficultyError("difficulties", spec, allowed)
                values.extend(range(int(lo), int(hi) + 1))
            elif part.isdigit():
                values.append(int(part))
            else:
                raise InvalidDifficultyError("difficulties", spec, allowed)
    elif isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        values = [int(spec)]
    elif isinstance(spec, Sequence) and not isinstance(spec, bool):
        values = list(spec)
    else:
        raise InvalidDifficultyError("difficulties", spec, allowed)
    if not values:
        raise InvalidDifficultyError("difficulties", spec, allowed)
    out = set()
    for v in values:
        try:
            out.add(check_difficulty(v, "difficulties"))
        except InvalidDifficultyError as e:
            raise InvalidDifficultyError("difficulties", spec, allowed, f"{v!r} is not one.") from e
    return sorted(out)


def resolve_perturbations(spec: str | Sequence[str] | None, edition: str) -> list[str]:
    """Perturbation names from a comma-separated string or list of names, wildcards or groups (default: the 10 test ones).

    Raises:
        UnknownPerturbationError: a name that is not registered (with suggestions).
        InvalidArgumentError: nothing selected, or a perturbation without a schedule for ``edition``.
    """
    if spec is None:
        return list(TEST_PERTURBATIONS)
    parts = [p.strip() for p in (spec.split(",") if isinstance(spec, str) else spec) if p and p.strip()]
    if not parts:
        raise InvalidArgumentError("perturbations", spec, "at least one perturbation name, wildcard or group")
    try:
        names = list_perturbations(parts)
    except UnknownNameError as e:
        raise UnknownPerturbationError("perturbations", e.value, e.choices, e.suggestions) from e
    if not names:
        raise InvalidArgumentError(
            "perturbations", spec, "names, wildcards or groups (test, validation, noise, temporal) matching a perturbation"
        )
    missing = [n for n in names if edition not in get_perturbation(n).editions]
    if missing:
        raise InvalidArgumentError("perturbations", ", ".join(missing), f"perturbations defined for edition {edition}")
    return names


# -- data ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Video:
    """One video of a :class:`VideoSource`: its key (the store's item id), label, and file or array row."""

    key: str
    label: int
    path: Path | None = None
    row: int = -1


@dataclass
class VideoBlock:
    """Frames of a few videos: B x t x 3 x H x W uint8, frames ``first .. first + t - 1``."""

    keys: list[str]
    labels: list[int]
    first: int
    frames: torch.Tensor | None
    skipped: list[tuple[str, int, str]] = field(default_factory=list)


class VideoSource:
    """Where ImageNet-P's videos come from (photos made into sequences, MP4 trees, CIFAR-P arrays, memory):
    :meth:`videos` lists them per perturbation and level, :meth:`blocks` yields their frames a few videos at a time
    (:class:`FrameSource` batches those frames for the evaluation loop)."""

    kind: str
    identity: str
    location: str
    classes: tuple[str, ...]
    edition: str
    on_the_fly: bool
    has_labels: bool = True

    def videos(self, name: str, level: int) -> list[Video]:
        raise NotImplementedError

    def select_classes(self, classes: Sequence[str]) -> None:
        raise NotImplementedError

    def blocks(
        self, name: str, level: int, todo: list[Video], *, seed: int, device: torch.device, group: int
    ) -> Iterator[VideoBlock]:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.kind} {self.location}"

    def content_digest(self) -> str:
        """Every video or array file of the released root (size and modification time), whichever perturbations
        are requested."""
        root = Path(self.location)
        if not root.is_dir():  # videos in memory: evaluated in a temporary store, never resumed
            return f"unread:{self.identity}"
        return files_digest(root, lambda f: f.suffix in (".mp4", ".npy"))


class _OnTheFly(VideoSource):
    """Clean photos (an ImageFolder or the foolbox demo) turned into sequences in memory."""

    on_the_fly = True

    def __init__(self, src: ImageFolderSource, edition: str) -> None:
        self.src = src
        self.kind = src.kind
        self.edition = edition
        self.location = src.location
        self.classes = src.classes
        self.bad_images = src.bad_images

    @property
    def identity(self) -> str:  # type: ignore[override]
        return self.src.identity

    def describe(self) -> str:
        return self.src.describe()

    def content_digest(self) -> str:
        return self.src.content_digest()

    def select_classes(self, classes: Sequence[str]) -> None:
        self.src.select_classes(classes)

    def videos(self, name: str, level: int) -> list[Video]:
        return [Video(it.key, it.label, it.path) for it in self.src.items(CLEAN)]

    def blocks(
        self, name: str, level: int, todo: list[Video], *, seed: int, device: torch.device, group: int
    ) -> Iterator[VideoBlock]:
        for a in range(0, len(todo), group):
            arrays: list[np.ndarray] = []
            good: list[Video] = []
            bad: list[tuple[str, int, str]] = []
            for v in todo[a : a + group]:
                try:
                    if v.path is None:
                        raise OSError("no file")
                    arrays.append(np.asarray(load_image_rgb(v.path)))
                    good.append(v)
                except DECODE_ERRORS as e:
                    if self.bad_images == "fail":
                        raise ImageReadError(str(v.path), f"{type(e).__name__}: {e}") from e
                    bad.append((v.key, v.label, f"{type(e).__name__}: {e}"))
            if bad:
                yield VideoBlock([], [], 0, None, bad)
            if not good:
                continue
            prep = prepare(arrays, self.edition)
            for f0, frames in perturb_chunks(prep, name, level, seed=seed, device=device):
                yield VideoBlock([v.key for v in good], [v.label for v in good], f0, frames)


def _spread_videos(videos: list[Video], limit: int | None) -> list[Video]:
    return spread_evenly(videos, limit)


class _ReleasedMP4(VideoSource):
    """A released ImageNet-P / Tiny-ImageNet-P tree: ``<root>/<p>[_<d>]/<wnid>/<file>.mp4``."""

    kind = "released-p-mp4"
    on_the_fly = False

    def __init__(
        self,
        root: Path,
        runs: Sequence[tuple[str, int]],
        *,
        edition: str | None,
        limit: int | None,
        bad_images: str,
    ) -> None:
        self.root = root
        self.limit = limit
        self.bad_images = bad_images
        folders = {folder_name(n, lvl) for n, lvl in runs}
        missing = sorted(f for f in folders if not (root / f).is_dir())
        if missing:
            present = sorted(p.name for p in root.iterdir() if p.is_dir())
            raise IncompleteDatasetError(
                "--released",
                str(root),
                missing,
                "one <perturbation>[_<difficulty>] folder of <wnid>/<file>.mp4 videos per requested perturbation "
                "and noise difficulty",
                f"Present folders: {', '.join(present) or 'none'}. Pass --perturbations / --difficulties to "
                "evaluate only what is present (mFR / mT5D then stay undefined).",
            )
        self._files: dict[str, list[tuple[str, Path]]] = {}
        wnids: set[str] = set()
        empty: list[str] = []
        for f in sorted(folders):
            files = [
                (d.name, p)
                for d in sorted((root / f).iterdir())
                if d.is_dir() and not d.name.startswith(".")
                for p in sorted(d.glob("*.mp4"))
            ]
            if not files:
                empty.append(f"{f} (no .mp4 videos)")
            self._files[f] = files
            wnids.update(w for w, _ in files)
        if empty:
            raise IncompleteDatasetError("--released", str(root), empty, "<wnid>/<file>.mp4 videos in every folder")
        self.classes = tuple(sorted(wnids))
        self._keep: set[str] | None = None
        detected = self._detect_edition(runs)
        if edition is not None and detected != edition:
            raise InvalidArgumentError(
                "edition", edition, f"the edition of the released videos (edition {detected}, from their frame size)"
            )
        if detected == "32":
            raise InvalidArgumentError(
                "released", str(root), "an ImageNet-P (224 / 299) or Tiny-ImageNet-P (64) MP4 tree, or a CIFAR-P .npy folder",
                "32 x 32 videos: CIFAR-P is released as <perturbation>.npy arrays.",
            )
        self.edition = detected
        self.location = str(root.resolve())
        self.identity = f"{self.kind}:{self.location}:limit={limit}"

    def _detect_edition(self, runs: Sequence[tuple[str, int]]) -> str:
        order = sorted(runs, key=lambda r: r[0] == "motion_blur")  # Tiny motion blur keeps the aspect ratio
        name, lvl = order[0]
        files = self._files[folder_name(name, lvl)]
        frame = None
        for _, path in files[:20]:  # the first video that decodes (a corrupt one is reported when it is read)
            cap = cv2.VideoCapture(str(path))
            try:
                ok, frame = cap.read()
            finally:
                cap.release()
            if ok and frame is not None:
                break
            frame = None
        if frame is None:
            raise CorruptVideoError(str(files[0][1]), "OpenCV cannot decode the first frame of any of the first videos")
        h, w = frame.shape[:2]
        side = min(h, w) if name == "motion_blur" else (h if h == w else -1)
        if side not in _EDITION_BY_SIDE:
            raise InvalidArgumentError(
                "released", str(path), "videos of 224 x 224, 299 x 299 or 64 x 64 frames", f"Its frames are {w} x {h}."
            )
        return _EDITION_BY_SIDE[side]

    def select_classes(self, classes: Sequence[str]) -> None:
        self._keep = set(classes)
        self.identity = f"{self.kind}:{self.location}:limit={self.limit}:classes={digest(sorted(classes))}"

    def videos(self, name: str, level: int) -> list[Video]:
        index = {c: i for i, c in enumerate(self.classes)}
        out = [
            Video(f"{w}/{p.name}", index[w], p)
            for w, p in self._files[folder_name(name, level)]
            if self._keep is None or w in self._keep
        ]
        return _spread_videos(out, self.limit)

    def blocks(
        self, name: str, level: int, todo: list[Video], *, seed: int, device: torch.device, group: int
    ) -> Iterator[VideoBlock]:
        spec = get_perturbation(name)
        t = spec.frames(self.edition)
        s = _SIZES[self.edition]
        loose = self.edition == "64" and spec.name == "motion_blur"
        for v in todo:
            try:
                a = read_video(v.path or "", frames=t, min_side=s) if loose else read_video(v.path or "", frames=t, size=(s, s))
            except CorruptVideoError as e:
                if self.bad_images == "fail":
                    raise
                yield VideoBlock([], [], 0, None, [(v.key, v.label, e.reason)])
                continue
            x = torch.from_numpy(np.ascontiguousarray(a.transpose(0, 3, 1, 2)))[None]
            yield VideoBlock([v.key], [v.label], 0, x)


class _ReleasedNpy(VideoSource):
    """CIFAR-10-P / CIFAR-100-P: ``<root>/<p>.npy`` (N, T, 32, 32, 3), labels from ``labels.npy`` if present."""

    kind = "released-p-npy"
    on_the_fly = False

    def __init__(self, root: Path, runs: Sequence[tuple[str, int]], *, edition: str | None, limit: int | None) -> None:
        if edition is not None and edition != "32":
            raise InvalidArgumentError("edition", edition, "32 (or none) for CIFAR-P .npy data")
        self.root = root
        self.limit = limit
        missing = sorted({cifar_p_path(root, n, lvl).name for n, lvl in runs if not cifar_p_path(root, n, lvl).is_file()})
        if missing:
            present = sorted(p.name for p in root.glob("*.npy"))
            raise IncompleteDatasetError(
                "--released",
                str(root),
                missing,
                "one <perturbation>[_<difficulty>].npy per requested perturbation and noise difficulty (CIFAR-P layout)",
                f"Present: {', '.join(present) or 'no .npy files'}. Pass --perturbations / --difficulties to evaluate "
                "only what is present.",
            )
        self._arrays = {(n, lvl): read_cifar_p(root, n, lvl) for n, lvl in runs}
        sizes = {a.shape[0] for a in self._arrays.values()}
        if len(sizes) != 1:
            raise DataError(
                f"--released {str(root)!r}: the .npy files hold different numbers of videos "
                f"({', '.join(f'{k[0]}: {v.shape[0]}' for k, v in self._arrays.items())})"
            )
        self.n = sizes.pop()
        lab_path = root / "labels.npy"
        self._labels = np.full(self.n, -1, dtype=np.int64)
        self.has_labels = False
        if lab_path.is_file():
            lab = np.load(lab_path, allow_pickle=False)
            if lab.ndim != 1 or lab.shape[0] != self.n or not np.issubdtype(lab.dtype, np.integer):
                raise DataError(f"{str(lab_path)!r}: expected {self.n} integer labels, got {lab.dtype} {lab.shape}")
            self._labels = lab.astype(np.int64)
            self.has_labels = True
        k = int(self._labels.max()) + 1 if self.has_labels else 10
        k = 10 if k <= 10 else 100 if k <= 100 else k
        self.classes = tuple(str(i) for i in range(k))
        self._keep: set[int] | None = None
        self.edition = "32"
        self.location = str(root.resolve())
        self.identity = f"{self.kind}:{self.location}:n={self.n}:limit={limit}"

    def __getstate__(self) -> dict[str, Any]:
        # sent to Ray workers without the (memory-mapped) arrays: each worker maps the files itself
        return {k: v for k, v in self.__dict__.items() if k != "_arrays"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._arrays = {}

    def _array(self, name: str, level: int) -> np.ndarray:
        if (name, level) not in self._arrays:
            self._arrays[(name, level)] = read_cifar_p(self.root, name, level)
        return self._arrays[(name, level)]

    def select_classes(self, classes: Sequence[str]) -> None:
        self._keep = {self.classes.index(c) for c in classes if c in self.classes}

    def videos(self, name: str, level: int) -> list[Video]:
        out = [
            Video(f"{i:05d}", int(self._labels[i]), None, i)
            for i in range(self.n)
            if self._keep is None or int(self._labels[i]) in self._keep
        ]
        return _spread_videos(out, self.limit)

    def blocks(
        self, name: str, level: int, todo: list[Video], *, seed: int, device: torch.device, group: int
    ) -> Iterator[VideoBlock]:
        arr = self._array(name, level)
        for a in range(0, len(todo), group):
            chunk = todo[a : a + group]
            x = torch.from_numpy(np.ascontiguousarray(arr[[v.row for v in chunk]].transpose(0, 1, 4, 2, 3)))
            yield VideoBlock([v.key for v in chunk], [v.label for v in chunk], 0, x)


def _open_released(
    path: str | Path, runs: Sequence[tuple[str, int]], *, edition: str | None, limit: int | None, bad_images: str
) -> VideoSource:
    p = Path(path)
    if not p.exists():
        raise DataError(
            f"--released {str(p)!r} does not exist: expected a released ImageNet-P / Tiny-ImageNet-P tree "
            "(<root>/<perturbation>/<wnid>/<file>.mp4) or a CIFAR-10-P / CIFAR-100-P folder (<perturbation>.npy)"
        )
    if not p.is_dir():
        raise DataError(
            f"--released {str(p)!r} is not a folder: expected the root of a released ImageNet-P tree or a CIFAR-P folder"
        )
    if any(p.glob("*.npy")) and not any(c.is_dir() for c in p.iterdir()):
        return _ReleasedNpy(p, runs, edition=edition, limit=limit)
    return _ReleasedMP4(p, runs, edition=edition, limit=limit, bad_images=bad_images)


# -- the model side --------------------------------------------------------------------------


class FrameSource(Source):
    """An ImageNet-P source as a source of the shared loop (:func:`run_conditions`).

    Conditions are ``(perturbation, level)``, items are videos. Batches hold the frames of the
    pending videos of one condition, ``batch_size`` frames each, in the order the videos'
    blocks come (a few videos per block); frames of another size (Tiny-ImageNet-P motion
    blur) start a new batch, and each condition's last batch may be shorter.
    """

    def __init__(self, src: VideoSource, frames: Mapping[Condition, int], device: torch.device) -> None:
        self.src, self.frames, self.device = src, dict(frames), device
        self.videos: dict[Condition, list[Video]] = {}
        self.kind, self.location, self.edition, self.on_the_fly = src.kind, src.location, src.edition, src.on_the_fly

    @property
    def identity(self) -> str:  # type: ignore[override]
        return self.src.identity

    @property
    def classes(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.src.classes

    def content_digest(self) -> str:
        return self.src.content_digest()

    def conditions(self) -> list[Condition]:
        return list(self.frames)

    def items(self, condition: Condition) -> list[Item]:
        if condition not in self.videos:  # listed once the label space has chosen the classes
            self.videos[condition] = self.src.videos(condition[0], condition[1])
        return [Item(v.key, v.label, v.path) for v in self.videos[condition]]

    def select_classes(self, classes: Sequence[str]) -> None:
        self.src.select_classes(classes)
        self.videos.clear()

    def batches(
        self,
        pending: Mapping[Condition, set[str]],
        *,
        batch_size: int,
        seed: int,
        release: bool,
        stop: threading.Event | None = None,
    ) -> Iterator[WorkBatch]:
        for cond in self.frames:
            want = pending.get(cond) or set()
            if not want:
                continue
            self.items(cond)
            videos = self.videos[cond]
            todo = [v for v in videos if v.key in want]
            if not todo:
                continue
            t = self.frames[cond]
            buf: list[torch.Tensor] = []
            where: list[tuple[str, int, int]] = []

            def take(n: int) -> WorkBatch:
                nonlocal buf, where
                x = torch.cat(buf) if len(buf) > 1 else buf[0]
                rows, where = where[:n], where[n:]
                buf = [x[n:]] if x.shape[0] > n else []
                return WorkBatch(cond, [k for k, _, _ in rows], torch.tensor([lab for _, lab, _ in rows],  # noqa: B023 (called inside this iteration only)
                                 dtype=torch.int64), x[:n], frames=[f for _, _, f in rows])  # fmt: skip

            group = max(1, math.ceil(2 * batch_size / t))
            for block in self.src.blocks(cond[0], cond[1], todo, seed=seed, device=self.device, group=group):
                if stop is not None and stop.is_set():
                    return
                if block.skipped:
                    yield WorkBatch(cond, [], torch.zeros(0, dtype=torch.int64), torch.zeros((0, 3, 1, 1),
                                    dtype=torch.uint8), [(k, r) for k, _, r in block.skipped])  # fmt: skip
                if block.frames is None or not block.keys:
                    continue
                x = block.frames
                if buf and tuple(buf[-1].shape[1:]) != tuple(x.shape[2:]):
                    yield take(len(where))  # frames of another size cannot share a batch
                for i, (key, lab) in enumerate(zip(block.keys, block.labels, strict=True)):
                    where.extend((key, int(lab), block.first + j) for j in range(int(x.shape[1])))
                    buf.append(x[i])
                while len(where) >= batch_size:
                    yield take(batch_size)
            if where:
                yield take(len(where))


class VideoRecords:
    """ImageNet-P's records: the top-5 classes of every frame of a video, stored once all its frames are ranked.

    A video's label is its label in the label space (-1: none). ``write`` returns the videos it stored
    (the driver marks a run complete as soon as its last pending video is stored).
    """

    def __init__(self, ctx: Any) -> None:
        self.db, self.clf, self.run_ids, self.frames = ctx.db, ctx.classifier, ctx.run_ids, ctx.frames
        self.labels = {c: {it.key: int(ctx.label_maps[c][it.label]) if it.label >= 0 else int(it.label) for it in its}
                       for c, its in ctx.items.items()}
        self.top5: dict[tuple[Condition, str], np.ndarray] = {}
        self.count: dict[tuple[Condition, str], int] = {}

    def write(self, condition: Condition, batch: WorkBatch, labels: np.ndarray, logits: torch.Tensor | None) -> list[str]:
        rid, t = self.run_ids[condition], self.frames[condition]
        stored = [k for k, _ in batch.skipped]
        if batch.skipped:
            self.db.write_sequences(rid, [], [(k, self.labels[condition][k], r) for k, r in batch.skipped])
        if logits is None:
            return stored
        if logits.shape[1] < 5:
            raise InvalidArgumentError(
                "model", self.clf.name, "a classifier with at least 5 classes (ImageNet-P ranks the top 5)"
            )
        top = top5_from_logits(logits.to(torch.float64))
        done: list[str] = []
        for key, f, row in zip(batch.keys, batch.frames or [], top, strict=True):
            k = (condition, key)
            if k not in self.top5:
                self.top5[k] = np.zeros((t, 5), dtype=np.int64)
                self.count[k] = 0
            self.top5[k][f] = row
            self.count[k] += 1
            if self.count[k] == t:
                done.append(key)
        if done:
            lab = self.labels[condition]
            self.db.write_sequences(rid, [(key, lab[key], self.top5[(condition, key)]) for key in done])
            for key in done:
                del self.top5[(condition, key)], self.count[(condition, key)]
        return stored + done


# -- scores from the store -------------------------------------------------------------------


def scores_from_store(
    db: ResultsStore,
    evaluation_id: int,
    difficulties: Sequence[int],
    *,
    edition: str,
    perturbations: Sequence[str] | None = None,
    baseline: PBaseline | Mapping[int, PBaseline] | bool | None = None,
    complete_only: bool = True,
) -> tuple[dict[tuple[str, int], SequenceScores], dict[int, PSummary], dict[tuple[str, int], int]]:
    """Every ImageNet-P score of an evaluation, recomputed from its stored top-5 lists.

    Returns:
        ``(scores by (perturbation, difficulty), summaries by difficulty,
        skipped videos by (perturbation, difficulty))``.
    """
    scores: dict[tuple[str, int], SequenceScores] = {}
    skipped: dict[tuple[str, int], int] = {}
    wanted = None if perturbations is None else set(perturbations)
    runs = {(r.condition, r.level): r for r in db.p_runs(evaluation_id)}
    names = [n for n in list_perturbations("all") if any(k[0] == n for k in runs)]
    for name in names:
        if wanted is not None and name not in wanted:
            continue
        spec = get_perturbation(name)
        for d in difficulties:
            run = runs.get((name, d if spec.noise else 1))
            if run is None or (complete_only and run.status != "complete"):
                continue
            if not spec.noise and run.frames <= d:
                continue
            _, labels, top5, sk = db.p_top5(run.id)
            if top5.shape[0] == 0:
                continue
            lab = labels if bool((labels >= 0).all()) else None
            scores[(name, d)] = score_top5(top5, name, d, labels=lab, edition=edition, baseline=baseline)
            skipped[(name, d)] = len(sk)
    summaries = {d: summarize_p(scores.values(), d) for d in difficulties}
    return scores, summaries, skipped


def stored_p_baseline(db: ResultsStore, spec: str, *, edition: str) -> dict[int, PBaseline]:
    """A stored ImageNet-P evaluation (``eval:<id>`` or a model name) as FR / T5D baseline, per difficulty.

    Raises:
        InvalidArgumentError / UnknownNameError: no such stored ImageNet-P evaluation, or several.
    """
    evs = [e for e in db.evaluations() if e.benchmark == BENCHMARK]
    s = spec.strip()
    if s.startswith(("eval:", "#")):
        try:
            eid = int(s.split(":", 1)[1] if s.startswith("eval:") else s[1:])
        except ValueError as e:
            raise InvalidArgumentError("baseline", spec, "'eval:<id>' with a numeric id") from e
        cands = [e for e in evs if e.id == eid]
        if not cands:
            raise InvalidArgumentError(
                "baseline", spec, "the id of a stored ImageNet-P evaluation (see `shiftbench results`)"
            )
    else:
        from ..checks import suggest

        names = sorted({e.model for e in evs})
        cands = [e for e in evs if e.model == s and e.edition == edition]
        if not cands:
            raise UnknownNameError("baseline", spec, ["alexnet", "none", *names], suggest(s, names))
        if len(cands) > 1:
            raise InvalidArgumentError(
                "baseline",
                spec,
                "a model with one stored ImageNet-P evaluation of this edition, or one evaluation id",
                f"{s!r} has evaluations {', '.join('eval:' + str(e.id) for e in cands)}; pass one of them.",
            )
    ev = cands[0]
    if ev.edition != edition:
        raise InvalidArgumentError("baseline", spec, f"an ImageNet-P evaluation of edition {edition}, not {ev.edition}")
    scores, _, _ = scores_from_store(db, ev.id, [1, 2, 3], edition=edition, baseline=False)
    out: dict[int, PBaseline] = {}
    for (name, d), sc in scores.items():
        b = out.setdefault(d, PBaseline(ev.model, {}, {}, edition, d, f"results store {db.path}, evaluation {ev.id}"))
        b.fp[name] = sc.fp  # type: ignore[index]
        b.ut5d[name] = sc.ut5d  # type: ignore[index]
    if not out:
        raise InvalidArgumentError("baseline", spec, "a stored ImageNet-P evaluation with complete runs")
    for b in out.values():
        for name in list(b.fp):
            if b.fp[name] == 0 or b.ut5d[name] == 0:  # a zero cannot normalise
                del b.fp[name], b.ut5d[name]  # type: ignore[attr-defined]
    return out


def _resolve_baseline(
    spec: str | PBaseline | Mapping[int, PBaseline] | None, db: ResultsStore, edition: str
) -> tuple[PBaseline | Mapping[int, PBaseline] | bool, str, str | None]:
    """``(argument for score_top5, name, reason when there is none)``."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "none"):
        return False, "", "no baseline requested"
    if isinstance(spec, PBaseline):
        return spec, spec.name, None
    if isinstance(spec, Mapping):
        return spec, next(iter(spec.values())).name if spec else "", None
    if not isinstance(spec, str):
        raise InvalidArgumentError("baseline", spec, "'alexnet', 'none', a stored model name or 'eval:<id>'")
    if spec.strip().lower() == "alexnet":
        a = alexnet_p_baseline()
        if edition != a.edition:
            return False, "", (
                f"published AlexNet flip probabilities exist for the {a.edition} edition only, not {edition}; "
                "pass --baseline with a model evaluated in the store on the same data to normalise"
            )
        return {a.difficulty: a}, a.name, None
    b = stored_p_baseline(db, spec, edition=edition)
    return b, next(iter(b.values())).name, None


# -- the evaluation -----------------------------------------------------------------------------


@dataclass
class PEvaluationResult(Summary):
    """What an ImageNet-P evaluation did and the scores recomputed from the store.

    Attributes:
        evaluation_id: the evaluation's id in the store; ``store_path`` the store (None: a temporary one).
        model, model_checksum: the model.
        data: a description of the data.
        edition, seed: of the sequences (seed None for released data).
        perturbations, difficulties: what was asked for.
        scores: (perturbation, difficulty) -> :class:`SequenceScores` (complete runs only).
        summaries: difficulty -> :class:`PSummary` (mFR / mT5D / mean FP).
        runs: the stored runs of the requested perturbations.
        skipped: (perturbation, difficulty) -> unreadable videos left out.
        baseline, baseline_source: the FR / T5D normalisation (empty: none).
        new_videos: videos scored by this call (0: all reused from the store).
        n_videos: videos per perturbation (largest count over the runs).
        on_the_fly, demo: kind of data.
        notes: sentences a report must print.
    """

    HEADLINE = (Metric("mfr", "lower", "mFR"), Metric("mt5d", "lower", "mT5D"), Metric("mean_fp", "lower", "mean FP"))

    evaluation_id: int
    store_path: Path | None
    model: str
    model_checksum: str
    data: str
    edition: str
    seed: int | None
    perturbations: list[str]
    difficulties: list[int]
    scores: dict[tuple[str, int], SequenceScores]
    summaries: dict[int, PSummary]
    runs: list[RunInfo]
    skipped: dict[tuple[str, int], int]
    baseline: str
    baseline_source: str
    new_videos: int
    n_videos: int
    on_the_fly: bool
    demo: bool
    label_space: str
    notes: list[str] = field(default_factory=list)

    def _first(self, key: str) -> float | None:
        s = self.summaries.get(self.difficulties[0]) if self.difficulties else None
        v = getattr(s, key, None) if s is not None else None
        return None if v is None else float(v)

    @property
    def mfr(self) -> float | None:
        """mFR at the first difficulty asked for."""
        return self._first("mfr")

    @property
    def mt5d(self) -> float | None:
        """mT5D at the first difficulty asked for."""
        return self._first("mt5d")

    @property
    def mean_fp(self) -> float | None:
        """Mean flip probability at the first difficulty asked for."""
        return self._first("mean_fp")


def p_plan(s: Any, clf: Classifier) -> Plan:
    """ImageNet-P's plan for the evaluation driver from its settings (``s``: the benchmark's Settings)."""
    ed = get_edition(s.edition).name if s.edition is not None else None
    diffs = parse_difficulties(s.difficulties)
    names = resolve_perturbations(s.perturbations, ed or "224")
    runs = list(dict.fromkeys((n, d if get_perturbation(n).noise else 1) for n in names for d in diffs))
    src: VideoSource
    if s.released is not None:
        src = _open_released(s.released, runs, edition=ed, limit=s.limit, bad_images=s.bad_images)
        ed = src.edition
        names = resolve_perturbations(names, ed)
    else:
        ed = ed or "224"
        folder = (foolbox_imagenet(edition=ed, limit=s.limit, bad_images=s.bad_images) if s.data is None
                  else ImageFolderSource(s.data, edition=ed, limit=s.limit, bad_images=s.bad_images))
        src = _OnTheFly(folder, ed)
    model_classes = clf.classes
    data_classes: Sequence[str] = src.classes
    if not src.has_labels:  # CIFAR-P without labels: the model's own outputs
        if model_classes is None:
            width = int(clf.logits(torch.zeros((1, 3, _SIZES[ed], _SIZES[ed]), dtype=torch.uint8)).shape[1])
            model_classes = tuple(str(i) for i in range(width))
        data_classes = model_classes
    # Tiny-ImageNet-P: restrict to the data's classes by default (as for Tiny-ImageNet-C), unless fewer than
    # the 5 that a top-5 list needs.
    default_mode = ("data" if ed == "64" and model_classes is not None and 5 <= len(data_classes) < len(model_classes)
                    else "model")
    frames = {r: get_perturbation(r[0]).frames(ed) for r in runs}
    fsrc = FrameSource(src, frames, clf.device)

    def describe(c: Condition) -> str:
        return c[0] if not get_perturbation(c[0]).noise or len(diffs) == 1 else f"{c[0]} d{c[1]}"

    return Plan(
        [Planned(r, fsrc, r[0], r[1], frames[r]) for r in runs], ed, seed=check_seed(s.seed),
        stored_seed=s.seed if src.on_the_fly else -1, classes=s.classes, default_space=default_mode,
        data_classes=data_classes, model_classes=clf.classes,
        label_map=None if src.has_labels else np.arange(len(data_classes), dtype=np.int64),
        check_absent=src.has_labels, writer=VideoRecords, describe=describe,
        source_record=lambda: (src.kind, src.identity, src.location, src.classes), versions=("av",), prefetch=False,
        context={"names": names, "difficulties": diffs, "runs": runs, "data": src, "edition": ed,
                 "demo": s.data is None and s.released is None},
    )


def _baseline_notes(baseline: Any, norm: Any, base_name: str, why_not: str | None, diffs: list[int]) -> tuple[str, list[str]]:
    notes: list[str] = []
    base_source = ""
    if why_not and not (isinstance(baseline, str) and baseline.strip().lower() == "none"):
        notes.append(f"FR and T5D not normalised: {why_not}.")
    elif base_name:
        base_source = (
            alexnet_p_baseline().source
            if base_name == "AlexNet" and isinstance(baseline, str) and baseline.strip().lower() == "alexnet"
            else next(iter(norm.values())).source if isinstance(norm, Mapping) and norm else ""
        )
        missing_d = [d for d in diffs if not (isinstance(norm, Mapping) and d in norm)]
        if missing_d:
            notes.append(
                f"No {base_name} numbers for difficulty {', '.join(map(str, missing_d))}: FR / T5D there stay "
                "unnormalised (flip probabilities and uT5D only)."
            )
    return base_source, notes


def p_result(db: ResultsStore, ev: Any, baseline: Any) -> PEvaluationResult:
    """ImageNet-P's scores of an evaluation the driver ran, recomputed from the store."""
    c, clf = ev.plan.context, ev.classifier
    ed, diffs, names, src = c["edition"], c["difficulties"], c["names"], c["data"]
    norm, base_name, why_not = _resolve_baseline(baseline, db, ed)
    scores, summaries, skipped = scores_from_store(db, ev.id, diffs, edition=ed, perturbations=names, baseline=norm)
    all_runs = {(r.condition, r.level): r for r in db.p_runs(ev.id)}
    my_runs = [all_runs[k] for k in c["runs"] if k in all_runs]
    base_source, notes = _baseline_notes(baseline, norm, base_name, why_not, diffs)
    incomplete = [r for r in my_runs if r.status != "complete"]
    if incomplete:
        notes.append(
            "Incomplete runs left out: "
            + ", ".join(f"{r.condition} level {r.level} ({r.n_predicted + r.n_skipped}/{r.n_expected})" for r in incomplete)
            + "."
        )
    n_skipped = sum(r.n_skipped for r in my_runs)
    if n_skipped:
        notes.append(f"{n_skipped} video(s) could not be read and were left out (listed in the store).")
    return PEvaluationResult(
        evaluation_id=ev.id, store_path=ev.store, model=clf.name, model_checksum=clf.checksum, data=src.describe(),
        edition=ed, seed=ev.plan.seed if src.on_the_fly else None, perturbations=names, difficulties=diffs,
        scores=scores, summaries=summaries, runs=my_runs, skipped=skipped, baseline=base_name,
        baseline_source=base_source, new_videos=ev.written, n_videos=max((r.n_predicted for r in my_runs), default=0),
        on_the_fly=src.on_the_fly, demo=c["demo"], label_space=f"{ev.space.mode} ({len(ev.space.classes)} classes)",
        notes=notes,
    )
