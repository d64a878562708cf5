"""CIFAR-style array sources for ``generate --src``; image folders are read by :mod:`shiftbench.io`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import safe_pickle
from .errors import DataError, InvalidArgumentError
from .io import IMAGE_EXTENSIONS, ImageRecord, load_image_rgb, scan_image_folder

# the image-folder names stay importable from here; their home is shiftbench.io
__all__ = [
    "IMAGE_EXTENSIONS",
    "ImageRecord",
    "scan_image_folder",
    "load_image_rgb",
    "load_array_source",
    "ArraySource",
]


@dataclass
class ArraySource:
    """CIFAR-style images held in memory: N x 32 x 32 x 3 uint8 and N labels."""

    images: np.ndarray
    labels: np.ndarray
    origin: str


_CIFAR_FILES = ("test_batch", "test")
"""The CIFAR-10 / CIFAR-100 "python version" test files: the only files read as (restricted) pickles."""


def load_array_source(path: str | Path, labels_path: str | Path | None = None) -> ArraySource:
    """Read CIFAR-style test images.

    Accepted: a ``.npy`` array (N x 32 x 32 x 3 uint8; labels from ``labels_path``
    or zeros), an ``.npz`` with ``images``/``data`` and ``labels``, or the CIFAR-10
    / CIFAR-100 "python version" (``cifar-10-batches-py`` folder or its
    ``test_batch`` file; ``cifar-100-python`` folder or its ``test`` file).
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"--src {str(p)!r} does not exist")
    if p.is_dir():
        for cand in (p / "test_batch", p / "test"):
            if cand.is_file():
                p = cand
                break
        else:
            raise DataError(f"--src {str(p)!r}: no CIFAR 'test_batch' or 'test' file inside")
    labels: np.ndarray | None = None
    if p.suffix == ".npy":
        images = np.load(p)
    elif p.suffix == ".npz":
        z = np.load(p)
        key = "images" if "images" in z else "data" if "data" in z else None
        if key is None:
            raise DataError(f"{str(p)!r}: expected arrays 'images' (or 'data') and 'labels' in the .npz")
        images = z[key]
        labels = z["labels"] if "labels" in z else None
    elif p.name in _CIFAR_FILES:
        d = safe_pickle.load_file(p, encoding="bytes")
        if not isinstance(d, dict):
            raise DataError(f"{str(p)!r} is not a CIFAR python batch file (a pickled dict)")
        data = d.get(b"data")
        if data is None:
            raise DataError(f"{str(p)!r} has no b'data' entry (not a CIFAR python batch)")
        images = np.asarray(data, dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        lab = d.get(b"labels", d.get(b"fine_labels"))
        labels = np.asarray(lab, dtype=np.int64) if lab is not None else None
    else:  # never unpickle a file whose layout was not asked for
        raise DataError(
            f"--src {str(p)!r} is not an accepted array source: allowed a .npy or .npz array, a CIFAR python "
            "folder (holding test_batch or test) or its 'test_batch' / 'test' file, or a folder of images"
        )
    if labels_path is not None:
        labels = np.load(labels_path)
    images = np.ascontiguousarray(images)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise InvalidArgumentError("--src", f"array {images.dtype} {images.shape}", "uint8 N x H x W x 3 images")
    if labels is None:
        labels = np.zeros(len(images), dtype=np.int64)
    if len(labels) != len(images):
        raise InvalidArgumentError("--labels", f"{len(labels)} labels", f"one label per image ({len(images)})")
    return ArraySource(images, np.asarray(labels), str(p))
