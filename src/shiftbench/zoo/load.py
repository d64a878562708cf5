"""Build a zoo model: architecture, cached and verified weights, the input recipe the weights expect."""

from __future__ import annotations

from pathlib import Path

import torch

from ..errors import InvalidArgumentError
from ..evaluation.models import Classifier, InputTransform, load_model, module_checksum
from .checkpoint import read_state_dict
from .download import ProgressCallback, sha256_of
from .registry import ZooEntry, fetch, get, verify_cached

__all__ = ["load_zoo_model", "transform_of"]


def transform_of(entry: ZooEntry) -> InputTransform:
    """The entry's preprocessing as an :class:`InputTransform`."""
    p = entry.preprocessing
    return InputTransform(p.size, p.mean, p.std, p.scale, p.interpolation, p.crop_fraction)


def load_zoo_model(
    name: str | ZooEntry,
    *,
    weights: str | Path | None = None,
    progress: ProgressCallback | None | bool = True,
    trust_cache: bool | None = None,
) -> Classifier:
    """Load ``zoo:<name>``: download its weights on first use (verified), build it, load them.

    Args:
        name: the entry's name (``"resnet50-augmix"`` or ``"zoo:resnet50-augmix"``) or a :class:`ZooEntry`.
        weights: a local copy of the entry's file to use instead of the cache
            (checked against the published checksum when there is one).
        progress: see :func:`shiftbench.zoo.fetch`.
        trust_cache: use a cached file whose checksum differs from the published one (default:
            ``SHIFTBENCH_TRUST_CACHE``); otherwise it is refused with both digests and its path.

    Raises:
        UnknownNameError: no such entry.
        OfflineError / DownloadError / ChecksumMismatchError: the weights could not be fetched or verified.
        UnsafeCheckpointError: the file needs code to unpickle; refused, nothing run.
        InvalidArgumentError: the file's tensors do not fit the architecture.
    """
    entry = get(name) if isinstance(name, str) else name
    if weights is None:
        path = fetch(entry, progress=progress, trust_cache=trust_cache)
    else:
        path = Path(weights).expanduser()
        if not path.is_file():
            raise InvalidArgumentError("weights", str(weights), f"a local copy of {entry.cache_name}")
        verify_cached(entry, path, trust_cache=trust_cache)
    clf = load_model(entry.arch, weights="none")
    module = clf.forward
    if not isinstance(module, torch.nn.Module):  # every arch name builds a module
        raise InvalidArgumentError("arch", entry.arch, "an architecture name that builds an nn.Module")
    state = read_state_dict(path, key=entry.state_dict_key, strip_prefix=entry.strip_prefix, remap=entry.key_remap)
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise InvalidArgumentError(
            "weights", str(path), f"a state_dict for the architecture {entry.arch!r}", str(e).replace("\n\t", " ")[:400]
        ) from e
    module.eval()
    clf.name = f"zoo:{entry.name}"
    clf.transform = transform_of(entry)
    clf.checksum = module_checksum(module)
    clf.details = {
        **clf.details,
        "weights": entry.url,
        "weights_file": str(path),
        "weights_file_checksum": "sha256:" + sha256_of(path),
        "published_checksum": entry.checksum,
        "source": entry.source,
    }
    return clf
