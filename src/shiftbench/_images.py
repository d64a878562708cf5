"""Conversion between user images (tensors, arrays, PIL) and the internal batch.

The internal batch is a float tensor ``X`` of shape B x 3 x H x W holding values
in 0..255, i.e. what the reference code sees after ``np.array(pil_image)``
(exact integers for 8-bit inputs). Grayscale inputs are replicated to three
channels and turned back into one channel (ITU-R 601 luma) on output; the alpha
channel of RGBA inputs is carried through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image

from .errors import ImageRangeError, ImageShapeError, ImageTypeError

MIN_SIDE = 32
_FLOAT_TOL = 1e-6


@dataclass
class Batch:
    """A batch in the internal representation plus what is needed to restore the input's form."""

    x: torch.Tensor  # B x 3 x H x W, float64, 0..255
    kind: str  # "tensor" | "numpy" | "pil"
    batched: bool
    channels: int  # 1, 3 or 4 in the user's image
    float_input: bool
    dtype: Any  # torch or numpy dtype of the input
    alpha: torch.Tensor | None  # B x 1 x H x W in the input's own scale (0..255 float)
    pil_mode: str | None = None
    channels_last: bool = False  # numpy arrays are H x W x C
    squeeze_channel: bool = False  # 2-D input (no channel axis)

    @property
    def size(self) -> tuple[int, int]:
        return int(self.x.shape[-2]), int(self.x.shape[-1])

    def canonical_uint8(self, i: int) -> np.ndarray:
        """Image i as H x W x 3 uint8 (rounded for float inputs): the key for seeding."""
        xi = self.x[i]
        if self.float_input:
            xi = torch.round(xi)
        return xi.clamp(0, 255).to(torch.uint8).permute(1, 2, 0).cpu().numpy()


def _check_size(h: int, w: int, argument: str) -> None:
    if h < MIN_SIDE or w < MIN_SIDE:
        raise ImageShapeError(argument, f"{h}x{w} (HxW)", f"images of at least {MIN_SIDE} px per side")


def _check_float_range(t: torch.Tensor, argument: str) -> None:
    if t.numel() == 0:
        return
    lo, hi = float(t.min()), float(t.max())
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo < -_FLOAT_TOL or hi > 1 + _FLOAT_TOL:
        raise ImageRangeError(
            argument,
            f"values in [{lo:.4g}, {hi:.4g}]",
            "float images with values in [0, 1] (or uint8 images in 0..255)",
        )


def _split_channels(t: torch.Tensor, argument: str) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    """t: B x C x H x W float 0..255 -> (B x 3 x H x W, alpha or None, C)."""
    c = int(t.shape[1])
    if c == 1:
        return t.expand(-1, 3, -1, -1).contiguous(), None, 1
    if c == 3:
        return t, None, 3
    if c == 4:
        return t[:, :3].contiguous(), t[:, 3:4].clone(), 4
    raise ImageShapeError(argument, f"{c} channels", "1 (gray), 3 (RGB) or 4 (RGBA) channels")


def to_batch(images: Any, argument: str = "images", device: torch.device | str | None = None) -> Batch:
    """Convert user input to a :class:`Batch` (validating type, shape and range)."""
    if isinstance(images, Image.Image):
        return _from_pil([images], batched=False, argument=argument, device=device)
    if isinstance(images, (list, tuple)) and images and all(isinstance(i, Image.Image) for i in images):
        return _from_pil(list(images), batched=True, argument=argument, device=device)
    if isinstance(images, np.ndarray):
        return _from_numpy(images, argument, device)
    if isinstance(images, torch.Tensor):
        return _from_tensor(images, argument, device)
    raise ImageTypeError(
        argument,
        type(images).__name__,
        "a torch.Tensor (C x H x W or B x C x H x W), a NumPy array (H x W, H x W x C or B x H x W x C) "
        "or a PIL image (or a list of PIL images)",
    )


