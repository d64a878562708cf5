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

from pathlib import Path

from ..evaluation.model_sources import register_weights_fetcher
from ..evaluation.models import Classifier, register_model_source
from .download import cache_dir, default_progress, download
from .errors import ChecksumMismatchError, DownloadError, NotACheckpointError, OfflineError, UnsafeCheckpointError
from .load import load_zoo_model
from .registry import Preprocessing, ZooEntry, entries, fetch, get, register, unregister, weights_path


def _zoo_source(name: str, weights: str | None) -> Classifier:
    return load_zoo_model(name, weights=weights)


def _fetch_library_weights(url: str, dest: Path, sha256: str | None) -> Path:
    cb, stop = default_progress(Path(dest).name)
    try:
        return download(url, dest, sha256=sha256, progress=cb)
    finally:
        stop()


register_model_source("zoo", _zoo_source)  # load_model("zoo:<name>")
register_weights_fetcher(_fetch_library_weights)  # torchvision:/timm:/hf-hub: weights missing from the caches

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
