"""Noise corruptions: gaussian, shot, impulse (benchmark) and speckle (extra).

All four follow the reference's arithmetic on ``x = X / 255``. They compute in
float32: against the reference's float64 this moves a result across an 8-bit
truncation boundary only when it lies within ~1e-5 of an integer (measured
agreement: README, "Fidelity").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..rng.pcg64 import raw_words
from ._bounds import require_shape
from ._ops import fdiv
from ._registry import IMAGE_BY_IMAGE, ApplyContext, SampleContext, register

_COMPILED_DTYPES = (torch.float32, torch.uint8)  # the compiled kernels take float32 values or uint8 levels


def _np(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy())


def _chw(a: torch.Tensor) -> torch.Tensor:
    """B x H x W x C draws -> B x C x H x W."""
    return a.permute(0, 3, 1, 2)


def _noise_draw_apply(multiplicative: bool) -> Any:
    def draw_apply(x: torch.Tensor, c: float, generators: list[np.random.Generator], ctx: ApplyContext) -> torch.Tensor:
        """Draw (FastDraws.standard_normal32 of each generator) and apply in one compiled pass per image."""
        from ..rng.ziggurat import R, halves, noise_image, tables

        xa = np.ascontiguousarray(x.detach().numpy())
        if xa.dtype not in (np.uint8, np.float32):
            xa = xa.astype(np.float32)
        _, _, h, w = xa.shape
        n = h * w * 3
        out = ctx.result_array(xa.shape, np.float32)
        kt, wt, fo, fi = tables()
        for i, g in enumerate(generators):
            raw = raw_words(g.bit_generator, (n + n // 32 + 64 + 1) // 2)  # as standard_normal32 draws
            while noise_image(halves(raw), xa[i], np.float32(c), multiplicative, out[i], kt, wt, fo, fi, R) < 0:
                raw = np.concatenate([raw, raw_words(g.bit_generator, n // 16 + 64)])
        return torch.from_numpy(out)

    return draw_apply


def _sample_normal(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    # reference: np.random.normal(size=x.shape, scale=c) == c * standard normal
    return {"z": draws.standard_normal32((ctx.height, ctx.width, 3))}


@register(
    "gaussian_noise",
    family="noise",
    group="benchmark",
    sample=_sample_normal,
    dtype=torch.float32,
    accepts_levels=True,
    chunk_values=IMAGE_BY_IMAGE,
)
def gaussian_noise(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Additive Gaussian noise of standard deviation c (image in [0, 1])."""
    x = fdiv(x, 255.0)
    return torch.clamp(x + c * _chw(d["z"]).to(x.dtype), 0, 1) * 255


