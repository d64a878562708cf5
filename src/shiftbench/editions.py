"""The ImageNet-C editions: image size, preprocessing and edition-specific constants.

======  ==========================================  ==================================================
name    dataset                                     preprocessing of a source image
======  ==========================================  ==================================================
224     ImageNet-C                                  Resize(256) (short side, bilinear) + CenterCrop(224)
299     ImageNet-C, Inception 299                   central 87.5 % crop of each side, squash to 299x299
64      Tiny-ImageNet-C, ImageNet 64x64-C           squash to 64x64 (bilinear)
32      CIFAR-10-C / CIFAR-100-C                    none (32x32 images; other sizes are squashed)
======  ==========================================  ==================================================

The squashes (299, 64, 32) resize with shiftbench's own emulation of Pillow's BILINEAR resize as Pillow <= 12 ran it
(:func:`bilinear_resize`: the horizontal pass first), the version of the authors' 2018 run, not with the installed
Pillow: Pillow 13 runs the two passes in another order for some shapes, which moves the 299 squash of a portrait
photo by one level at some pixels. The 224 edition's ``Resize(256)`` is the installed Pillow's (see docs/imagenet-c.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from PIL import Image

from .errors import InvalidArgumentError
from .io import image_rgb
from .registry import Registry

__all__ = ["Edition", "EDITIONS", "get_edition", "edition_for_size", "preprocess", "bilinear_resize",
           "bilinear_coefficients", "resize_image"]


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


_PRECISION_BITS = 22
"""Pillow's fixed-point resampling: 22 fraction bits in the weights (32 - 8 - 2), as for the BOX filter of
``shiftbench.corruptions._resample``."""


def bilinear_coefficients(in_size: int, out_size: int) -> np.ndarray:
    """Pillow's fixed-point BILINEAR resampling matrix (``out_size x in_size``, int64).

    For output sample ``i`` the centre is ``(i + 0.5) * scale`` with
    ``scale = in / out``; the triangle filter is widened by ``max(scale, 1)``,
    its support window is ``int(centre -/+ support + 0.5)`` clipped to the
    input, the weights are normalised in double precision and then rounded to
    22-bit integers (half away from zero).
    """
    return _bilinear_coefficients(int(in_size), int(out_size)).copy()


@lru_cache(maxsize=64)
def _bilinear_coefficients(in_size: int, out_size: int) -> np.ndarray:
    scale = float(in_size) / out_size
    filterscale = max(scale, 1.0)
    support = 1.0 * filterscale
    mat = np.zeros((out_size, in_size), dtype=np.int64)
    for i in range(out_size):
        centre = (i + 0.5) * scale
        xmin = max(int(centre - support + 0.5), 0)
        xmax = min(int(centre + support + 0.5), in_size) - xmin
        ws = []
        total = 0.0
        for k in range(xmax):
            t = abs((k + xmin - centre + 0.5) * (1.0 / filterscale))
            wv = 1.0 - t if t < 1.0 else 0.0
            ws.append(wv)
            total += wv
        for k, wv in enumerate(ws):
            if total != 0.0:
                wv = wv / total
            fixed = int(-0.5 + wv * (1 << _PRECISION_BITS)) if wv < 0 else int(0.5 + wv * (1 << _PRECISION_BITS))
            mat[i, xmin + k] = fixed
    mat.setflags(write=False)
    return mat


def _resample_pass(x: torch.Tensor, mat: np.ndarray, dim: int) -> torch.Tensor:
    m = torch.tensor(mat, device=x.device, dtype=torch.float64)
    if dim == -1:
        acc = torch.matmul(x, m.transpose(0, 1))
    else:
        acc = torch.matmul(m, x)
    # the sums are exact integers in float64 (|sum| < 2^53)
    return torch.floor((acc + (1 << (_PRECISION_BITS - 1))) / (1 << _PRECISION_BITS)).clamp_(0, 255)


def bilinear_resize(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Pillow's ``Image.resize((width, height), BILINEAR)`` of ... x H x W 8-bit levels (float64), as Pillow <= 12
    ran it: the horizontal pass first, an 8-bit intermediate, then the vertical pass; a pass whose size does not
    change is skipped, as in Pillow. (Pillow 13 runs the passes in another order for some shapes, which moves some
    pixels by one level.)
    """
    h, w = int(x.shape[-2]), int(x.shape[-1])
    y = x.to(torch.float64)
    if w != width:
        y = _resample_pass(y, _bilinear_coefficients(w, width), -1)
    if h != height:
        y = _resample_pass(y, _bilinear_coefficients(h, height), -2)
    return y


def resize_image(img: Image.Image, width: int, height: int) -> Image.Image:
    """``img.resize((width, height), Image.BILINEAR)`` as Pillow <= 12 computed it, whatever Pillow is installed
    (:func:`bilinear_resize` on the RGB levels)."""
    a = np.asarray(image_rgb(img, "img"), dtype=np.uint8)
    if a.shape[:2] == (height, width):
        return Image.fromarray(np.ascontiguousarray(a), "RGB")
    t = torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))
    out = bilinear_resize(t, int(height), int(width)).to(torch.uint8).numpy().transpose(1, 2, 0)
    return Image.fromarray(np.ascontiguousarray(out), "RGB")


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
        return resize_image(img, 299, 299)
    if ed.name == "64":
        return resize_image(img, 64, 64)
    if (w, h) != (32, 32):
        return resize_image(img, 32, 32)
    return img
