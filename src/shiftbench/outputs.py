"""Where and how shiftbench writes its outputs: checks made before any work starts, atomic writes.

The command line refuses, in one line naming the option, the value and what is allowed (exit code 2):

* an output image whose extension is missing or names no format listed in :data:`IMAGE_FORMATS`;
* an output image whose format cannot hold the image without loss of channels or depth (an RGBA
  image as ``.jpg``, a float image as ``.png``): nothing is converted silently, the message names
  the extensions that keep the image;
* an output (image or folder) that cannot be written: a parent that is a file, a read-only folder.

Missing parent folders are created, at write time. Images are written to a temporary file next to
the target and renamed into place, so a failed write (disk full) leaves neither a truncated file
nor the folders it created.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, features

from .corruptions._images import PIL_CONVERTED, PIL_MODES
from .errors import DataError, InvalidArgumentError

__all__ = [
    "IMAGE_FORMATS",
    "ImageFormat",
    "check_output_file",
    "check_output_folder",
    "check_output_image",
    "corrupted_mode",
    "save_image_atomic",
]


@dataclass(frozen=True)
class ImageFormat:
    """A file format shiftbench writes images in, and the PIL modes it stores exactly."""

    pil_format: str
    modes: tuple[str, ...]
    save_kwargs: dict[str, Any] = field(default_factory=dict)
    lossy: bool = False  # compresses pixel values (JPEG): chosen explicitly by the extension


_16 = ("I;16", "I;16B")
IMAGE_FORMATS: dict[str, ImageFormat] = {
    ".png": ImageFormat("PNG", ("L", "LA", "RGB", "RGBA", *_16)),
    ".jpg": ImageFormat("JPEG", ("L", "RGB"), {"quality": 95}, lossy=True),
    ".jpeg": ImageFormat("JPEG", ("L", "RGB"), {"quality": 95}, lossy=True),
    ".bmp": ImageFormat("BMP", ("L", "RGB")),
    ".tif": ImageFormat("TIFF", ("L", "LA", "RGB", "RGBA", *_16, "I;16L", "I", "F")),
    ".tiff": ImageFormat("TIFF", ("L", "LA", "RGB", "RGBA", *_16, "I;16L", "I", "F")),
}
"""Output extensions (lower case) of ``shiftbench corrupt``. JPEG is written at quality 95; WebP (where Pillow
has it) losslessly. Every mode listed round-trips exactly (``tests/test_outputs.py`` checks the table)."""
if features.check("webp"):
    IMAGE_FORMATS[".webp"] = ImageFormat("WEBP", ("RGB", "RGBA"), {"lossless": True, "exact": True})


def corrupted_mode(mode: str) -> str | None:
    """The PIL mode :func:`shiftbench.corrupt` returns for an image of ``mode`` (None: a mode it refuses)."""
    if mode not in PIL_MODES:
        return None
    return PIL_CONVERTED.get(mode, mode)


def _extensions(exts: list[str]) -> str:
    return ", ".join(exts)


def image_format(path: str | Path, option: str) -> ImageFormat:
    """The format an output image is written in, from its extension (case-insensitive)."""
    suffix = Path(path).suffix.lower()
    if suffix not in IMAGE_FORMATS:
        got = f"extension {suffix!r}" if suffix else "no extension"
        raise InvalidArgumentError(
            option, str(path), f"a file name ending in {_extensions(list(IMAGE_FORMATS))} (it has {got})",
            "Use .png to keep every value.",
        )
    return IMAGE_FORMATS[suffix]


def check_output_image(path: str | Path, option: str, mode: str | None = None) -> ImageFormat:
    """Refuse an output image that cannot be written, or not without loss; return its format.

    ``mode`` is the PIL mode of the image to be written (None: the extension and place only).
    """
    path = Path(path)
    fmt = image_format(path, option)
    if mode is not None and mode not in fmt.modes:
        keep = [e for e, f in IMAGE_FORMATS.items() if mode in f.modes]
        allowed = f"an extension whose format keeps a {mode!r} image: {_extensions(keep)}" if keep else f"no format keeps a {mode!r} image"
        raise InvalidArgumentError(
            option, str(path), allowed,
            f"{fmt.pil_format} stores modes {', '.join(fmt.modes)} only; shiftbench does not convert silently.",
        )
    if path.is_dir():
        raise InvalidArgumentError(option, str(path), "a file name (this is a folder)")
    if path.exists() and not os.access(path, os.W_OK):
        raise InvalidArgumentError(option, str(path), "a file this process can write to (it is read-only)")
    _check_folder(path.parent, option, str(path))
    return fmt


def check_output_file(path: str | Path, option: str) -> None:
    """Refuse, before any work, an output file that is a folder, a read-only file, a name longer than the file system
    allows, or lies where this process cannot write (missing folders are created when it is written)."""
    path = Path(path)
    if any(len(os.fsencode(part)) > 255 for part in path.parts):
        raise InvalidArgumentError(option, str(path), "a path whose every name has at most 255 bytes")
    if path.is_dir():
        raise InvalidArgumentError(option, str(path), "a file name (this is a folder)")
    if path.exists() and not os.access(path, os.W_OK):
        raise InvalidArgumentError(option, str(path), "a file this process can write to (it is read-only)")
    _check_folder(path.parent, option, str(path))


def check_output_folder(path: str | Path, option: str) -> None:
    """Refuse an output folder that is a file, lies below a file, or cannot be written (created on demand)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InvalidArgumentError(option, str(path), "a folder (this is a file)")
    _check_folder(path, option, str(path))


def _check_folder(folder: Path, option: str, value: str) -> None:
    """``folder`` exists and takes new files, or can be created: its nearest existing ancestor is a writable folder."""
    existing = folder if str(folder) else Path(".")
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InvalidArgumentError(option, value, f"a path below folders only ({str(existing)!r} is a file)")
    try:  # write permission bits do not tell (root, read-only mounts, ACLs): try it
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".shiftbench-probe-")
    except OSError as e:
        raise InvalidArgumentError(
            option, value, f"a place this process can write to ({str(existing)!r}: {e.strerror or e})"
        ) from None
    os.close(fd)
    os.unlink(probe)


def save_image_atomic(image: Image.Image, path: str | Path, fmt: ImageFormat, option: str) -> None:
    """Write ``image`` to ``path`` via a temporary file in the same folder, creating missing folders.

    On failure (disk full, ...) the temporary file and the folders created are removed and a
    :class:`DataError` naming ``option`` is raised.
    """
    path = Path(path)
    created: list[Path] = []
    parent = path.parent
    while not parent.exists():
        created.append(parent)
        parent = parent.parent
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.part")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to any new file
        with os.fdopen(fd, "wb") as fh:
            image.save(fh, format=fmt.pil_format, **fmt.save_kwargs)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise DataError(f"{option} {str(path)!r} could not be written: {e}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
            for d in created:  # innermost first
                try:
                    d.rmdir()
                except OSError:
                    break
