"""Reading images and image folders: the one place every shiftbench command reads clean photographs.

``generate --src``, ``evaluate --data`` (ImageNet-C, ImageNet-P from photographs,
ImageNet-NOC) and the ImageNet validation row of ImageNet-D all list a folder of
photographs with :func:`scan_image_folder`, so they accept exactly the same layouts.

The image-folder rule
---------------------
Image files are those whose extension (any case) is in :data:`IMAGE_EXTENSIONS`.
Every name starting with ``.`` (hidden files, ``.DS_Store``, ``.ipynb_checkpoints``
folders, AppleDouble ``._x.jpg`` files) is ignored. A folder is then read as one of:

1. **class sub-folders** (torchvision's ImageFolder): ``<root>/<class>/<image>``.
   Classes are the sub-folder names, sorted; labels are their indices. Images are
   read one level deep (nested folders inside a class folder are not entered).
   An image's key is ``"<class>/<file>"``.
2. **flat wnid files**: ``<root>/<wnid>_<anything>.<ext>`` (also ``<wnid>.<ext>``
   or ``<wnid>-...``), where ``<wnid>`` is a WordNet id ``n`` + 8 digits, as the
   ImageNet training archives name them. Classes are the distinct wnids, sorted;
   an image's key is its file name.

Anything else is refused with a :class:`~shiftbench.errors.DataError` naming the
folder and the expected layouts: a missing or empty folder, loose images whose
names are not all ``<wnid>_...`` files, or class sub-folders *and* loose images
side by side (it would be a guess which of the two is meant).

Keys are stable: they identify an image in the results store and are independent
of where the folder lies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from .errors import DataError

__all__ = [
    "IMAGE_EXTENSIONS",
    "DECODE_ERRORS",
    "ImageRecord",
    "is_image_file",
    "load_image_rgb",
    "scan_image_folder",
]

IMAGE_EXTENSIONS = (".jpeg", ".jpg", ".png", ".bmp", ".webp", ".ppm", ".tif", ".tiff")
"""Extensions (lower case) read as images."""

DECODE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    SyntaxError,
    EOFError,
    Image.DecompressionBombError,
)
"""What Pillow raises for an unreadable, truncated or hostile image file (caught by ``bad_images="skip"``)."""

FLAT_WNID = re.compile(r"^(n\d{8})(?:[_.-])")
"""A flat-layout file name: a WordNet id followed by ``_``, ``.`` or ``-``."""

_LAYOUTS = "<root>/<class>/<image> (class sub-folders) or <root>/<wnid>_<name>.<ext> files"


@dataclass(frozen=True)
class ImageRecord:
    """One image of a scanned folder.

    Attributes:
        path: the file.
        key: its stable id: ``"<class>/<file>"`` for class sub-folders, the file name for flat files.
        class_name: the class (folder name or wnid).
        label: index of ``class_name`` in the sorted class list.
    """

    path: Path
    key: str
    class_name: str
    label: int

    @property
    def relpath(self) -> str:
        """Its place in a class tree, ``"<class>/<file>"`` (POSIX), whatever the layout it was read from."""
        return f"{self.class_name}/{self.path.name}"


def is_image_file(path: Path) -> bool:
    """A visible regular file with an image extension."""
    return not path.name.startswith(".") and path.suffix.lower() in IMAGE_EXTENSIONS and path.is_file()


def load_image_rgb(path: str | Path) -> Image.Image:
    """Open an image fully (so truncated files fail here, with one of :data:`DECODE_ERRORS`) and convert it to RGB."""
    with Image.open(path) as im:
        im.load()
        return im.convert("RGB")


def scan_image_folder(root: str | Path, *, arg: str = "--data") -> tuple[list[ImageRecord], list[str]]:
    """List a folder of photographs by the rule of this module's docstring.

    Args:
        root: the folder.
        arg: the option or argument that named it, for error messages (``--src``, ``--data``, ``data``).

    Returns:
        The records (sorted by class, then file name) and the sorted class names.

    Raises:
        DataError: the folder is missing, not a folder, holds no images, or fits neither layout.
    """
    root = Path(root)
    if not root.exists():
        raise DataError(f"{arg} {str(root)!r} does not exist: expected {_LAYOUTS}")
    if not root.is_dir():
        raise DataError(f"{arg} {str(root)!r} is not a folder: expected {_LAYOUTS}")
    entries = sorted(e for e in root.iterdir() if not e.name.startswith("."))
    loose = [e for e in entries if is_image_file(e)]
    folders = [e for e in entries if e.is_dir()]
    records: list[ImageRecord] = []
    classes: list[str] = []
    for d in folders:
        files = [f for f in sorted(d.iterdir()) if is_image_file(f)]
        if not files:
            continue
        label = len(classes)
        classes.append(d.name)
        records.extend(ImageRecord(f, f"{d.name}/{f.name}", d.name, label) for f in files)
    if records and loose:
        raise DataError(
            f"{arg} {str(root)!r} holds both class sub-folders ({len(classes)}) and {len(loose)} loose images "
            f"(e.g. {loose[0].name!r}): expected one layout, {_LAYOUTS}"
        )
    if records:
        return records, classes
    if loose:
        matches = [(f, FLAT_WNID.match(f.name)) for f in loose]
        odd = [f.name for f, m in matches if m is None]
        if odd:
            raise DataError(
                f"{arg} {str(root)!r} holds {len(loose)} images but no class sub-folders, and {len(odd)} of them "
                f"(e.g. {odd[0]!r}) are not named <wnid>_<name>.<ext>: expected {_LAYOUTS}"
            )
        wnids = sorted({m.group(1) for _, m in matches if m is not None})
        index = {w: i for i, w in enumerate(wnids)}
        flat = [ImageRecord(f, f.name, m.group(1), index[m.group(1)]) for f, m in matches if m is not None]
        flat.sort(key=lambda r: (r.label, r.key))
        return flat, wnids
    raise DataError(
        f"{arg} {str(root)!r} contains no images (extensions {', '.join(IMAGE_EXTENSIONS)}): expected {_LAYOUTS}"
    )
