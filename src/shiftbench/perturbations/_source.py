"""Turn user images into the canvases the ImageNet-P generators work on.

Each edition of the reference generator starts from a *source* photo and
derives two images from it:

=======  =============================================  =====================================
name     base (canvas of the geometric perturbations)   crop (the edition-size clean frame)
=======  =============================================  =====================================
224      shorter side resized to 256 (PIL bilinear)     CenterCrop(224) of the base
299      the source itself                              central 87.5 % crop, squashed to 299
64       shorter side resized to 64 (PIL bilinear)      CenterCrop(64) of the base
64x64    the photo squashed to 64 x 64 (PIL bilinear)   the same image
32       the image (other sizes squashed to 32 x 32)    the same image
=======  =============================================  =====================================

``64`` is Tiny-ImageNet-P's recipe (``make_tinyimagenet_p.py``); ``64x64`` is ImageNet 64x64-P's
(``make_imagenet_64_p.py``: ``Resize((64, 64))`` of the full photo, so geometric perturbations fill
black at the borders). Both use the 64 schedules; ``64x64`` is a preparation of edition ``64``
(:attr:`PreparedImages.recipe`).

Every resize is shiftbench's own emulation of Pillow's fixed-point BILINEAR resize as Pillow <= 12
ran it (:func:`~shiftbench.perturbations._warp.pil_resize`: the horizontal pass first), the same
code that squashes the 299 edition's perturbed frames. The clean crop therefore matches frame 0 of
translate and rotate whatever Pillow is installed (Pillow 13 changed the order of the two passes,
which moves the 299 crop of portrait photos by one level at about 15 % of its pixels).

With ``preprocessed=True`` the inputs are taken as edition-size crops with no
surrounding context (source = base = crop): geometric perturbations then fill
black wherever the crop has no pixels, whereas the reference shows the rest
of the resized photo there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from ..corruptions import require_memory
from ..errors import ImageRangeError, ImageShapeError, ImageTypeError, InvalidArgumentError
from ..io import image_rgb, load_image_rgb
from ..rng.seeding import image_key, key_to_int
from ._spec import resolve_p_edition
from ._warp import pil_resize

__all__ = ["PreparedImages", "prepare", "center_window", "resized_crop_window", "resize_short_size"]

_SIZES = {"224": 224, "299": 299, "64": 64, "32": 32}
_BASE_SHORT = {"224": 256, "64": 64}
SQUASHED_64 = "64x64"
"""The ImageNet 64x64-P preparation of edition 64 (the photo squashed to 64 x 64)."""
_RECIPE_NAMES = {"64x64": SQUASHED_64, "imagenet-64x64": SQUASHED_64, "imagenet64x64": SQUASHED_64, "64-squash": SQUASHED_64}


def resolve_recipe(edition: Any) -> tuple[str, str]:
    """``(edition, recipe)``: ``"64x64"`` (and its aliases) is edition ``64`` with the squashed recipe."""
    if isinstance(edition, str) and edition.strip().lower() in _RECIPE_NAMES:
        return "64", SQUASHED_64
    return resolve_p_edition(edition), ""


def resize_levels(a: np.ndarray, height: int, width: int) -> np.ndarray:
    """Pillow <= 12's ``Image.resize((width, height), BILINEAR)`` of an H x W x 3 uint8 array (shiftbench's emulation)."""
    if a.shape[:2] == (height, width):
        return a
    t = torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))
    return np.ascontiguousarray(pil_resize(t, height, width).to(torch.uint8).numpy().transpose(1, 2, 0))


def resize_short_size(height: int, width: int, size: int) -> tuple[int, int]:
    """Output ``(height, width)`` of torchvision ``Resize(size)``: shorter side ``size``, longer ``int(size * long / short)``."""
    if (width <= height and width == size) or (height <= width and height == size):
        return height, width
    if width < height:
        return int(size * height / width), size
    return size, int(size * width / height)


def _resize_short(a: np.ndarray, size: int) -> np.ndarray:
    """torchvision ``Resize(size)`` of an H x W x 3 uint8 image (Pillow bilinear, see the module docstring)."""
    h, w = a.shape[:2]
    rh, rw = resize_short_size(h, w, size)
    return resize_levels(a, rh, rw)


def center_window(height: int, width: int, th: int, tw: int) -> tuple[int, int, int, int]:
    """``(top, left, th, tw)`` of torchvision's CenterCrop (offsets ``int(round(d / 2))``, half to even)."""
    return int(round((height - th) / 2.0)), int(round((width - tw) / 2.0)), th, tw


