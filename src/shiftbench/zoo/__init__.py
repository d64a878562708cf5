"""The model zoo: published robustness classifiers by name, verified downloads, the papers' tables.

>>> from shiftbench.zoo import get
>>> get("resnet50-augmix").arch
'torchvision:resnet50'

``load_model("zoo:resnet50-augmix")`` downloads the weights on first use into
``~/.cache/shiftbench/zoo`` (or ``$SHIFTBENCH_CACHE/zoo``), checks them against
the published checksum, and loads them with ``torch.load(weights_only=True)``.
:mod:`shiftbench.zoo.tables` holds the published tables and renders them next
to measured values.
"""

from __future__ import annotations

from ..evaluation.models import Classifier, register_model_source
from .download import cache_dir, download
from .errors import ChecksumMismatchError, DownloadError, NotACheckpointError, OfflineError, UnsafeCheckpointError
from .load import load_zoo_model
from .registry import Preprocessing, ZooEntry, entries, fetch, get, register, unregister, weights_path


def _zoo_source(name: str, weights: str | None) -> Classifier:
    return load_zoo_model(name, weights=weights)


register_model_source("zoo", _zoo_source)  # load_model("zoo:<name>")

__all__ = [
    "ZooEntry",
    "Preprocessing",
    "entries",
    "get",
    "register",
    "unregister",
    "weights_path",
    "fetch",
    "cache_dir",
    "download",
    "load_zoo_model",
    "DownloadError",
    "OfflineError",
    "ChecksumMismatchError",
    "NotACheckpointError",
    "UnsafeCheckpointError",
]