def _from_tensor(t: torch.Tensor, argument: str, device: Any) -> Batch:
    if t.dtype not in (torch.uint8, torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise ImageTypeError(argument, f"torch dtype {t.dtype}", "torch.uint8 (0..255) or a float dtype (0..1)")
    squeeze = False
    if t.ndim == 2:
        t4, batched, squeeze = t[None, None], False, True
    elif t.ndim == 3:
        t4, batched = t[None], False
    elif t.ndim == 4:
        t4, batched = t, True
    else:
        raise ImageShapeError(argument, tuple(t.shape), "H x W, C x H x W or B x C x H x W")
    if device is not None:
        t4 = t4.to(device)
    _check_size(int(t4.shape[-2]), int(t4.shape[-1]), argument)
    is_float = t.dtype != torch.uint8
    if is_float:
        _check_float_range(t4, argument)
        x = t4.to(torch.float64) * 255.0
    else:
        x = t4.to(torch.float64)
    rgb, alpha, c = _split_channels(x, argument)
    return Batch(rgb, "tensor", batched, c, is_float, t.dtype, alpha, squeeze_channel=squeeze)


def _from_numpy(a: np.ndarray, argument: str, device: Any) -> Batch:
    if a.dtype == np.uint8:
        is_float = False
    elif a.dtype in (np.float16, np.float32, np.float64):
        is_float = True
    else:
        raise ImageTypeError(argument, f"numpy dtype {a.dtype}", "uint8 (0..255) or float (0..1)")
    squeeze = False
    if a.ndim == 2:
        a4, batched, squeeze = a[None, :, :, None], False, True
    elif a.ndim == 3:
        if a.shape[-1] not in (1, 3, 4):
            raise ImageShapeError(argument, a.shape, "H x W x C with C in (1, 3, 4) (NumPy arrays are channels-last)")
        a4, batched = a[None], False
    elif a.ndim == 4:
        if a.shape[-1] not in (1, 3, 4):
            raise ImageShapeError(argument, a.shape, "B x H x W x C with C in (1, 3, 4)")
        a4, batched = a, True
    else:
        raise ImageShapeError(argument, a.shape, "H x W, H x W x C or B x H x W x C")
    a4 = np.ascontiguousarray(a4)
    if not a4.flags.writeable:
        a4 = a4.copy()
    t = torch.from_numpy(a4).permute(0, 3, 1, 2)
    if device is not None:
        t = t.to(device)
    _check_size(int(t.shape[-2]), int(t.shape[-1]), argument)
    if is_float:
        _check_float_range(t, argument)
        x = t.to(torch.float64) * 255.0
    else:
        x = t.to(torch.float64)
    rgb, alpha, c = _split_channels(x, argument)
    return Batch(rgb, "numpy", batched, c, is_float, a.dtype, alpha, channels_last=True, squeeze_channel=squeeze)


def _from_pil(imgs: list[Image.Image], batched: bool, argument: str, device: Any) -> Batch:
    sizes = {im.size for im in imgs}
    if len(sizes) != 1:
        raise ImageShapeError(argument, sorted(sizes), "a list of PIL images that all have the same size")
    mode = imgs[0].mode
    arrays = []
    for im in imgs:
        if im.mode in ("L", "LA", "RGB", "RGBA"):
            m = im.mode
        elif "A" in im.getbands():
            im, m = im.convert("RGBA"), "RGBA"
        else:
            im, m = im.convert("RGB"), "RGB"
        a = np.asarray(im)
        if m == "LA":
            a = np.stack([a[..., 0], a[..., 0], a[..., 0], a[..., 1]], axis=-1)
        arrays.append(a if a.ndim == 3 else a[..., None])
    if len({a.shape[-1] for a in arrays}) != 1:
        raise ImageShapeError(argument, sorted({im.mode for im in imgs}), "PIL images of one mode")
    b = _from_numpy(np.stack(arrays), argument, device)
    b.kind, b.batched, b.pil_mode, b.channels_last, b.squeeze_channel = "pil", batched, mode, False, False
    if mode == "LA":
        b.channels = 2
    return b


def _luma(x: torch.Tensor, integer: bool) -> torch.Tensor:
    """ITU-R 601 luma of B x 3 x H x W; integer mode follows PIL's 'L' conversion."""
    if integer:
        xi = x.to(torch.int64)
        return ((xi[:, 0:1] * 19595 + xi[:, 1:2] * 38470 + xi[:, 2:3] * 7471 + 0x8000) >> 16).to(x.dtype)
    return x[:, 0:1] * 0.299 + x[:, 1:2] * 0.587 + x[:, 2:3] * 0.114


def from_batch(y: torch.Tensor, b: Batch, quantize: bool) -> Any:
    """Turn a B x 3 x H x W result in 0..255 back into the input's form.

    ``quantize`` truncates to 8 bits (the reference's ``np.uint8``); it is forced
    for uint8 and PIL inputs.
    """
    y = y.clamp(0, 255)
    to_uint8 = (not b.float_input) or quantize
    if to_uint8:
        y = torch.floor(y)
    if b.channels in (1, 2):
        y = _luma(y, integer=to_uint8)
    if b.alpha is not None:
        y = torch.cat([y, b.alpha.to(y.dtype)], dim=1)
    if b.kind == "pil":
        arr = y.to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()
        outs = [Image.fromarray(a[..., 0] if a.shape[-1] == 1 else a) for a in arr]
        return outs if b.batched else outs[0]
    if b.float_input:
        out_t = (y / 255.0).clamp(0, 1)
    else:
        out_t = y
    if b.kind == "numpy":
        out = out_t.permute(0, 2, 3, 1).cpu().numpy().astype(b.dtype)
        if b.squeeze_channel:
            out = out[..., 0]
        return out if b.batched else out[0]
    out_t = out_t.to(b.dtype)
    if b.squeeze_channel:
        return out_t[0, 0]
    return out_t if b.batched else out_t[0]