def resized_crop_window(height: int, width: int) -> tuple[int, int, int, int]:
    """The central 87.5 % window of the 299 edition: ``int(0.875 h) x int(0.875 w)``, centred."""
    return center_window(height, width, int(height * 0.875), int(width * 0.875))


CANVAS_BYTES_PER_VALUE = 40
"""Memory per value (pixel x channel) of a photo and its canvas while it is prepared and perturbed: the uint8 base,
the resize's float64 passes and the float64 copy the geometric perturbations keep (the resizes' coefficient
matrices are counted apart: :data:`RESIZE_BYTES_PER_COEFFICIENT`). A 32 x 4000 strip, whose 224 base is 256 x 32000,
peaked at 2.0 GiB (declared 3.3 GiB); a 32 x 12000 one at 18.4 GiB (declared 20.5 GiB)."""

SEQUENCE_BYTES = 512 << 20
"""Memory of the frames of one chunk and their intermediates, whatever the photo's size (chunks hold at most
:data:`~shiftbench.perturbations.sequences.DEFAULT_CHUNK_VALUES` values, 128 MiB as float64; a 375 x 500 photo
peaked at 80 MiB in all)."""


RESIZE_BYTES_PER_COEFFICIENT = 16
"""The resizes' dense coefficient matrices (output x input samples of each axis, int64, and their tensor copy):
a 32 x 12000 strip resized to 256 x 96000 holds a 96000 x 12000 matrix (measured: 18.4 GiB in all)."""


def sequence_memory(height: int, width: int, edition: str, recipe: str = "") -> int:
    """Bytes perturbing one ``height`` x ``width`` photo takes at most in ``edition``: its source, its canvas (the
    base of the edition's preparation), the resizes' coefficient matrices and the chunk of frames being made."""
    size = _SIZES[edition]
    if recipe == SQUASHED_64:
        bh, bw = size, size
        rh, rw = size * height, size * width
    elif edition in _BASE_SHORT:
        bh, bw = resize_short_size(height, width, _BASE_SHORT[edition])
        rh, rw = bh * height, bw * width
    elif edition == "299":
        bh, bw = height, width
        rh, rw = size * int(height * 0.875), size * int(width * 0.875)
    else:
        bh, bw = size, size
        rh, rw = size * height, size * width
    return (CANVAS_BYTES_PER_VALUE * 3 * (height * width + bh * bw) + RESIZE_BYTES_PER_COEFFICIENT * (rh + rw)
            + SEQUENCE_BYTES)


def _crop(a: np.ndarray, window: tuple[int, int, int, int]) -> np.ndarray:
    top, left, th, tw = window
    return np.ascontiguousarray(a[top : top + th, left : left + tw])


