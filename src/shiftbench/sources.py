"""CIFAR-style array sources for ``generate --src``; image folders are read by :mod:`shiftbench.io`."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import safe_pickle
from .errors import DataError, ImageFileError
from .io import (
    IMAGE_EXTENSIONS,
    ImageRecord,
    check_cifar100_labels,
    image_array,
    label_array,
    load_image_rgb,
    scan_image_folder,
)

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

    Accepted: a ``.npy`` array (N x H x W x 3; labels from ``labels_path``
    or zeros), an ``.npz`` with ``images``/``data`` and ``labels``, or the CIFAR-10
    / CIFAR-100 "python version" (``cifar-10-batches-py`` folder or its
    ``test_batch`` file; ``cifar-100-python`` folder or its ``test`` file).
    Pixels and labels are checked by :func:`shiftbench.io.image_array` and
    :func:`shiftbench.io.label_array` (CIFAR-100's fine and coarse labels also against
    the fixed superclass map): a typed error naming the file, never a silent cast.
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
    fine_coarse: tuple[Any, Any] | None = None
    src = repr(str(p))
    if p.suffix == ".npy":
        images = _load_npy(p)
    elif p.suffix == ".npz":
        try:
            with open(p, "rb") as fh, np.load(fh, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:  # object arrays would need pickle: refused
            raise DataError(f"--src {src}: not a readable .npz of plain arrays (allowed: numeric 'images' or "
                            f"'data' and integer 'labels'; object arrays are never unpickled): {e}") from None  # fmt: skip
        key = "images" if "images" in arrays else "data" if "data" in arrays else None
        if key is None:
            raise DataError(f"{src}: expected arrays 'images' (or 'data') and 'labels' in the .npz (has {sorted(arrays)})")
        images = arrays[key]
        labels = arrays.get("labels")
        src = f"{src}[{key!r}]"
    elif p.name in _CIFAR_FILES:
        d = safe_pickle.load_file(p, encoding="bytes")
        if not isinstance(d, dict):
            raise DataError(f"{src} is not a CIFAR python batch file (a pickled dict)")
        data = d.get(b"data")
        if data is None:
            raise DataError(f"{src} has no b'data' entry (not a CIFAR python batch)")
        data = np.asarray(data) if isinstance(data, np.ndarray) else data
        if not isinstance(data, np.ndarray) or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            shape = data.shape if isinstance(data, np.ndarray) else type(data).__name__
            raise ImageFileError(f"{src}: b'data' of shape {shape}; allowed: N x 3072 (32 x 32 RGB planes)")
        images = image_array(data.reshape(-1, 3, 32, 32), f"{src} b'data'", layout="NCHW").transpose(0, 2, 3, 1)
        lab = d.get(b"labels", d.get(b"fine_labels"))
        labels = lab
        if b"fine_labels" in d and b"coarse_labels" in d:
            fine_coarse = (d[b"fine_labels"], d[b"coarse_labels"])
    else:  # never unpickle a file whose layout was not asked for
        raise DataError(
            f"--src {str(p)!r} is not an accepted array source: allowed a .npy or .npz array, a CIFAR python "
            "folder (holding test_batch or test) or its 'test_batch' / 'test' file, or a folder of images"
        )
    if labels_path is not None:
        labels = _load_npy(Path(labels_path), "--labels")
        lsrc = repr(str(labels_path))
    else:
        lsrc = src
    images = image_array(images, src)
    if labels is None:
        labels = np.zeros(len(images), dtype=np.int64)
    labels = label_array(labels, len(images), f"{lsrc} labels")
    if fine_coarse is not None:
        fine = label_array(fine_coarse[0], len(images), f"{src} fine_labels", classes=100)
        coarse = label_array(fine_coarse[1], len(images), f"{src} coarse_labels", classes=20)
        check_cifar100_labels(fine, coarse, src)
    return ArraySource(images, labels, str(p))


def _load_npy(p: Path, arg: str = "--src") -> np.ndarray:
    """A plain (never pickled) array from a .npy file, or a :class:`DataError` naming it."""
    try:
        with open(p, "rb") as fh:
            return np.load(fh, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise DataError(f"{arg} {str(p)!r}: not a readable .npy of a plain array (object arrays are never "
                        f"unpickled): {e}") from None  # fmt: skip
