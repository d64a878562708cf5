"""The zoo's entries: published classifiers by name, their weights files and how to load them.

Entries ship as package data (``shiftbench/data/zoo_models.json``); more can be
added at run time with :func:`register` (e.g. a lab's own checkpoints on an
internal server).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..errors import InvalidArgumentError
from ..registry import Registry
from .download import ProgressCallback, cache_dir, default_progress, download, sha256_of
from .errors import CachedChecksumError

__all__ = ["Preprocessing", "ZOO", "ZooEntry", "entries", "get", "register", "unregister", "weights_path", "fetch"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9.+_-]*$")
_HEX = re.compile(r"^[0-9a-f]{8,64}$")


@dataclass(frozen=True)
class Preprocessing:
    """A model's input recipe (see :class:`shiftbench.evaluation.models.InputTransform`)."""

    size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    scale: float
    interpolation: str
    crop_fraction: float
    source: str = ""


@dataclass(frozen=True)
class ZooEntry:
    """One published classifier.

    Attributes:
        name: the zoo name (``load_model("zoo:<name>")``).
        arch: the architecture, as a :func:`~shiftbench.evaluation.models.load_model`
            name (``"torchvision:resnet50"``, ``"timm:tf_efficientnet_l2"``, ``"efficientnet-lite0"``).
        url: where the weights are published.
        preprocessing: the input recipe the weights expect.
        sha256_prefix: the published SHA-256 (or its first hex digits); None when none is published.
        size_bytes: the published size, if any.
        file_name: the name in the cache (default: the URL's last path segment).
        state_dict_key: the entry of a training checkpoint that holds the state_dict.
        strip_prefix: removed from every parameter name (``"module."``).
        key_remap: ``(regex, replacement)`` pairs for old parameter names.
        page: a web page to download the file from by hand (file hosts that need a browser).
        description, source, checksum_note: provenance, shown by ``shiftbench zoo``.
        licence: the licence the publisher states for the weights (or the repository that publishes them).
    """

    name: str
    arch: str
    url: str
    preprocessing: Preprocessing
    sha256_prefix: str | None = None
    size_bytes: int | None = None
    file_name: str | None = None
    state_dict_key: str | None = None
    strip_prefix: str | None = None
    key_remap: tuple[tuple[str, str], ...] = ()
    page: str | None = None
    description: str = ""
    source: str = ""
    checksum_note: str = ""
    licence: str = ""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise InvalidArgumentError(
                "name", self.name, "lower-case letters, digits and . + _ - (e.g. 'resnet50-augmix')"
            )
        if self.sha256_prefix is not None and not _HEX.match(self.sha256_prefix):
            raise InvalidArgumentError("sha256_prefix", self.sha256_prefix, "None or 8 to 64 lower-case hex digits")
        if urlparse(self.url).scheme not in ("http", "https"):
            raise InvalidArgumentError("url", self.url, "an http:// or https:// URL")

    @property
    def cache_name(self) -> str:
        """The weights file's name in the cache."""
        return self.file_name or Path(urlparse(self.url).path).name

    @property
    def checksum(self) -> str:
        """A one-line statement of what is verified."""
        parts = []
        if self.sha256_prefix:
            parts.append(f"sha256 {self.sha256_prefix}{'' if len(self.sha256_prefix) == 64 else '...'}")
        if self.size_bytes:
            parts.append(f"{self.size_bytes} bytes")
        return ", ".join(parts) if parts else "none published"


def _entry_from_json(name: str, d: Mapping[str, Any], presets: Mapping[str, Any]) -> ZooEntry:
    pre = d["preprocessing"]
    p = dict(presets[pre]) if isinstance(pre, str) else dict(pre)
    prep = Preprocessing(
        int(p["size"]),
        tuple(float(v) for v in p["mean"]),  # type: ignore[arg-type]
        tuple(float(v) for v in p["std"]),  # type: ignore[arg-type]
        float(p["scale"]),
        str(p["interpolation"]),
        float(p["crop_fraction"]),
        str(p.get("source", "")),
    )
    return ZooEntry(
        name=name,
        arch=d["arch"],
        url=d["url"],
        preprocessing=prep,
        sha256_prefix=d.get("sha256_prefix"),
        size_bytes=d.get("size_bytes"),
        file_name=d.get("file_name"),
        state_dict_key=d.get("state_dict_key"),
        strip_prefix=d.get("strip_prefix"),
        key_remap=tuple((a, b) for a, b in d.get("key_remap", ())),
        page=d.get("page"),
        description=d.get("description", ""),
        source=d.get("source", ""),
        checksum_note=d.get("checksum_note", ""),
        licence=d.get("licence", ""),
    )


@lru_cache(maxsize=1)
def _shipped() -> dict[str, ZooEntry]:
    text = resources.files("shiftbench").joinpath("data/zoo_models.json").read_text(encoding="utf-8")
    data = json.loads(text)
    return {n: _entry_from_json(n, d, data["preprocessing"]) for n, d in data["models"].items()}