@gaussian_noise.kernel("compiled", *_COMPILED_DTYPES, draw_apply=_noise_draw_apply(False))
def _gaussian_noise_compiled(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    return _gaussian_compiled(x, d["z"], c, False, ctx.levels)


def _sample_shot(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    # reference: np.random.poisson(np.array(img) / 255. * c); the rate is a function of the 8-bit level
    return {"counts": draws.poisson_levels(ctx.levels, float(ctx.params))}


@register(
    "shot_noise",
    family="noise",
    group="benchmark",
    sample=_sample_shot,
    needs_image=True,
    dtype=torch.float32,
    bounds=lambda h, w, edition, params, d: {"counts": (0.0, math.inf)},
    chunk_values=IMAGE_BY_IMAGE,
)
def shot_noise(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Poisson (photon) noise: Poisson(c * x) / c; the counts are drawn by the sampler."""
    return torch.clamp(fdiv(_chw(d["counts"]).to(x.dtype), float(c)), 0, 1) * 255


def _shot_draw_apply(x: torch.Tensor, c: float, generators: list[np.random.Generator], ctx: ApplyContext) -> torch.Tensor:
    """Draw (FastDraws.poisson_levels of each generator on the image's levels) and apply in one compiled
    pass per image."""
    from ..rng.seeding import poisson_alias_tables
    from ._cpu.noise import shot_kernel

    if x.dtype == torch.uint8:
        levels = np.ascontiguousarray(x.detach().numpy())
    else:  # x holds the levels times one (8-bit input) or 255 * the float input: the sampler's rounding
        levels = np.ascontiguousarray(torch.round(x.detach().to(torch.float32)).clamp_(0, 255).to(torch.uint8).numpy())
    _, nc, h, w = levels.shape
    prob, alias = poisson_alias_tables(float(c))
    k = prob.shape[0] // 256
    out = ctx.result_array(levels.shape, np.float32)
    for i, g in enumerate(generators):
        shot_kernel(raw_words(g.bit_generator, h * w * nc), levels[i], prob, alias, k, np.float32(c), out[i])
    return torch.from_numpy(out)


@shot_noise.kernel("compiled", torch.float32, draw_apply=_shot_draw_apply)
def _shot_noise_compiled(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    from ._cpu.noise import shot_counts_kernel

    b, _, h, w = (int(s) for s in x.shape)
    require_shape("counts", d["counts"].shape, (b, h, w, 3))
    out = ctx.result_array(tuple(x.shape), np.float32)
    shot_counts_kernel(_np(d["counts"]).astype(np.float32, copy=False), np.float32(c), out)
    return torch.from_numpy(out)


def _sample_impulse(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    amount = float(ctx.params)
    # scikit-image's random_noise(mode='s&p'): each value is "flipped" with probability amount and,
    # independently, "salted" (set to 1; else 0) with probability 1/2 (LegacyDraws replays its order)
    flipped, salted = draws.salt_and_pepper((ctx.height, ctx.width, 3), amount)
    return {"flipped": flipped, "salted": salted}


@register(
    "impulse_noise", family="noise", group="benchmark", sample=_sample_impulse, dtype=torch.float32, accepts_levels=True
)
def impulse_noise(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Salt-and-pepper noise: each value is replaced by 0 or 1 with probability c."""
    x = fdiv(x, 255.0)
    flipped = _chw(d["flipped"]).to(torch.bool)
    salted = _chw(d["salted"]).to(torch.bool)
    out = torch.where(flipped & salted, torch.ones_like(x), x)
    out = torch.where(flipped & ~salted, torch.zeros_like(x), out)
    return torch.clamp(out, 0, 1) * 255


@impulse_noise.kernel("compiled", *_COMPILED_DTYPES)
def _impulse_noise_compiled(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    from ._cpu.noise import impulse_kernel

    b, _, h, w = (int(s) for s in x.shape)
    require_shape("flipped", d["flipped"].shape, (b, h, w, 3))
    require_shape("salted", d["salted"].shape, (b, h, w, 3))
    out = ctx.result_array(tuple(x.shape), np.float32)
    impulse_kernel(_np(x), _np(d["flipped"]).astype(np.bool_), _np(d["salted"]).astype(np.bool_), out)
    return torch.from_numpy(out)


@register(
    "speckle_noise", family="noise", group="extra", sample=_sample_normal, dtype=torch.float32, accepts_levels=True
)
def speckle_noise(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Multiplicative noise: x + x * N(0, c^2)."""
    x = fdiv(x, 255.0)
    return torch.clamp(x + x * (c * _chw(d["z"]).to(x.dtype)), 0, 1) * 255


@speckle_noise.kernel("compiled", *_COMPILED_DTYPES, draw_apply=_noise_draw_apply(True))
def _speckle_noise_compiled(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    return _gaussian_compiled(x, d["z"], c, True, ctx.levels)


def _gaussian_compiled(x: torch.Tensor, z: torch.Tensor, c: float, multiplicative: bool, levels: bool) -> torch.Tensor:
    from ._cpu.noise import gaussian_kernel

    b, _, h, w = (int(s) for s in x.shape)
    require_shape("z", z.shape, (b, h, w, 3))
    out = np.empty(tuple(x.shape), dtype=np.uint8 if levels else np.float32)  # uint8: truncated
    gaussian_kernel(_np(x), _np(z).astype(np.float32, copy=False), np.float32(c), multiplicative, out)
    return torch.from_numpy(out)
