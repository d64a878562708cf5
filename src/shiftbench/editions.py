"""The ImageNet-C editions: image size, preprocessing and edition-specific constants.

======  ==========================================  ==================================================
name    dataset                                     preprocessing of a source image
======  ==========================================  ==================================================
224     ImageNet-C                                  Resize(256) (short side, bilinear) + CenterCrop(224)
299     ImageNet-C, Inception 299                   central 87.5 % crop of each side, squash to 299x299
64      Tiny-ImageNet-C, ImageNet 64x64-C           squash to 64x64 (bilinear)
32      CIFAR-10-C / CIFAR-100-C                    none (32x32 images; other sizes are squashed)
======  ==========================================  ==================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from PIL import Image

from .errors import InvalidArgumentError
from .io import image_rgb
from .registry import Registry

__all__ = ["Edition", "EDITIONS", "get_edition", "edition_for_size", "preprocess"]


@dataclass(frozen=True)
class Edition:
    name: str
    size: int
    dataset: str
    fog_mapsize: int
    frost_scale: float | None

    def __str__(self) -> str:
        return self.name


_BUILT_IN = {
    "224": Edition("224", 224, "ImageNet-C", 256, None),
    "299": Edition("299", 299, "ImageNet-C (Inception 299)", 512, None),
    "64": Edition("64", 64, "Tiny-ImageNet-C / ImageNet 64x64-C", 64, 0.3),
    "32": Edition("32", 32, "CIFAR-10-C", 32, 0.2),
}

_ALIASES = {
    "imagenet": "224",
    "imagenet-c": "224",
    "inception": "299",
    "tiny": "64",
    "tiny-imagenet": "64",
    "tinyimagenet": "64",
    "imagenet64": "64",
    "cifar": "32",
    "cifar10": "32",
    "cifar-10": "32",
    "cifar100": "32",
    "cifar-100": "32",
}


EDITIONS: Registry[Edition] = Registry("edition", cutoff=0.5)
"""The editions by name, with their aliases (``"tiny"``, ``"cifar"``, ...; a :class:`~shiftbench.registry.Registry`)."""
for _name, _edition in _BUILT_IN.items():
    EDITIONS.register(_name, _edition, aliases=[a for a, k in _ALIASES.items() if k == _name])
del _name, _edition


def get_edition(edition: str | int | Edition) -> Edition:
    """Resolve ``224``/``"224"``/``"tiny"``/... to an :class:`Edition`."""
    if isinstance(edition, Edition):
        return edition
    return EDITIONS.get(edition)  # type: ignore[arg-type]


def edition_for_size(height: int, width: int) -> Edition:
    """The edition whose parameters suit an image of this size.

    An exact match of an edition's size wins; otherwise the edition whose size is
    nearest to the image's shorter side on a log scale.
    """
    for e in EDITIONS.values():
        if height == e.size and width == e.size:
            return e
    short = min(height, width)
    return min(EDITIONS.values(), key=lambda e: abs(math.log(short / e.size)))


def _center_crop(img: Image.Image, th: int, tw: int) -> Image.Image:
    w, h = img.size
    top = int(round((h - th) / 2.0))
    left = int(round((w - tw) / 2.0))
    return img.crop((left, top, left + tw, top + th))


def preprocess(img: Image.Image, edition: str | int | Edition) -> Image.Image:
    """Apply an edition's source-image preprocessing (see the module docstring).

    The input is converted to RGB first, as the reference loaders do.
    """
    ed = get_edition(edition)
    if not isinstance(img, Image.Image):
        raise InvalidArgumentError("img", type(img).__name__, "a PIL.Image.Image")
    img = image_rgb(img, "img")
    w, h = img.size
    if ed.name == "224":
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = 256, int(256 * long / short)
        new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
        img = img.resize((new_w, new_h), Image.BILINEAR)
        return _center_crop(img, 224, 224)
    if ed.name == "299":
        ch, cw = int(0.875 * h), int(0.875 * w)
        img = _center_crop(img, ch, cw)
        return img.resize((299, 299), Image.BILINEAR)
    if ed.name == "64":
        return img.resize((64, 64), Image.BILINEAR)
    if (w, h) != (32, 32):
        return img.resize((32, 32), Image.BILINEAR)
    return img
