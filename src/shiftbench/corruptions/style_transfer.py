"""Style transfer as a corruption (Hendrycks & Dietterich, 2018 draft, Section 4.2): group ``"style"``.

Each image is rendered in the style of an image drawn from a style folder
(:func:`shiftbench.set_style_source`), by the configured backend (AdaIN by default, see
:mod:`shiftbench.style`), at the severity's setting of the style schedule. Per image, the
engine's generator of ``(seed, image key, "style_transfer", severity)`` draws the style's
index in the folder's order and the position of its crop, so the result does not depend on
the batch, its order or the worker that computes it. The draws are indices into the style
set: record :func:`shiftbench.style.style_settings` (the set's digest) with the results.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..errors import InvalidArgumentError
from ..style.backends import SHIPPED_SCHEDULE, style_backend, style_schedule, style_source
from ._registry import ApplyContext, SampleContext, per_pixel, register

__all__ = ["style_transfer"]


def _sample(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    n = len(style_source())
    return {
        "style": np.asarray(draws.integers(0, n), dtype=np.int64),
        "crop": np.asarray(draws.random(2), dtype=np.float64),
    }


@register(
    "style_transfer",
    family="style",
    group="style",
    namespace="style",
    sample=_sample,
    dtype=torch.float32,
    params=SHIPPED_SCHEDULE.params(),
    description="Style transfer: the image rendered in a randomly drawn style image's style (AdaIN by default)",
    memory=per_pixel(2048),  # the networks' feature maps at full resolution: measured 900 bytes per pixel at 512 x 512
)
def style_transfer(x: torch.Tensor, p: Any, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Render each image in its drawn style (x: B x 3 x H x W float32 in 0..255; returns 0..255).

    ``p`` is the shipped schedule's level; the active schedule (``configure(schedule=...)``) wins.
    """
    level = style_schedule().level(ctx.edition, ctx.severity)
    src = style_source()
    idx = [int(v) for v in d["style"].reshape(-1).tolist()]
    bad = [i for i in idx if not 0 <= i < len(src)]
    if bad:
        raise InvalidArgumentError(
            "draws", bad, f"style indices in 0..{len(src) - 1} (the configured style folder has {len(src)} images)"
        )
    crops = d["crop"].reshape(-1, 2).tolist()
    styles = [src.crop(i, level.style_size, level.style_crop, fy, fx) for i, (fy, fx) in zip(idx, crops)]
    y = style_backend().stylize(x / 255.0, styles, level)
    return y * 255.0
