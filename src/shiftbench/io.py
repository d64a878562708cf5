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
   read one level deep (nested folders inside a class folder are not entered),
   except Tiny-ImageNet's training layout ``<root>/<class>/images/<image>`` (a class
   folder whose images are all in its ``images`` sub-folder). A class folder holding
   no image but images deeper down is refused (never left out without a word).
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

The image reader
----------------
:func:`load_image_rgb` is the one function that turns an image file into 8-bit RGB, and
:func:`image_rgb` the one conversion of an opened image; every command that reads a photograph,
a style image, a structural dataset or the report's gallery photo uses them. Modes are handled as
:func:`shiftbench.corrupt` handles them: 8-bit modes (``L``, ``LA``, ``RGB``, ``RGBA``, ``P``,
``PA``, ``1``, ``CMYK``, ``RGBX``, ``La``, ``RGBa``) are converted by Pillow; 16-bit grayscale
(``I;16``, ``I;16B/L/N``) and ``I`` with values in 0..65535 are scaled (value / 65535, then rounded
to 0..255 as ``corrupt`` rounds float images); ``F`` with finite values in [0, 1] is scaled by 255.
16-bit colour PNG and TIFF files (RGB, RGBA, grey with alpha), which Pillow reads at 8 bits by keeping
the high byte of each value, are decoded again at 16 bits by OpenCV (``IMREAD_UNCHANGED``) and scaled
the same way (:func:`wide_levels`), so a 16-bit photograph gives the 8-bit picture its values describe.
Anything else (``I`` or ``F`` outside those ranges, ``LAB``, ``HSV``, ``YCbCr``, ...) is an
:class:`~shiftbench.errors.ImageFileError` naming the file, never a clipped or wrapped image.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from .errors import DataError, ImageFileError

