"""The report's gallery: one photo under every ImageNet-C corruption and severity, made by the package's own corruptions."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from ..errors import InvalidArgumentError
from ..io import load_image_rgb

__all__ = ["GalleryImage", "gallery", "default_gallery_photo"]


@dataclass(frozen=True)
class GalleryImage:
    corruption: str
    severity: int
    uri: str


def default_gallery_photo() -> Path | None:
    """The first ImageNet photo inside the foolbox wheel (the demo images), or None when foolbox is not installed."""
    from ..evaluation.data import foolbox_data_dir
    from ..evaluation.errors import MissingPackageError

    try:
        photos = sorted(foolbox_data_dir().glob("imagenet_*.jpg"))
    except MissingPackageError:
        return None
    return photos[0] if photos else None


def _uri(a: np.ndarray, thumb: int) -> str:
    im = Image.fromarray(a)
    if thumb != im.width:
        im = im.resize((thumb, thumb), Image.Resampling.BICUBIC)
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=82)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def gallery(photo: str | Path, corruptions: list[str], *, seed: int = 0, thumb: int = 112) -> list[GalleryImage]:
    """``photo`` (resized to 256 and centre-cropped to 224, as the evaluation does) clean, then under each
    corruption at severities 1..5, as embedded JPEG thumbnails of ``thumb`` px.

    Raises:
        InvalidArgumentError: the photo cannot be read.
    """
    from ..api import corrupt
    from ..editions import preprocess

    try:
        rgb = load_image_rgb(photo)
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as e:
        raise InvalidArgumentError("--gallery-image", str(photo), "a readable photo (JPEG, PNG...)", str(e)) from e
    clean = np.asarray(preprocess(rgb, "224"))
    out = [GalleryImage("clean", 0, _uri(clean, thumb))]
    for c in corruptions:
        for s in range(1, 6):
            y = corrupt(clean, c, s, seed=seed, edition="224", keys=[Path(photo).name])
            out.append(GalleryImage(c, s, _uri(np.asarray(y, dtype=np.uint8), thumb)))
    return out