def _zoo_entry(name: str, entry: ZooEntry) -> ZooEntry:
    if not isinstance(entry, ZooEntry) or entry.name != name:
        raise InvalidArgumentError("entry", name, "a ZooEntry registered under its own name")
    return entry


def _zoo_name(name: str) -> str:
    key = str(name).strip()
    key = key[4:] if key.lower().startswith("zoo:") else key
    return key.strip().lower()


ZOO: Registry[ZooEntry] = Registry(
    "model", group="shiftbench.zoo", normalise=_zoo_name, check=_zoo_entry, cutoff=0.5, order=str,
    shown=lambda n: f"zoo:{n}", entries=_shipped())
"""The zoo's entries by name (a :class:`~shiftbench.registry.Registry`): the shipped ones, those added with
:func:`register`, and those an installed package names in the entry-point group ``shiftbench.zoo`` (a
:class:`ZooEntry` under its own name)."""


def entries() -> dict[str, ZooEntry]:
    """All entries by name: the shipped ones, then those added with :func:`register`."""
    return dict(ZOO.items())


def register(entry: ZooEntry, *, replace: bool = False) -> ZooEntry:
    """Add an entry (for this process). Refuses to shadow an existing name unless ``replace``."""
    if not isinstance(entry, ZooEntry):
        raise InvalidArgumentError("entry", type(entry).__name__, "a ZooEntry")
    if entry.name in ZOO and not replace:
        raise InvalidArgumentError("entry", entry.name, "a name not in the zoo yet", "Pass replace=True to override.")
    return ZOO.register(entry.name, entry, replace=True)


def unregister(name: str) -> None:
    """Remove an entry added with :func:`register` (a shipped entry stays, as shipped)."""
    key = _zoo_name(name)
    shipped = _shipped().get(key)
    if shipped is not None:
        ZOO.register(key, shipped, replace=True)
    else:
        ZOO.unregister(key)


def get(name: str) -> ZooEntry:
    """The entry called ``name`` (a leading ``zoo:`` is ignored).

    Raises:
        UnknownNameError: no such entry (with close names suggested).
    """
    return ZOO.get(name)


def weights_path(entry: ZooEntry | str) -> Path:
    """Where the entry's weights file lives in the cache (whether or not it is there yet)."""
    e = get(entry) if isinstance(entry, str) else entry
    return cache_dir() / e.name / e.cache_name


def trust_cache_default() -> bool:
    """``SHIFTBENCH_TRUST_CACHE=1`` (or true/yes): use cached files whose checksum differs from the published one."""
    import os

    return os.environ.get("SHIFTBENCH_TRUST_CACHE", "").strip().lower() in ("1", "true", "yes")


_VERIFIED: dict[tuple[str, int, int], str] = {}


def verify_cached(e: ZooEntry, path: Path, *, trust_cache: bool | None = None) -> Path:
    """Check a file already on disk against the entry's published SHA-256 (prefix) and size.

    Raises:
        CachedChecksumError: it differs (naming both digests and the path), unless ``trust_cache``
            (default: :func:`trust_cache_default`).
    """
    trust = trust_cache_default() if trust_cache is None else trust_cache
    if trust or (not e.sha256_prefix and e.size_bytes is None):
        return path
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    digest = _VERIFIED.get(key) or sha256_of(path)
    if e.size_bytes is not None and st.st_size != e.size_bytes:
        raise CachedChecksumError(e.url, path, f"{e.size_bytes} bytes", f"{st.st_size} bytes (sha256 {digest})")
    if e.sha256_prefix and not digest.startswith(e.sha256_prefix.lower()):
        raise CachedChecksumError(e.url, path, f"sha256 {e.sha256_prefix}...", f"sha256 {digest}")
    _VERIFIED[key] = digest
    return path


def fetch(
    entry: ZooEntry | str, *, progress: ProgressCallback | None | bool = True, trust_cache: bool | None = None
) -> Path:
    """Make sure the entry's weights are in the cache (download, verify); return their path.

    A file already in the cache is checked against the published checksum too (:func:`verify_cached`): one that
    differs is refused unless ``trust_cache``.

    Args:
        entry: a :class:`ZooEntry` or its name.
        progress: True: a rich bar on a terminal; False/None: silent; or a callback
            ``(bytes_done, bytes_total)``.
        trust_cache: use a cached file whatever its checksum (default: ``SHIFTBENCH_TRUST_CACHE``).
    """
    e = get(entry) if isinstance(entry, str) else entry
    dest = weights_path(e)
    if dest.is_file():
        return verify_cached(e, dest, trust_cache=trust_cache)
    stop = None
    if progress is True:
        cb, stop = default_progress(f"zoo:{e.name}")
    else:
        cb = progress if callable(progress) else None
    try:
        return download(e.url, dest, sha256=e.sha256_prefix, size=e.size_bytes, progress=cb)
    finally:
        if stop is not None:
            stop()
