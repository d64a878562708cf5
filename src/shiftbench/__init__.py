"""shiftbench: measure how image classifiers hold up under distribution shift.

Quick start::

    import shiftbench
    out = shiftbench.corrupt(images, "fog", severity=3, seed=0)
    shiftbench.list_corruptions("*blur*")
    result = shiftbench.evaluate("efficientnet-lite0", benchmark="imagenet-c")   # any registered benchmark
"""

from __future__ import annotations

import sys as _sys

from . import errors, style
from .api import Corrupt, corrupt, release_jpeg, sample_draws
from .corruptions._registry import Corruption, get_corruption, list_corruptions
from .editions import EDITIONS, Edition, edition_for_size, get_edition, preprocess
from .rng import seeding
from .style import set_style_source
from .version import __version__

__all__ = [
    "__version__",
    "corrupt",
    "Corrupt",
    "sample_draws",
    "release_jpeg",
    "list_corruptions",
    "get_corruption",
    "Corruption",
    "preprocess",
    "get_edition",
    "edition_for_size",
    "Edition",
    "EDITIONS",
    "errors",
    "seeding",
    "style",
    "set_style_source",
    "evaluate",
]

# published model weights: makes load_model("zoo:<name>") of the evaluation core resolve through shiftbench.zoo
from . import zoo  # noqa: E402,F401

# shiftbench.seeding, the per-image random streams' earlier home, names shiftbench.rng.seeding
# (``import shiftbench.seeding`` and ``from shiftbench.seeding import ...`` keep working)
_sys.modules[__name__ + ".seeding"] = seeding

def __getattr__(name: str) -> object:
    if name == "evaluate":  # the benchmark wing is imported on first use
        import importlib

        return importlib.import_module("shiftbench.benchmarks.front").evaluate
    raise AttributeError(f"module 'shiftbench' has no attribute {name!r}")