@dataclass
class PreparedImages:
    """Images ready for sequence generation in one edition.

    Attributes:
        edition: ``"224"``, ``"299"``, ``"64"`` or ``"32"``.
        size: side of the frames.
        sources: per image, the source photo (H x W x 3 uint8).
        bases: per image, the canvas of the geometric perturbations (H x W x 3 uint8).
        crops: N x 3 x S x S uint8 tensor (CPU): the clean frames.
        keys: per image, the 64-bit key of its draws (pixel digest of the crop unless given).
        preprocessed: whether the inputs were taken as crops without context.
        recipe: ``""`` (the edition's own preparation) or ``"64x64"`` (ImageNet 64x64-P: squashed).
    """

    edition: str
    size: int
    sources: list[np.ndarray]
    bases: list[np.ndarray]
    crops: torch.Tensor
    keys: list[int]
    preprocessed: bool = False
    recipe: str = ""
    _tensors: dict[tuple[str, int, str], torch.Tensor] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return int(self.crops.shape[0])

    def subset(self, start: int, end: int) -> PreparedImages:
        """Images ``start..end-1`` (shares the arrays)."""
        return PreparedImages(
            self.edition,
            self.size,
            self.sources[start:end],
            self.bases[start:end],
            self.crops[start:end],
            self.keys[start:end],
            self.preprocessed,
            self.recipe,
        )

    def canvas(self, which: str, i: int, device: torch.device) -> torch.Tensor:
        """Image ``i``'s ``"source"``, ``"base"`` or ``"crop"`` as 3 x H x W float64 levels on ``device``."""
        key = (which, i, str(device))
        t = self._tensors.get(key)
        if t is None:
            if which == "crop":
                t = self.crops[i].to(device=device, dtype=torch.float64)
            else:
                arr = self.sources[i] if which == "source" else self.bases[i]
                t = torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1))).to(device=device, dtype=torch.float64)
            if len(self._tensors) > 64:
                self._tensors.clear()
            self._tensors[key] = t
        return t


def _hwc_from_array(a: np.ndarray, argument: str) -> np.ndarray:
    if a.ndim == 2:
        a = a[..., None]
    if a.ndim != 3 or a.shape[-1] not in (1, 3, 4):
        raise ImageShapeError(argument, tuple(a.shape), "H x W, H x W x 1, H x W x 3 or H x W x 4")
    if a.dtype == np.uint8:
        out = a
    elif np.issubdtype(a.dtype, np.floating):
        if a.size and (float(np.nanmin(a)) < -1e-6 or float(np.nanmax(a)) > 1 + 1e-6 or np.isnan(a).any()):
            raise ImageRangeError(argument, "values outside [0, 1]", "float images with values in [0, 1]")
        out = np.clip(np.round(a.astype(np.float64) * 255.0), 0, 255).astype(np.uint8)
    else:
        raise ImageTypeError(argument, str(a.dtype), "uint8 or float (in [0, 1]) arrays")
    c = out.shape[-1]
    if c == 1:
        out = np.repeat(out, 3, axis=-1)
    elif c == 4:
        out = out[..., :3]
    return np.ascontiguousarray(out)


def _to_hwc_list(images: Any, argument: str) -> list[np.ndarray]:
    if isinstance(images, Image.Image):
        return [np.asarray(image_rgb(images, argument))]
    if isinstance(images, (str, Path)):
        return [np.asarray(load_image_rgb(Path(images)))]
    if isinstance(images, torch.Tensor):
        t = images.detach().cpu()
        if t.ndim == 3:
            t = t.unsqueeze(0)
        if t.ndim != 4:
            raise ImageShapeError(argument, tuple(images.shape), "C x H x W or B x C x H x W (C = 1, 3 or 4)")
        return [_hwc_from_array(x.permute(1, 2, 0).numpy(), argument) for x in t]
    if isinstance(images, np.ndarray):
        if images.ndim == 4:
            return [_hwc_from_array(x, argument) for x in images]
        return [_hwc_from_array(images, argument)]
    if isinstance(images, Sequence) and not isinstance(images, (bytes, bytearray)):
        out: list[np.ndarray] = []
        for k, item in enumerate(images):
            if isinstance(item, (np.ndarray, torch.Tensor)) and item.ndim == 4:
                raise ImageShapeError(f"{argument}[{k}]", tuple(item.shape), "one image per list entry")
            out.extend(_to_hwc_list(item, f"{argument}[{k}]"))
        return out
    raise ImageTypeError(
        argument, type(images).__name__, "a PIL image, a path, a NumPy array, a torch tensor, or a list of them"
    )


