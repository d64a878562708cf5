"""shiftbench: measure how image classifiers hold up under distribution shift.

Quick start::

    import shiftbench
    out = shiftbench.corrupt(images, "fog", severity=3, seed=0)
    shiftbench.list_corruptions("*blur*")
    result = shiftbench.evaluate("efficientnet-lite0", benchmark="imagenet-c")   # any registered benchmark
"""

from __future__ import annotations

from . import errors, style
from .api import Corrupt, corrupt, release_jpeg, sample_draws
from .corruptions._registry import Corruption, get_corruption, list_corruptions
from .editions import EDITIONS, Edition, edition_for_size, get_edition, preprocess
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
    "style",
    "set_style_source",
    "evaluate",
]

# published model weights: makes load_model("zoo:<name>") of the evaluation core resolve through shiftbench.zoo
from . import zoo  # noqa: E402,F401


def __getattr__(name: str) -> object:
    import importlib

    if name == "evaluate":  # the benchmark wing is imported on first use
        return importlib.import_module("shiftbench.benchmarks.front").evaluate
    if name == "seeding":  # the deprecated module (a DeprecationWarning names shiftbench.rng.seeding)
        return importlib.import_module("shiftbench.seeding")
    raise AttributeError(f"module 'shiftbench' has no attribute {name!r}")
