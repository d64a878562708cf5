"""Style transfer as a corruption (Hendrycks & Dietterich, 2018 draft, Section 4.2).

Quick start::

    import shiftbench
    shiftbench.set_style_source("paintings/")                  # any folder of images
    shiftbench.style.configure(vgg="vgg_normalised.pth", decoder="decoder.pth")   # AdaIN, the paper's method
    # or, offline and NOT the paper's AdaIN: shiftbench.style.configure(backend="magenta-lite")
    y = shiftbench.corrupt(images, "style_transfer", severity=3, seed=0)
    shiftbench.style.style_settings()                          # style-set digest, backend, schedule: record it

The corruption is registered in its own group (``"style"``), so ``list_corruptions()`` stays
the 19 ImageNet-C corruptions; ``list_corruptions("style")`` lists it. Severities follow a
schedule that shiftbench chose (``data/style_schedule.json``; the paper's settings were never
published); :func:`stylize` also takes severity 0, the clean images. Scores (CE against
AlexNet's published 75.7 % mean error, relative CE) are in :mod:`shiftbench.benchmarks.style_scores`.
"""

from __future__ import annotations

from typing import Any

from .backends import (
    BACKENDS,
    SHIPPED_SCHEDULE,
    AdaINBackend,
    MagentaLiteBackend,
    Schedule,
    StyleBackend,
    StyleConfig,
    StyleLevel,
    configure,
    set_style_source,
    style_backend,
    style_schedule,
    style_settings,
    style_source,
)
from .networks import AdaINNetworks, adain, mean_std
from .source import StyleSource

__all__ = [
    "configure",
    "set_style_source",
    "style_source",
    "style_backend",
    "style_schedule",
    "style_settings",
    "stylize",
    "Schedule",
    "StyleLevel",
    "StyleSource",
    "StyleBackend",
    "StyleConfig",
    "AdaINBackend",
    "MagentaLiteBackend",
    "BACKENDS",
    "SHIPPED_SCHEDULE",
    "AdaINNetworks",
    "adain",
    "mean_std",
]


def stylize(images: Any, severity: int, **kwargs: Any) -> Any:
    """``shiftbench.corrupt(images, "style_transfer", severity, **kwargs)`` for severities 1..5;
    severity 0 returns ``images`` themselves (the clean images; AdaIN at alpha = 0 would not be:
    its decoder still redraws the content)."""
    from ..api import corrupt
    from ..checks import check_severity

    if check_severity(severity, low=0, high=5) == 0:
        return images
    return corrupt(images, "style_transfer", severity, **kwargs)
