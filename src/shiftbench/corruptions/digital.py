"""Digital corruptions: brightness, contrast, pixelate, JPEG (benchmark), saturate (extra).

Brightness is a weather corruption in the papers' taxonomy; it lives here next to
saturate because both are the same HSV edit. (elastic_transform: see ``elastic.py``.)
"""

from __future__ import annotations

import io

import numpy as np
import torch
from PIL import Image

from .._registry import ApplyContext, register
from ._hsv_cpu import hsv_edit_cpu
from ._ops import hsv_to_rgb, rgb_to_hsv


@register("brightness", family="weather", group="benchmark", sample=None)
def brightness(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Add c to the HSV value channel (scikit-image HSV, float64)."""
    if x.device.type == "cpu" and x.dtype == torch.float64:
        return hsv_edit_cpu(x, 0, c)
    hsv = rgb_to_hsv(x / 255.0)
    hsv = torch.stack([hsv[:, 0], hsv[:, 1], torch.clamp(hsv[:, 2] + c, 0, 1)], dim=1)
    return torch.clamp(hsv_to_rgb(hsv), 0, 1) * 255


@register("saturate", family="digital", group="extra", sample=None)
def saturate(x: torch.Tensor, c: tuple[float, float], d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Scale and shift the HSV saturation channel: S * c0 + c1."""
    if x.device.type == "cpu" and x.dtype == torch.float64:
        return hsv_edit_cpu(x, 1, c[0], c[1])
    hsv = rgb_to_hsv(x / 255.0)
    hsv = torch.stack([hsv[:, 0], torch.clamp(hsv[:, 1] * c[0] + c[1], 0, 1), hsv[:, 2]], dim=1)
    return torch.clamp(hsv_to_rgb(hsv), 0, 1) * 255


@register("contrast", family="digital", group="benchmark", sample=None, dtype=torch.float32)
def contrast(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Shrink each channel towards its spatial mean by the factor c."""
    x = x / 255.0
    means = x.mean(dim=(-2, -1), keepdim=True)
    return torch.clamp((x - means) * c + means, 0, 1) * 255


def _to_uint8_images(x: torch.Tensor) -> np.ndarray:
    """B x 3 x H x W (0..255) -> B x H x W x 3 uint8 (the reference works on 8-bit PIL images)."""
    return torch.round(x).clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()


def _from_uint8_images(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).permute(0, 3, 1, 2).to(device=like.device, dtype=like.dtype)


@register("pixelate", family="digital", group="benchmark", sample=None, quantized_output=True, dtype=torch.float32)
def pixelate(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Box-downsample to (W*c, H*c) and box-upsample back (Pillow, 8-bit)."""
    imgs = _to_uint8_images(x)
    h, w = imgs.shape[1:3]
    small = (int(w * c), int(h * c))
    out = np.empty_like(imgs)
    for i, a in enumerate(imgs):
        im = Image.fromarray(a).resize(small, Image.BOX).resize((w, h), Image.BOX)
        out[i] = np.asarray(im)
    return _from_uint8_images(out, x)


@register("jpeg_compression", family="digital", group="benchmark", sample=None, quantized_output=True, dtype=torch.float32)
def jpeg_compression(x: torch.Tensor, c: int, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Encode as JPEG at quality c (4:2:0 chroma subsampling) and decode (Pillow/libjpeg)."""
    imgs = _to_uint8_images(x)
    out = np.empty_like(imgs)
    for i, a in enumerate(imgs):
        buf = io.BytesIO()
        Image.fromarray(a).save(buf, format="JPEG", quality=int(c))
        buf.seek(0)
        out[i] = np.asarray(Image.open(buf).convert("RGB"))
    return _from_uint8_images(out, x)