def prepare(
    images: Any,
    edition: str | int | None = None,
    *,
    preprocessed: bool = False,
    keys: Sequence[Any] | None = None,
) -> PreparedImages:
    """Load images and derive each edition's base canvas and clean crop (see the module docstring).

    Args:
        images: one or several source photos: PIL images, paths, H x W x C
            arrays (uint8, or float in [0, 1]), C x H x W tensors, a B x H x W x C
            array, a B x C x H x W tensor, or a list of these; or a
            :class:`PreparedImages` (returned unchanged when it matches).
        edition: ``"224"`` (ImageNet-P, the default), ``"299"``, ``"64"``
            (Tiny-ImageNet-P), ``"64x64"`` (ImageNet 64x64-P: edition 64, squashed)
            or ``"32"`` (CIFAR-P); aliases such as ``"tiny"`` and ``"cifar"`` work. ``None`` keeps a :class:`PreparedImages`' own edition.
        preprocessed: the inputs are already edition-size crops (no context).
        keys: one key (int, str or bytes) per image for the random draws;
            default: a digest of the crop's pixels.

    Returns:
        The prepared images.

    Raises:
        ImageTypeError, ImageShapeError, ImageRangeError: unusable images.
        InvalidArgumentError: a key count that does not match, or preprocessed
            images of the wrong size.
    """
    if isinstance(images, PreparedImages):
        if keys is not None:
            raise InvalidArgumentError("keys", "keys for PreparedImages", "keys passed to prepare() with the raw images")
        if edition is None:
            return images
        ed, recipe = resolve_recipe(edition)
        if images.edition != ed or (recipe and images.recipe != recipe):
            got = images.recipe or images.edition
            raise InvalidArgumentError("images", f"images prepared for edition {got}", f"edition {recipe or ed}")
        return images
    ed, recipe = resolve_recipe("224" if edition is None else edition)
    size = _SIZES[ed]
    arrays = _to_hwc_list(images, "images")
    if not arrays:
        raise InvalidArgumentError("images", "no images", "at least one image")
    sources: list[np.ndarray] = []
    bases: list[np.ndarray] = []
    crops: list[np.ndarray] = []
    if not preprocessed:  # every canvas is held until the sequences are made: checked before the first resize
        need = sum(sequence_memory(a.shape[0], a.shape[1], ed, recipe) - SEQUENCE_BYTES for a in arrays)
        shapes = sorted({f"{a.shape[0]}x{a.shape[1]}" for a in arrays})
        require_memory(need + SEQUENCE_BYTES, f"{len(arrays)} photo(s) of {', '.join(shapes[:3])} (HxW) for edition {ed}",
                       "images")
    for k, a in enumerate(arrays):
        h, w = a.shape[:2]
        if min(h, w) < 1:
            raise ImageShapeError(f"images[{k}]", tuple(a.shape), "a non-empty image")
        if preprocessed:
            if (h, w) != (size, size):
                raise ImageShapeError(
                    f"images[{k}]", (h, w), f"{size} x {size} crops with preprocessed=True (edition {ed})"
                )
            sources.append(a)
            bases.append(a)
            crops.append(a)
            continue
        if recipe == SQUASHED_64:
            base = crop = resize_levels(a, size, size)
        elif ed in _BASE_SHORT:
            base = _resize_short(a, _BASE_SHORT[ed])
            crop = _crop(base, center_window(base.shape[0], base.shape[1], size, size))
            if crop.shape[:2] != (size, size):
                raise ImageShapeError(f"images[{k}]", (h, w), f"an image whose resized base covers {size} x {size}")
        elif ed == "299":
            base = a
            crop = resize_levels(_crop(a, resized_crop_window(h, w)), size, size)
        else:
            base = crop = resize_levels(a, size, size)
        sources.append(a)
        bases.append(np.ascontiguousarray(base))
        crops.append(np.ascontiguousarray(crop))
    crop_t = torch.from_numpy(np.stack(crops)).permute(0, 3, 1, 2).contiguous()
    if keys is not None:
        if isinstance(keys, (str, bytes)) or len(keys) != len(arrays):
            got = "a single key" if isinstance(keys, (str, bytes)) else f"{len(keys)} keys"
            raise InvalidArgumentError("keys", got, f"exactly one key per image ({len(arrays)})")
        key_ints = [key_to_int(k) for k in keys]
    else:
        key_ints = [image_key(c.numpy()) for c in crop_t]
    return PreparedImages(ed, size, sources, bases, crop_t, key_ints, preprocessed, recipe)
