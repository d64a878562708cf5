"""Digital corruptions: brightness, contrast, pixelate, JPEG (benchmark), saturate (extra).

Brightness is a weather corruption in the papers' taxonomy; it lives here next to
saturate because both are the same HSV edit. (elastic_transform: see ``elastic.py``.)
"""

from __future__ import annotations

import io
from typing import NamedTuple

import numpy as np
import torch
from PIL import Image

from ._cpu.hsv import hsv_edit_cpu
from ._images import hwc_uint8
from ._ops import fdiv, hsv_to_rgb, rgb_to_hsv
from ._registry import IMAGE_BY_IMAGE, ApplyContext, register
from ._resample import PRECISION_BITS, box_coefficients


@register("brightness", family="weather", group="benchmark", sample=None)
def brightness(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Add c to the HSV value channel (scikit-image HSV, float64)."""
    hsv = rgb_to_hsv(fdiv(x, 255.0))
    hsv = torch.stack([hsv[:, 0], hsv[:, 1], torch.clamp(hsv[:, 2] + c, 0, 1)], dim=1)
    return torch.clamp(hsv_to_rgb(hsv), 0, 1) * 255


@brightness.kernel("compiled", torch.float64)
def _brightness_compiled(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    return hsv_edit_cpu(x, 0, c)


class SaturateParams(NamedTuple):
    """A severity of saturate: the HSV saturation becomes ``S * scale + shift``."""

    scale: float
    shift: float


@register("saturate", family="digital", group="extra", sample=None, params=SaturateParams)
def saturate(x: torch.Tensor, c: SaturateParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Scale and shift the HSV saturation channel: S * scale + shift."""
    hsv = rgb_to_hsv(fdiv(x, 255.0))
    hsv = torch.stack([hsv[:, 0], torch.clamp(hsv[:, 1] * c.scale + c.shift, 0, 1), hsv[:, 2]], dim=1)
    return torch.clamp(hsv_to_rgb(hsv), 0, 1) * 255


@saturate.kernel("compiled", torch.float64)
def _saturate_compiled(
    x: torch.Tensor, c: SaturateParams, d: dict[str, torch.Tensor], ctx: ApplyContext
) -> torch.Tensor:
    return hsv_edit_cpu(x, 1, c.scale, c.shift)


@register(
    "contrast", family="digital", group="benchmark", sample=None, accepts_levels=True, chunk_values=IMAGE_BY_IMAGE
)
def contrast(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Shrink each channel towards its spatial mean by the factor c (float64, as the reference)."""
    # channel means: the sum of the levels (exact for 8-bit inputs, in any order) / 255 / pixels
    count = int(x.shape[-2]) * int(x.shape[-1])
    x = x.to(torch.float64)
    means = fdiv(fdiv(x.sum(dim=(-2, -1), keepdim=True), 255.0), count)
    x = fdiv(x, 255.0)
    return torch.clamp((x - means) * c + means, 0, 1) * 255


@contrast.kernel("compiled", torch.uint8, torch.float64)
def _contrast_compiled(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    from ._cpu.blend import contrast_kernel

    count = int(x.shape[-2]) * int(x.shape[-1])
    xa = np.ascontiguousarray(x.detach().numpy())
    sums = xa.sum(axis=(2, 3), dtype=np.int64 if xa.dtype == np.uint8 else np.float64).astype(np.float64)
    out = ctx.result_array(xa.shape, np.float64)  # uint8: truncated
    contrast_kernel(xa, sums / 255.0 / count, float(c), out)
    return torch.from_numpy(out)


def _hwc_images(x: torch.Tensor) -> np.ndarray:
    """B x 3 x H x W uint8 -> contiguous B x H x W x 3 uint8 on the CPU (what Pillow reads)."""
    a = x.detach().cpu().numpy()
    if a.dtype != np.uint8 or a.shape[1] != 3:
        return np.ascontiguousarray(a.transpose(0, 2, 3, 1))
    out = np.empty((a.shape[0], a.shape[2], a.shape[3], 3), dtype=np.uint8)
    for i in range(a.shape[0]):
        out[i] = hwc_uint8(a[i])
    return out


def _chw_tensor(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(a).permute(0, 3, 1, 2).to(like.device)


# Pillow's 8-bit two-pass resampling (coefficients: ._resample), re-expressed as batched integer
# tensor ops so that pixelate runs on whole batches, on any device, with Pillow's exact output.
def _resample_rows(x: torch.Tensor, out_size: int) -> torch.Tensor:
    """One Pillow BOX pass along dim -2 (whole rows are gathered: contiguous copies)."""
    idx_np, w_np = box_coefficients(int(x.shape[-2]), out_size)
    idx = torch.from_numpy(idx_np).to(x.device)
    w = torch.from_numpy(w_np).to(device=x.device, dtype=torch.int32)
    acc = torch.full(
        (*x.shape[:-2], out_size, x.shape[-1]), 1 << (PRECISION_BITS - 1), dtype=torch.int32, device=x.device
    )
    for t in range(idx.shape[1]):
        if w_np[:, t].any():  # decided on the host: no device sync
            acc += x.index_select(-2, idx[:, t]) * w[:, t, None]
    return (acc >> PRECISION_BITS).clamp_(0, 255)


def pillow_box_resize(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``Image.resize((width, height), Image.Resampling.BOX)`` of 8-bit RGB images, bit for bit.

    Args:
        x: B x C x H x W uint8 (or integer) tensor.
        height, width: output size.

    Returns:
        B x C x height x width int32 tensor of levels 0..255.
    """
    h, w = int(x.shape[-2]), int(x.shape[-1])
    y = x.to(torch.int32)
    if (height, width) == (h, w):
        return y
    if width != w:  # horizontal pass first, as Pillow does
        y = _resample_rows(y.transpose(-1, -2).contiguous(), width).transpose(-1, -2)
    if height != h:
        y = _resample_rows(y.contiguous(), height)
    return y


@register(
    "pixelate",
    family="digital",
    group="benchmark",
    sample=None,
    quantized_output=True,
    dtype=torch.uint8,
    chunk_values=IMAGE_BY_IMAGE,
)
def pixelate(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Box-downsample to (W*c, H*c) and box-upsample back (Pillow's BOX filter, 8-bit).

    Backends: ``"tensor"``, the arithmetic as batched tensor ops on any device; ``"compiled"``,
    passes over the channel planes (:mod:`._cpu.resample`); ``"pillow"``, Pillow image by image.
    """
    h, w = int(x.shape[-2]), int(x.shape[-1])
    small = pillow_box_resize(x, int(h * c), int(w * c))
    return pillow_box_resize(small, h, w).to(torch.uint8)


@pixelate.kernel("compiled", torch.uint8)
def _pixelate_compiled(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    h, w = int(x.shape[-2]), int(x.shape[-1])
    if h > 2 * w:
        # Pillow 13 runs the vertical pass first on images more than twice as tall as wide
        # (found by probing; its rounding then differs from the horizontal-first passes)
        return _pillow_pixelate(x, c)
    from ._cpu.resample import box_resize_planes, pixelate_planes

    b = int(x.shape[0])
    planes = np.ascontiguousarray(x.detach().numpy()).reshape(b * 3, h, w)
    dst = ctx.out if ctx.out is not None and tuple(ctx.out.shape) == (b, 3, h, w) and ctx.out.is_contiguous() else None
    res = dst if dst is not None else torch.empty((b, 3, h, w), dtype=torch.uint8)
    flat = res.numpy().reshape(b * 3, h, w)
    # both passes of both resizes in one compiled call per batch; box_resize_planes where an
    # enlarging pass is more than a copy of one input per output
    if pixelate_planes(planes, int(h * c), int(w * c), flat) is None:
        box_resize_planes(box_resize_planes(planes, int(h * c), int(w * c)), h, w, out=flat)
    return res


@pixelate.kernel("pillow", torch.uint8)
def _pixelate_pillow(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    return _pillow_pixelate(x, c)


def _pillow_pixelate(x: torch.Tensor, c: float) -> torch.Tensor:
    h, w = int(x.shape[-2]), int(x.shape[-1])
    imgs = _hwc_images(x)
    out = np.empty_like(imgs)
    for i, a in enumerate(imgs):
        out[i] = np.asarray(Image.fromarray(a).resize((int(w * c), int(h * c)), Image.Resampling.BOX).resize((w, h), Image.Resampling.BOX))
    return _chw_tensor(out, x)


def _pillow_jpeg(a: np.ndarray, quality: int) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="JPEG", quality=int(quality))
    buf.seek(0)
    return np.asarray(Image.open(buf).convert("RGB"))


def jpeg_round_trip(
    x: torch.Tensor, quality: int, compiled: bool = True, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Pillow's JPEG round trip (quality ``quality``, 4:2:0) of a B x 3 x H x W uint8 batch, on its device.

    On the CPU the compiled pipeline (:mod:`._jpeg_cpu`), writing into ``out`` when that is a
    contiguous B x 3 x H x W uint8 CPU tensor; with ``compiled=False`` Pillow itself, image by
    image (the reference's route). On other devices the same arithmetic as batched integer tensor
    ops (:mod:`._jpeg_torch`), so the batch never leaves the device. All give Pillow's pixels
    (the pipelines for images at least 5 px wide: Pillow's decoder upsamples chroma rows of one or
    two samples its own way, so narrower images take the Pillow route; shiftbench's images have
    at least 32 px a side).
    """
    if not x.is_cpu:
        from ._jpeg_torch import jpeg_round_trip_tensor

        return jpeg_round_trip_tensor(x, int(quality))
    a = np.ascontiguousarray(x.detach().numpy())
    if compiled and a.shape[-1] >= 5:
        from ._cpu.jpeg import jpeg_round_trip_planes

        if (
            out is not None
            and out.dtype == torch.uint8
            and out.is_cpu
            and out.is_contiguous()
            and out.shape == x.shape
        ):
            jpeg_round_trip_planes(a, int(quality), out=out.numpy())
            return out
        return torch.from_numpy(jpeg_round_trip_planes(a, int(quality)))
    imgs = _hwc_images(torch.from_numpy(a))
    res = np.empty_like(imgs)
    for i, im in enumerate(imgs):
        res[i] = _pillow_jpeg(im, int(quality))
    return _chw_tensor(res, x)


@register(
    "jpeg_compression",
    family="digital",
    group="benchmark",
    sample=None,
    quantized_output=True,
    dtype=torch.uint8,
    chunk_values=IMAGE_BY_IMAGE,
)
def jpeg_compression(x: torch.Tensor, c: int, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Encode as JPEG at quality c (4:2:0 chroma subsampling) and decode, as Pillow (libjpeg-turbo) does."""
    from ._jpeg_torch import jpeg_round_trip_tensor

    return jpeg_round_trip_tensor(x, int(c))


@jpeg_compression.kernel("compiled", torch.uint8)
def _jpeg_compression_compiled(x: torch.Tensor, c: int, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    return jpeg_round_trip(x, int(c), compiled=True, out=ctx.out)


@jpeg_compression.kernel("pillow", torch.uint8)
def _jpeg_compression_pillow(x: torch.Tensor, c: int, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    return jpeg_round_trip(x, int(c), compiled=False, out=ctx.out)
