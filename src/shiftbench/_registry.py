"""Registry of image operations (ImageNet-C corruptions and, later, other families).

Each operation has two layers:

* ``sample(draws, ctx) -> dict[str, np.ndarray]`` draws every random quantity
  for *one* image from an explicit :class:`~shiftbench.seeding.Draws` source, in
  the reference implementation's draw order;
* ``apply(x, params, draws, ctx) -> Tensor`` is a pure function of a batch
  ``x`` (B x 3 x H x W, float, values in 0..255 as the reference code sees them
  after ``np.array(img)``), the severity parameters and the stacked draws. It
  returns the result in the same 0..255 domain (before the reference's final
  ``np.uint8`` truncation), on the device of ``x``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ._validate import suggest
from .errors import InvalidArgumentError, UnknownCorruptionError

__all__ = [
    "Corruption",
    "SampleContext",
    "ApplyContext",
    "register",
    "get_corruption",
    "list_corruptions",
    "FAMILIES",
    "GROUPS",
]

FAMILIES = ("noise", "blur", "weather", "digital", "occlusion", "geometric", "color", "style")
GROUPS = ("benchmark", "extra", "candidate", "style")
# Groups left out of list_corruptions() unless asked for by group (group="candidate" or the
# pattern "candidate"): the overlap study's candidate corruptions (shiftbench.overlap), which
# draw one value from a continuous range per image instead of following the ImageNet-C tables.
# "style": style transfer as a corruption (shiftbench.style), which needs a style folder and networks.
OPT_IN_GROUPS = ("candidate", "style")


@dataclass
class SampleContext:
    """What a sampler may look at for one image."""

    params: Any
    height: int
    width: int
    edition: str
    severity: int
    _image: Callable[[], np.ndarray] | None = None
    _levels: Callable[[], np.ndarray] | None = None

    @property
    def image(self) -> np.ndarray:
        """The image as float64 H x W x 3 in [0, 1], exactly ``np.array(img) / 255.``."""
        if self._image is None:
            raise RuntimeError("this sampler was called without access to the image")
        return self._image()

    @property
    def levels(self) -> np.ndarray:
        """The image as H x W x 3 uint8 levels (rounded for float inputs)."""
        if self._levels is None:
            raise RuntimeError("this sampler was called without access to the image")
        return self._levels()


@dataclass
class ApplyContext:
    """Batch-level facts passed to ``apply``.

    ``levels``: the caller truncates the result to 8-bit levels anyway, so ``apply`` may return
    them itself as uint8 (``uint8(clip(y, 0, 255))``, the same values) instead of floats.
    ``out``: where the caller keeps the 8-bit result (B x 3 x H x W uint8, CPU), or None; an
    ``apply`` that produces uint8 levels may write them there and return it, saving a copy.
    """

    edition: str
    severity: int
    extra: dict[str, Any] = field(default_factory=dict)
    levels: bool = False
    out: torch.Tensor | None = None

    def result_array(self, shape: tuple[int, ...], float_dtype: Any) -> np.ndarray:
        """Where a compiled kernel writes its result: the caller's 8-bit buffer (``out``, viewed as
        ``shape``) when it returns levels and that buffer fits, else a new uint8 array (``levels``)
        or a new ``float_dtype`` array."""
        if not self.levels:
            return np.empty(shape, dtype=float_dtype)
        o = self.out
        if o is not None and o.dtype == torch.uint8 and o.device.type == "cpu" and o.is_contiguous() and o.numel() == int(np.prod(shape)):
            return o.numpy().reshape(shape)
        return np.empty(shape, dtype=np.uint8)


SampleFn = Callable[[Any, SampleContext], dict[str, np.ndarray]]
ApplyFn = Callable[[torch.Tensor, Any, dict[str, torch.Tensor], ApplyContext], torch.Tensor]


@dataclass(frozen=True)
class Corruption:
    """One registered corruption."""

    name: str
    family: str
    group: str
    sample: SampleFn | None
    apply: ApplyFn
    params: Mapping[str, tuple[Any, ...]]
    dtype: torch.dtype = torch.float64
    needs_image: bool = False
    quantized_output: bool = False
    description: str = ""
    order: int = 0
    accepts_levels: bool = False  # apply() also takes the raw uint8 levels (of 8-bit inputs) for x
    # optional CPU route that draws and applies in one pass: fused(x, params, generators, ctx) must
    # equal apply(x, params, <the sampler's draws from those generators>, ctx) (tested per corruption)
    fused: Callable[..., torch.Tensor] | None = None
    # values per batch chunk on the CPU (corrupt() splits larger batches); None: the default, which
    # keeps a chunk's intermediates in cache. Kernels that work image by image set a larger one:
    # they gain nothing from small chunks and lose a call per chunk
    chunk_values: int | None = None

    def input_dtype(self, float_input: bool) -> torch.dtype:
        """The dtype ``apply`` receives: 8-bit inputs stay uint8 where the functional accepts levels
        (its CPU kernels read them directly: no float copy of the batch)."""
        return torch.uint8 if self.accepts_levels and not float_input else self.dtype

    @property
    def random(self) -> bool:
        return self.sample is not None

    @property
    def editions(self) -> tuple[str, ...]:
        return tuple(self.params)

    def severity_params(self, edition: str, severity: int) -> Any:
        return self.params[edition][severity - 1]


_REGISTRY: dict[str, Corruption] = {}


def register(
    name: str,
    *,
    family: str,
    group: str,
    sample: SampleFn | None,
    dtype: torch.dtype = torch.float64,
    needs_image: bool = False,
    quantized_output: bool = False,
    description: str = "",
    params: Mapping[str, tuple[Any, ...]] | None = None,
    accepts_levels: bool = False,
    fused: Callable[..., torch.Tensor] | None = None,
    chunk_values: int | None = None,
) -> Callable[[ApplyFn], ApplyFn]:
    """Decorator registering ``apply`` under ``name``.

    Parameters come from package data (``imagenet_c_params.json``) unless ``params``
    gives the per-edition table of 5 severity entries directly.
    """
    from ._params import imagenet_c_params

    if family not in FAMILIES:
        raise ValueError(f"family={family!r} must be one of {FAMILIES}")
    if group not in GROUPS:
        raise ValueError(f"group={group!r} must be one of {GROUPS}")

    def deco(fn: ApplyFn) -> ApplyFn:
        if name in _REGISTRY:
            raise ValueError(f"corruption {name!r} is already registered")
        table = dict(params) if params is not None else imagenet_c_params(name)
        _REGISTRY[name] = Corruption(
            name=name,
            family=family,
            group=group,
            sample=sample,
            apply=fn,
            params=table,
            dtype=dtype,
            needs_image=needs_image,
            quantized_output=quantized_output,
            description=description or (fn.__doc__ or "").strip().split("\n")[0],
            order=_paper_order(name),
            accepts_levels=accepts_levels,
            fused=fused,
            chunk_values=chunk_values,
        )
        return fn

    return deco


IMAGE_BY_IMAGE = 1 << 23
"""``chunk_values`` of corruptions whose CPU kernels work image by image (about 55 images of 224)."""


_PAPER_ORDER = (
    "gaussian_noise shot_noise impulse_noise defocus_blur glass_blur motion_blur zoom_blur snow frost fog "
    "brightness contrast elastic_transform pixelate jpeg_compression speckle_noise gaussian_blur spatter saturate"
).split()


def _paper_order(name: str) -> int:
    return _PAPER_ORDER.index(name) if name in _PAPER_ORDER else len(_PAPER_ORDER)


def _ensure_loaded() -> None:
    from . import corruptions  # noqa: F401  (registers everything)
    from .overlap import candidates  # noqa: F401  (the overlap study's candidate corruptions)


def get_corruption(name: str) -> Corruption:
    """The registered corruption called ``name`` (hyphens and case are tolerated)."""
    _ensure_loaded()
    if not isinstance(name, str):
        raise InvalidArgumentError("corruption", name, "a corruption name (str)")
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    if key in _REGISTRY:
        return _REGISTRY[key]
    names = sorted(_REGISTRY, key=_paper_order)
    raise UnknownCorruptionError("corruption", name, names, suggest(key, names))


def list_corruptions(
    pattern: str | list[str] | None = None,
    *,
    group: str | None = None,
    family: str | None = None,
    edition: str | None = None,
) -> list[str]:
    """Names of registered corruptions in the papers' order.

    Args:
        pattern: fnmatch wildcard(s) such as ``"*blur*"``; ``None`` means all.
            The words ``"benchmark"``, ``"extra"``, ``"candidate"``, ``"all"`` and the family
            names ``"noise"``, ``"blur"``, ``"weather"``, ``"digital"``... select groups.
        group: keep only ``"benchmark"`` (the 15), ``"extra"`` (the 4) or ``"candidate"``
            (the overlap study's candidates, see :mod:`shiftbench.overlap`).

    The ``"candidate"`` group is opt-in: it is listed only with ``group="candidate"`` or
    the pattern ``"candidate"``, so that the default listing stays the 19 ImageNet-C ones.
        family: keep only one family.
        edition: keep only corruptions defined for this edition.
    """
    _ensure_loaded()
    if edition is not None:
        from .editions import get_edition

        edition = get_edition(edition).name  # 224, "224", an Edition; unknown ones raise
    if group is not None and group not in GROUPS:
        raise InvalidArgumentError("group", group, f"one of {GROUPS} or None")
    if family is not None and family not in FAMILIES:
        raise InvalidArgumentError("family", family, f"one of {FAMILIES} or None")
    items = sorted(_REGISTRY.values(), key=lambda c: c.order)
    raw = [pattern] if isinstance(pattern, str) else list(pattern or [])
    wanted_opt_in = {g for g in OPT_IN_GROUPS if g == group or g in [str(p).strip().lower() for p in raw]}
    items = [c for c in items if c.group not in OPT_IN_GROUPS or c.group in wanted_opt_in]
    patterns = [pattern] if isinstance(pattern, str) else list(pattern or ["*"])
    selected: list[str] = []
    for pat in patterns:
        pat = pat.strip().lower().replace("-", "_")
        if pat in ("all", "*"):
            hits = [c.name for c in items]
        elif pat in GROUPS:
            hits = [c.name for c in items if c.group == pat]
        elif pat in FAMILIES:
            hits = [c.name for c in items if c.family == pat]
        else:
            hits = [c.name for c in items if fnmatch.fnmatchcase(c.name, pat)]
            if not hits and not any(ch in pat for ch in "*?["):
                get_corruption(pat)  # raises with suggestions
        for h in hits:
            if h not in selected:
                selected.append(h)
    out = []
    for c in items:
        if c.name not in selected:
            continue
        if group is not None and c.group != group:
            continue
        if family is not None and c.family != family:
            continue
        if edition is not None and edition not in c.params:
            continue
        out.append(c.name)
    return out
