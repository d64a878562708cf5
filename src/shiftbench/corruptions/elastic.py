"""elastic_transform (digital, benchmark): a random affine warp followed by a smooth random displacement field.

The two resampling steps are replicated from the libraries the reference relies on:

* :func:`warp_affine` reproduces ``cv2.warpAffine`` (bilinear interpolation,
  ``BORDER_REFLECT_101``) on float32 images. OpenCV 3.x/4.x (verified bit for
  bit against 4.11, the reference environment's version) quantises every
  source coordinate to 1/32 pixel in fixed point (``AB_BITS = 10``,
  ``INTER_BITS = 5``, rounding to nearest) and interpolates with a table of
  float32 weights: ``mode="fixed"``, used by the corruption. OpenCV 5 computes
  the coordinates in float32 and interpolates with fused multiply-adds:
  ``mode="float"`` follows it up to float32 rounding of the coordinates.
* :func:`map_coordinates_linear` reproduces
  ``scipy.ndimage.map_coordinates(order=1, mode='reflect')`` (SciPy >= 1.6):
  linear interpolation of the half-sample symmetric extension of the image,
  evaluated in float64.

Everything runs as batched tensor code on the input's device; only the 2 x 3
affine matrices (three points per image) are solved on the CPU with
``cv2.getAffineTransform``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from ..rng.seeding import FastDraws
from ._bounds import require_shape
from ._geometry import run_threaded
from ._ops import fdiv, gaussian_filter2d, gaussian_filter2d_memory
from ._registry import DEFAULT_BYTES_PER_PIXEL, ApplyContext, SampleContext, register

__all__ = [
    "affine_source_points",
    "invert_affine",
    "warp_affine",
    "map_coordinates_linear",
    "elastic_transform",
]

_AB_BITS = 10
_INTER_BITS = 5
_AB_SCALE = 1 << _AB_BITS
_INTER_TAB = 1 << _INTER_BITS
_ROUND_DELTA = _AB_SCALE // _INTER_TAB // 2


def affine_source_points(height: int, width: int) -> np.ndarray:
    """The three float32 control points of the random affine warp (3 x 2).

    The centre is ``(H // 2, W // 2)`` and the offset ``min(H, W) // 3``; the
    pairs are handed to OpenCV as (x, y) points, i.e. the first element (derived
    from H) is used as the x coordinate, as the reference does.
    """
    centre = np.array([height, width], dtype=np.float32) // 2
    half = min(height, width) // 3
    return np.array(
        [centre + half, [centre[0] + half, centre[1] - half], centre - half], dtype=np.float32
    )


def invert_affine(m: np.ndarray) -> np.ndarray:
    """Invert 2 x 3 affine matrices (... x 2 x 3, float64) with OpenCV's ``invertAffineTransform`` formulas."""
    m = np.asarray(m, dtype=np.float64)
    a, b, c = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    d, e, f = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    det = a * e - b * d
    inv = np.where(det != 0, 1.0 / np.where(det != 0, det, 1.0), 0.0)
    a2, e2 = e * inv, a * inv
    b2, d2 = b * -inv, d * -inv
    c2 = -a2 * c - b2 * f
    f2 = -d2 * c - e2 * f
    out = np.empty(m.shape, dtype=np.float64)
    out[..., 0, 0], out[..., 0, 1], out[..., 0, 2] = a2, b2, c2
    out[..., 1, 0], out[..., 1, 1], out[..., 1, 2] = d2, e2, f2
    return out


def _reflect101(idx: torch.Tensor, n: int) -> torch.Tensor:
    """OpenCV ``BORDER_REFLECT_101`` index mapping (gfedcb|abcdefgh|gfedcba), any distance."""
    if n == 1 or idx.numel() == 0:
        return torch.zeros_like(idx)
    lo, hi = int(idx.min()), int(idx.max())
    if lo >= 0 and hi < n:
        return idx
    if lo < -(n - 1) or hi > 2 * (n - 1):
        idx = torch.remainder(idx, 2 * n - 2)
    # for -(n-1) <= i <= 2(n-1): reflect about 0, then about n-1
    return torch.abs(idx).neg_().add_(n - 1).abs_().neg_().add_(n - 1)


def _gather_taps(x: torch.Tensor, rows: tuple[torch.Tensor, torch.Tensor], cols: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The four bilinear taps of every output pixel.

    Args:
        x: B x C x H x W source images.
        rows, cols: (top, bottom) row and (left, right) column index maps, each
            B x H' x W' integer tensors with values inside the image.

    Returns:
        B x C x 4 x H' x W' tensor of taps ordered (top-left, top-right,
        bottom-left, bottom-right).
    """
    b, c, h, w = x.shape
    top, bottom = rows[0].to(torch.int64) * w, rows[1].to(torch.int64) * w
    flat = torch.empty((b, 4, *top.shape[1:]), dtype=torch.int64, device=x.device)
    torch.add(top, cols[0], out=flat[:, 0])
    torch.add(top, cols[1], out=flat[:, 1])
    torch.add(bottom, cols[0], out=flat[:, 2])
    torch.add(bottom, cols[1], out=flat[:, 3])
    # one gather for all channels: the index is broadcast over the channel axis
    n = 4 * int(np.prod(top.shape[1:]))
    taps = x.reshape(b, c, h * w).gather(2, flat.reshape(b, 1, n).expand(b, c, n))
    return taps.reshape(b, c, *flat.shape[1:])


def _fma32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """float32 fused multiply-add ``a * b + c`` with a single rounding (via float64)."""
    return (a.to(torch.float64) * b.to(torch.float64) + c.to(torch.float64)).to(torch.float32)


def _fixed_point_terms(inv: np.ndarray, h: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """OpenCV's fixed-point warp terms (units of 1/1024 px, cvRound): per column and per row."""
    xs = np.arange(w, dtype=np.float64)
    ys = np.arange(h, dtype=np.float64)
    adelta = np.rint(inv[:, 0, 0, None] * xs * _AB_SCALE).astype(np.int64)
    bdelta = np.rint(inv[:, 1, 0, None] * xs * _AB_SCALE).astype(np.int64)
    x0 = np.rint((inv[:, 0, 1, None] * ys + inv[:, 0, 2, None]) * _AB_SCALE).astype(np.int64) + _ROUND_DELTA
    y0 = np.rint((inv[:, 1, 1, None] * ys + inv[:, 1, 2, None]) * _AB_SCALE).astype(np.int64) + _ROUND_DELTA
    return adelta, bdelta, x0, y0


def warp_affine(x: torch.Tensor, m: Any, mode: str = "fixed") -> torch.Tensor:
    """``cv2.warpAffine(img, M, (W, H), flags=INTER_LINEAR, borderMode=BORDER_REFLECT_101)`` for a batch.

    Args:
        x: B x C x H x W float32 images (any device).
        m: B x 2 x 3 forward affine matrices (source -> destination), as
            returned by ``cv2.getAffineTransform``; NumPy array or tensor.
        mode: ``"fixed"`` for OpenCV 3.x/4.x (coordinates quantised to 1/32
            pixel, float32 weight table; bit-exact) or ``"float"`` for the
            float32 coordinate path of OpenCV 5 (fused multiply-add
            interpolation; equal up to float32 rounding of the coordinates).

    Returns:
        B x C x H x W float32 warped images on x's device.

    Raises:
        ValueError: for an unknown ``mode`` or a matrix batch of the wrong shape.
    """
    if mode not in ("fixed", "float"):
        raise ValueError(f"mode={mode!r} must be 'fixed' or 'float'")
    m_np = m.detach().cpu().numpy() if isinstance(m, torch.Tensor) else np.asarray(m)
    b, c, h, w = x.shape
    if m_np.shape != (b, 2, 3):
        raise ValueError(f"expected {b} x 2 x 3 affine matrices, got shape {m_np.shape}")
    inv = invert_affine(m_np)
    dev = x.device
    x = x.to(torch.float32)
    ys = np.arange(h, dtype=np.float64)
    if mode == "fixed":
        # integer source coordinates in units of 1/32 pixel, as OpenCV's fixed-point warp
        adelta, bdelta, x0, y0 = _fixed_point_terms(inv, h, w)
        shift = _AB_BITS - _INTER_BITS
        # int32 suffices: |coordinate| * 1024 stays far below 2**31 for any image size
        i32 = torch.int32
        sx = (torch.from_numpy(x0).to(dev, i32)[:, :, None] + torch.from_numpy(adelta).to(dev, i32)[:, None, :]) >> shift
        sy = (torch.from_numpy(y0).to(dev, i32)[:, :, None] + torch.from_numpy(bdelta).to(dev, i32)[:, None, :]) >> shift
        ix, iy = sx >> _INTER_BITS, sy >> _INTER_BITS
        # OpenCV's float32 weight table entries ((1-ty)(1-tx), (1-ty)tx, ty(1-tx), ty tx), t = k / 32 (exact)
        tx = (sx & (_INTER_TAB - 1)).to(torch.float32) * (1.0 / _INTER_TAB)
        ty = (sy & (_INTER_TAB - 1)).to(torch.float32) * (1.0 / _INTER_TAB)
        ux, uy = 1.0 - tx, 1.0 - ty
        taps = _gather_taps(x, (_reflect101(iy, h), _reflect101(iy + 1, h)), (_reflect101(ix, w), _reflect101(ix + 1, w)))
        # left-to-right float32 sum of the four weighted taps, each product rounded
        out = taps[:, :, 0] * (uy * ux).unsqueeze(1)
        out += taps[:, :, 1] * (uy * tx).unsqueeze(1)
        out += taps[:, :, 2] * (ty * ux).unsqueeze(1)
        out += taps[:, :, 3] * (ty * tx).unsqueeze(1)
        return out
    m0 = torch.from_numpy(inv[:, 0, 0].astype(np.float32)).to(dev).view(b, 1, 1)
    m3 = torch.from_numpy(inv[:, 1, 0].astype(np.float32)).to(dev).view(b, 1, 1)
    mx = torch.from_numpy((ys * inv[:, 0, 1, None] + inv[:, 0, 2, None]).astype(np.float32)).to(dev)[:, :, None]
    my = torch.from_numpy((ys * inv[:, 1, 1, None] + inv[:, 1, 2, None]).astype(np.float32)).to(dev)[:, :, None]
    xf = torch.arange(w, dtype=torch.float32, device=dev).view(1, 1, w)
    fx = _fma32(m0, xf, mx)
    fy = _fma32(m3, xf, my)
    ix_f, iy_f = torch.floor(fx), torch.floor(fy)
    tx, ty = (fx - ix_f).unsqueeze(1), (fy - iy_f).unsqueeze(1)
    ix, iy = ix_f.to(torch.int64), iy_f.to(torch.int64)
    taps = _gather_taps(x, (_reflect101(iy, h), _reflect101(iy + 1, h)), (_reflect101(ix, w), _reflect101(ix + 1, w)))
    p00, p01, p10, p11 = taps.unbind(dim=2)
    v0 = _fma32(tx, p01 - p00, p00)
    v1 = _fma32(tx, p11 - p10, p10)
    return _fma32(ty, v1 - v0, v0)


def _reflect_coordinate(c: torch.Tensor, n: int) -> torch.Tensor:
    """SciPy's ``map_coordinate`` for mode 'reflect' (float64 arithmetic, same operation order)."""
    if n <= 1:
        return torch.zeros_like(c)
    outside = (c < 0) | (c > n - 1)
    if not bool(outside.any()):
        return c
    sz2 = float(2 * n)
    v = c[outside]
    # below zero
    vn = torch.where(v < -sz2, sz2 * torch.trunc(fdiv(-v, sz2)) + v, v)
    vn = torch.where(vn < -n, vn + sz2, -vn - 1)
    # beyond the last sample
    vp = v - sz2 * torch.trunc(fdiv(v, sz2))
    vp = torch.where(vp >= n, sz2 - vp - 1, vp)
    c = c.clone()
    c[outside] = torch.where(v < 0, vn, vp)
    return c


def map_coordinates_linear(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """``scipy.ndimage.map_coordinates(img, [rows, cols, channel], order=1, mode='reflect')`` per channel.

    Out-of-range coordinates are first folded back with SciPy's half-sample
    reflection (same float64 arithmetic); the remaining neighbours just outside
    (indices -1 and n) reflect onto the edge samples, which is bilinear
    interpolation with edge clamping. That interpolation runs in float64 as in
    SciPy (``grid_sample``, corner-aligned), so a float32 result is SciPy's
    after its final rounding; a float64 result agrees to a few ulp.

    Args:
        x: B x C x H x W images (float32 or float64).
        rows, cols: B x H' x W' float64 sampling coordinates (row, column); any
            values.

    Returns:
        B x C x H' x W' samples in x's dtype.
    """
    _, _, h, w = x.shape
    rows = _reflect_coordinate(rows.to(torch.float64), h)
    cols = _reflect_coordinate(cols.to(torch.float64), w)
    grid = torch.empty((*rows.shape, 2), dtype=torch.float64, device=x.device)
    # normalised corner-aligned coordinates: -1 is the first sample, +1 the last
    torch.mul(cols, 2.0 / (w - 1) if w > 1 else 0.0, out=grid[..., 0]).sub_(1.0)
    torch.mul(rows, 2.0 / (h - 1) if h > 1 else 0.0, out=grid[..., 1]).sub_(1.0)
    out = F.grid_sample(x.to(torch.float64), grid, mode="bilinear", padding_mode="border", align_corners=True)
    return out.to(x.dtype)


class ElasticParams(NamedTuple):
    """A severity of elastic_transform: the displacement field's scale (alpha) and smoothing (sigma),
    and the largest jitter of the affine warp's control points in pixels."""

    alpha: float
    sigma: float
    affine: float


def _sample_elastic(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    a = float(ctx.params.affine)
    shape = (ctx.height, ctx.width)
    affine = draws.uniform(-a, a, (3, 2))
    ux = draws.uniform(-1, 1, shape)
    uy = draws.uniform(-1, 1, shape)
    return {"affine": np.asarray(affine, np.float64), "ux": np.asarray(ux, np.float64), "uy": np.asarray(uy, np.float64)}


def _affine_matrices(h: int, w: int, jitter: np.ndarray) -> np.ndarray:
    src = affine_source_points(h, w)
    out = np.empty((len(jitter), 2, 3), dtype=np.float64)
    for i, j in enumerate(jitter):
        dst = src + j.astype(np.float32)
        out[i] = cv2.getAffineTransform(src, dst)
    return out


def _elastic_bounds(h: int, w: int, edition: str, params: ElasticParams, d: Any) -> dict[str, tuple[Any, Any]]:
    a = float(params.affine)
    return {"affine": (-a, a), "ux": (-1.0, 1.0), "uy": (-1.0, 1.0)}


def _warp_and_field(x: torch.Tensor, c: ElasticParams, d: dict[str, torch.Tensor]) -> tuple[torch.Tensor, np.ndarray, torch.Tensor, torch.Tensor]:
    """x / 255 in float32, the affine matrices and the smoothed displacement fields (dx, dy)."""
    alpha, sigma = float(c.alpha), float(c.sigma)
    h, w = x.shape[-2:]
    x = fdiv(x.to(torch.float32), 255.0)
    mats = _affine_matrices(h, w, d["affine"].detach().cpu().numpy())
    fields = torch.stack([d["ux"], d["uy"]], dim=1).to(torch.float64)
    fields = (gaussian_filter2d(fields, sigma, mode="reflect", truncate=3.0) * alpha).to(torch.float32)
    return x, mats, fields[:, 0], fields[:, 1]


def _elastic_memory(h: int, w: int, edition: str, c: Any) -> int:
    """Per-pixel intermediates (the image, warp maps and fields) and the smoothing of the two displacement fields."""
    return DEFAULT_BYTES_PER_PIXEL * h * w + 2 * gaussian_filter2d_memory(h, w, float(c.sigma), "reflect", 3.0)


@register(
    "elastic_transform", family="digital", group="benchmark", sample=_sample_elastic, params=ElasticParams, dtype=torch.float32,
    bounds=_elastic_bounds, memory=_elastic_memory, accepts_levels=True,
)
def elastic_transform(x: torch.Tensor, c: ElasticParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Random affine warp of the control points by up to ``affine`` px, then a Gaussian-smoothed (``sigma``) displacement field scaled by ``alpha``."""
    h, w = x.shape[-2:]
    x, mats, dx, dy = _warp_and_field(x, c, d)
    x = warp_affine(x, mats, mode="fixed")
    rows = torch.arange(h, dtype=torch.float64, device=x.device).view(1, h, 1) + dy.to(torch.float64)
    cols = torch.arange(w, dtype=torch.float64, device=x.device).view(1, 1, w) + dx.to(torch.float64)
    out = map_coordinates_linear(x, rows, cols)
    return torch.clamp(out, 0, 1) * 255


def _elastic_draw_apply(x: torch.Tensor, c: ElasticParams, generators: list[np.random.Generator], ctx: ApplyContext) -> torch.Tensor:
    """Each image's affine jitter and displacement fields, the sampler's draws in its order, written straight into
    the batch's arrays (no per-image arrays to stack), then the compiled pass."""
    b, h, w = len(generators), int(x.shape[-2]), int(x.shape[-1])
    a = float(c.affine)
    affine, ux, uy = np.empty((b, 3, 2)), np.empty((b, h, w)), np.empty((b, h, w))
    for i, g in enumerate(generators):
        draws = FastDraws(g)
        affine[i] = draws.uniform(-a, a, (3, 2))
        draws.uniform_into(-1.0, 1.0, ux[i])
        draws.uniform_into(-1.0, 1.0, uy[i])
    d = {"affine": torch.from_numpy(affine), "ux": torch.from_numpy(ux), "uy": torch.from_numpy(uy)}
    return _elastic_transform_compiled(x, c, d, ctx)


@elastic_transform.kernel("compiled", draw_apply=_elastic_draw_apply)
def _elastic_transform_compiled(x: torch.Tensor, c: ElasticParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Both resamplings and the final clip in one compiled pass per image (:mod:`._cpu.elastic`): 8-bit levels or
    float values in, float32 values or (``ctx.levels``) the truncated 8-bit levels out."""
    from ._cpu.elastic import elastic_levels_kernel

    b, nc, h, w = (int(s) for s in x.shape)
    if nc != 3 or x.dtype != torch.uint8:
        y = _elastic_fused_cpu(*_warp_and_field(x, c, d))
        return y if x.dtype == torch.uint8 else y.to(x.dtype)
    require_shape("ux", tuple(d["ux"].shape), (b, h, w))
    require_shape("uy", tuple(d["uy"].shape), (b, h, w))
    sigma = float(c.sigma)
    fx, fy = (gaussian_filter2d(d[k].to(torch.float64), sigma, mode="reflect", truncate=3.0).numpy() for k in ("ux", "uy"))
    mats = _affine_matrices(h, w, d["affine"].detach().cpu().numpy())
    adelta, bdelta, x0, y0 = _fixed_point_terms(invert_affine(mats), h, w)
    xl = np.ascontiguousarray(x.detach().numpy())
    out = ctx.result_array((b, nc, h, w), np.float32)
    alpha = float(c.alpha)
    run_threaded(b, lambda s, e: elastic_levels_kernel(xl, _UNIT_LEVELS, adelta, bdelta, x0, y0, fx, fy, alpha, out, s, e))
    return torch.from_numpy(out)


_UNIT_LEVELS = np.arange(256, dtype=np.float32) / np.float32(255.0)  # float32(level) / 255 in float32, as fdiv


def _elastic_fused_cpu(x: torch.Tensor, mats: np.ndarray, dx: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """Both resamplings and the final clip in one compiled pass per image (CPU; any number of channels)."""
    from ._cpu.elastic import elastic_kernel

    b, c, h, w = x.shape
    require_shape("ux", dx.shape, (b, h, w))
    require_shape("uy", dy.shape, (b, h, w))
    adelta, bdelta, x0, y0 = _fixed_point_terms(invert_affine(mats), h, w)
    xa = np.ascontiguousarray(x.numpy())
    dxa = np.ascontiguousarray(dx.numpy())
    dya = np.ascontiguousarray(dy.numpy())
    out = np.empty((b, c, h, w), dtype=np.float32)
    run_threaded(b, lambda s, e: elastic_kernel(xa, adelta, bdelta, x0, y0, dxa, dya, out, s, e))
    return torch.from_numpy(out)