__all__ = [
    "IMAGE_EXTENSIONS",
    "DECODE_ERRORS",
    "ImageRecord",
    "is_image_file",
    "load_image_rgb",
    "image_rgb",
    "wide_levels",
    "RGB_MODES",
    "image_array",
    "label_array",
    "check_cifar100_labels",
    "CIFAR100_COARSE_TO_FINE",
    "CIFAR100_FINE_TO_COARSE",
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


_MODES_8BIT = ("L", "LA", "RGB", "RGBA", "P", "PA", "1", "CMYK", "RGBX", "La", "RGBa")
_MODES_16BIT = ("I;16", "I;16B", "I;16L", "I;16N")
RGB_MODES = (*_MODES_8BIT, *_MODES_16BIT, "I", "F")
"""PIL modes :func:`image_rgb` converts (the modes :func:`shiftbench.corrupt` accepts)."""


def _levels(unit: np.ndarray) -> np.ndarray:
    """Values in [0, 1] to 8-bit levels, rounded as ``corrupt`` rounds float images (float32, half to even)."""
    return np.clip(np.round(unit.astype(np.float32) * np.float32(255.0)), 0, 255).astype(np.uint8)


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _sixteen_bit_file(im: Image.Image) -> str | None:
    """The file of an RGB / RGBA / LA image that Pillow read at 8 bits from 16-bit PNG or TIFF data, else None."""
    fname = getattr(im, "filename", None)
    if im.mode not in ("RGB", "RGBA", "LA") or not fname or im.format not in ("PNG", "TIFF"):
        return None
    if im.format == "TIFF":
        tags = getattr(im, "tag_v2", None)
        bits = tags.get(258) if tags is not None else None
        bits = bits if isinstance(bits, (tuple, list)) else (bits,)
        return str(fname) if bits and all(b == 16 for b in bits) else None
    try:
        with open(fname, "rb") as fh:
            head = fh.read(26)
    except OSError:
        return None
    # IHDR: bit depth at byte 24, colour type at byte 25 (2 RGB, 4 grey + alpha, 6 RGBA)
    if len(head) == 26 and head[:8] == _PNG_SIGNATURE and head[12:16] == b"IHDR" and head[24] == 16 and head[25] in (2, 4, 6):
        return str(fname)
    return None


def wide_levels(im: Image.Image, name: str = "image") -> np.ndarray | None:
    """The exact 8-bit levels of an image Pillow read at 8 bits from a 16-bit colour PNG or TIFF file, else None.

    Pillow keeps the high byte of each 16-bit value of RGB, RGBA and grey-with-alpha files (1257 becomes 4, where
    1257 / 65535 * 255 = 4.89 is level 5). The file is decoded again with OpenCV at 16 bits and each value scaled
    (value / 65535, rounded as ``corrupt`` rounds float images).

    Returns:
        uint8 H x W x 3 (RGB) or H x W x 4 (RGBA; grey with alpha as RGBA), or None when ``im`` is no such image.

    Raises:
        ImageFileError: the file changed since it was opened, or OpenCV cannot decode it at 16 bits.
    """
    fname = _sixteen_bit_file(im)
    if fname is None:
        return None
    import cv2

    try:
        a = cv2.imdecode(np.fromfile(fname, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    except (OSError, cv2.error) as e:
        raise ImageFileError(f"{name}: a 16-bit {im.format} file that could not be decoded at 16 bits ({e})") from None
    if a is None or a.dtype != np.uint16 or a.shape[:2] != (im.height, im.width) or a.ndim not in (2, 3):
        got = "nothing" if a is None else f"{a.dtype} {a.shape}"
        raise ImageFileError(f"{name}: a 16-bit {im.format} file of {im.width}x{im.height} px that OpenCV decodes as "
                             f"{got}; allowed: 16-bit images OpenCV reads exactly")  # fmt: skip
    if a.ndim == 2:
        a = a[:, :, None]
    order = {1: [0, 0, 0], 2: [0, 0, 0, 1], 3: [2, 1, 0], 4: [2, 1, 0, 3]}.get(a.shape[2])  # OpenCV is BGR(A)
    if order is None:
        raise ImageFileError(f"{name}: a 16-bit {im.format} file with {a.shape[2]} channels; allowed: 1 to 4")
    return _levels(a[:, :, order].astype(np.float64) / 65535.0)


def image_rgb(im: Image.Image, name: str = "image") -> Image.Image:
    """An opened image as 8-bit ``RGB``, by the mode rules of this module's docstring.

    Args:
        im: the image (loaded).
        name: the file (or argument) it came from, for the error message.

    Raises:
        ImageFileError: a mode that cannot be converted exactly, or values outside its range.
    """
    mode = im.mode
    wide = wide_levels(im, name)
    if wide is not None:  # 16-bit colour: exact levels, alpha left out as convert("RGB") leaves it out
        return Image.fromarray(np.ascontiguousarray(wide[:, :, :3]))
    if mode == "RGB":
        return im.copy()
    if mode in _MODES_8BIT:
        return im.convert("RGB")
    if mode in _MODES_16BIT or mode == "I":
        a = np.asarray(im).astype(np.float64)
        if a.size and (a.min() < 0 or a.max() > 65535):
            raise ImageFileError(
                f"{name}: a mode {mode!r} image with values in [{a.min():g}, {a.max():g}]; allowed: 0..65535 "
                "(16-bit grayscale), scaled by 1/65535"
            )
        return Image.fromarray(_levels(a / 65535.0)).convert("RGB")
    if mode == "F":
        a = np.asarray(im).astype(np.float64)
        if a.size and not np.isfinite(a).all():
            raise ImageFileError(f"{name}: a float (mode 'F') image with NaN or infinite values; allowed: finite values in [0, 1]")
        if a.size and (a.min() < 0 or a.max() > 1):
            raise ImageFileError(
                f"{name}: a float (mode 'F') image with values in [{a.min():g}, {a.max():g}]; allowed: values in [0, 1]"
            )
        return Image.fromarray(_levels(a)).convert("RGB")
    raise ImageFileError(
        f"{name}: image mode {mode!r} is not read; allowed: {', '.join(RGB_MODES)} (convert it to RGB first)"
    )


def load_image_rgb(path: str | Path) -> Image.Image:
    """Open an image fully (so truncated files fail here, with one of :data:`DECODE_ERRORS`) and convert it to
    8-bit RGB with :func:`image_rgb` (16-bit and float images scaled; other modes an :class:`ImageFileError`,
    which is a ``ValueError`` and so one of :data:`DECODE_ERRORS` too)."""
    try:
        with Image.open(path) as im:
            im.load()
            return image_rgb(im, repr(str(path)))
    except DECODE_ERRORS:
        raise
    except Exception as e:  # noqa: BLE001 - Pillow's decoders raise other types on hostile bytes (struct.error, ...)
        raise ImageFileError(f"{str(path)!r}: not a readable image ({type(e).__name__}: {e})") from None


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
        if not files and (d / "images").is_dir():  # Tiny-ImageNet's training layout: <class>/images/<image>
            files = [f for f in sorted((d / "images").iterdir()) if is_image_file(f)]
        if not files:
            deeper = next((f for f in d.rglob("*") if is_image_file(f)), None)
            if deeper is not None:
                raise DataError(
                    f"{arg} {str(root)!r}: the class folder {d.name!r} holds no image itself but images deeper down "
                    f"(e.g. {str(deeper.relative_to(root))!r}): expected {_LAYOUTS} (or <class>/images/<image>)"
                )
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


# ------------------------------------------------------------------------------------------------
# arrays of images and labels (.npy / .npz files, CIFAR batches, ICONS-50)

CIFAR100_COARSE_TO_FINE: dict[int, tuple[int, ...]] = {
    0: (72, 4, 95, 30, 55), 1: (73, 32, 67, 91, 1), 2: (92, 70, 82, 54, 62), 3: (16, 61, 9, 10, 28),
    4: (51, 0, 53, 57, 83), 5: (40, 39, 22, 87, 86), 6: (20, 25, 94, 84, 5), 7: (14, 24, 6, 7, 18),
    8: (43, 97, 42, 3, 88), 9: (37, 17, 76, 12, 68), 10: (49, 33, 71, 23, 60), 11: (15, 21, 19, 31, 38),
    12: (75, 63, 66, 64, 34), 13: (77, 26, 45, 99, 79), 14: (11, 2, 35, 46, 98), 15: (29, 93, 27, 78, 44),
    16: (65, 50, 74, 36, 80), 17: (56, 52, 47, 59, 96), 18: (8, 58, 90, 13, 48), 19: (81, 69, 41, 89, 85),
}  # fmt: skip
"""CIFAR-100's fixed superclass map: coarse label -> its five fine labels, in the order of the authors' subclass
script (Hendrycks et al.; the order in which each fine class first appears in the training set)."""

CIFAR100_FINE_TO_COARSE: tuple[int, ...] = tuple(
    c for _, c in sorted((f, c) for c, fs in CIFAR100_COARSE_TO_FINE.items() for f in fs)
)
"""Fine label (0..99) -> its coarse label (0..19)."""


def image_array(a: object, name: str, *, layout: str = "NHWC", channels: int = 3) -> np.ndarray:
    """Check an array of images read from a file and return it as contiguous uint8 levels, converted exactly.

    Allowed: ``uint8``; ``uint16`` (16-bit levels, scaled by 255/65535 and rounded as :func:`image_rgb` does);
    other integer dtypes with values in 0..255; floats with finite values in [0, 1] (scaled by 255, rounded) or
    whole values in 0..255. Anything else (bool, object, strings, complex, NaN or infinite values, other ranges,
    another number of dimensions or channels) is an :class:`ImageFileError` naming ``name``; nothing is clipped,
    wrapped or truncated.

    Args:
        a: the array.
        name: the file (and entry) it came from.
        layout: ``"NHWC"`` or ``"NCHW"`` (the channel axis checked).
        channels: the number of channels required.
    """
    if not isinstance(a, np.ndarray):
        raise ImageFileError(f"{name}: expected an array of images, found {type(a).__name__}")
    axis = 3 if layout == "NHWC" else 1
    if a.ndim != 4 or a.shape[axis] != channels:
        want = f"N x H x W x {channels}" if layout == "NHWC" else f"N x {channels} x H x W"
        raise ImageFileError(f"{name}: images of shape {a.shape}; allowed: {want}")
    kind = a.dtype.kind
    if a.dtype == np.uint8:
        return np.ascontiguousarray(a)
    if kind not in "iuf" or a.dtype.hasobject:
        raise ImageFileError(f"{name}: images of dtype {a.dtype}; allowed: uint8, uint16, other integers in 0..255, "
                             "or floats in [0, 1] / whole values in 0..255")  # fmt: skip
    if a.size == 0:
        return np.zeros(a.shape, np.uint8)
    if kind == "f":
        if not np.isfinite(a).all():
            raise ImageFileError(f"{name}: images of dtype {a.dtype} with NaN or infinite values; allowed: finite values")
        lo, hi = float(a.min()), float(a.max())
        if lo >= 0 and hi <= 1:
            return np.ascontiguousarray(_levels(a.astype(np.float64)))
        if lo >= 0 and hi <= 255 and bool((a == np.floor(a)).all()):
            return np.ascontiguousarray(a.astype(np.uint8))
        raise ImageFileError(f"{name}: float images with values in [{lo:g}, {hi:g}]; allowed: values in [0, 1] "
                             "(scaled by 255) or whole values in 0..255")  # fmt: skip
    lo, hi = int(a.min()), int(a.max())
    if a.dtype == np.uint16:
        return np.ascontiguousarray(_levels(a.astype(np.float64) / 65535.0))
    if lo < 0 or hi > 255:
        raise ImageFileError(f"{name}: {a.dtype} images with values in {lo}..{hi}; allowed: 0..255 (or uint16 levels)")
    return np.ascontiguousarray(a.astype(np.uint8))


def label_array(labels: object, n: int, name: str, *, classes: int | None = None) -> np.ndarray:
    """Check labels read from a file: a 1-D integer array (a list of ints is accepted) with exactly ``n`` entries,
    each in 0..classes-1 (or >= 0); returned as int64. Floats, booleans, strings and objects are refused (never
    truncated), as are a count that differs from ``n`` (never cut or padded): :class:`ImageFileError` naming
    ``name``."""
    a = labels if isinstance(labels, np.ndarray) else None
    if a is None:
        if not isinstance(labels, (list, tuple)) or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in labels
        ):
            raise ImageFileError(f"{name}: labels must be a list or array of integers, found {type(labels).__name__}"
                                 + (f" holding {type(next(iter(labels), None)).__name__}" if isinstance(labels, (list, tuple)) and labels else ""))  # fmt: skip
        try:
            a = np.asarray(labels, dtype=np.int64)
        except OverflowError as e:
            raise ImageFileError(f"{name}: labels out of the int64 range") from e
    if a.dtype.kind not in "iu":
        raise ImageFileError(f"{name}: labels of dtype {a.dtype}; allowed: integers (floats are not truncated)")
    if a.ndim != 1:
        raise ImageFileError(f"{name}: labels of shape {a.shape}; allowed: one label per image, a 1-D array")
    if len(a) != n:
        raise ImageFileError(f"{name}: {len(a)} labels for {n} images; allowed: exactly one label per image")
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        top = None if classes is None else classes - 1
        if lo < 0 or (top is not None and hi > top):
            allowed = f"0..{top}" if top is not None else "labels >= 0"
            raise ImageFileError(f"{name}: labels in {lo}..{hi}; allowed: {allowed}")
    return a.astype(np.int64)


def check_cifar100_labels(fine: np.ndarray, coarse: np.ndarray, name: str) -> None:
    """Refuse CIFAR-100 labels whose coarse label contradicts the fine label's fixed superclass
    (:data:`CIFAR100_FINE_TO_COARSE`): an :class:`ImageFileError` naming the first such image."""
    expect = np.asarray(CIFAR100_FINE_TO_COARSE, dtype=np.int64)[fine]
    bad = np.flatnonzero(expect != coarse)
    if bad.size:
        i = int(bad[0])
        raise ImageFileError(
            f"{name}: {bad.size} image(s) whose coarse label contradicts CIFAR-100's fixed superclass map (first: "
            f"image {i}, fine label {int(fine[i])} belongs to coarse label {int(expect[i])}, found {int(coarse[i])})"
        )
