"""Registry of image operations: a leaf module that imports no corruption.

The corruption modules register themselves on import (``shiftbench.corruptions``, imported by
:mod:`shiftbench.api`), as timm's model files fill its registry. Every corruption lives in a
*namespace*: ``"imagenet_c"`` (the default: the 19 ImageNet-C corruptions) and ``"noc"`` (the 25
candidate corruptions of the non-overlapping-corruptions papers); a new family of operations is
one ``register(..., namespace="...")`` argument away.

Each operation has two layers:

* ``sample(draws, ctx) -> dict[str, np.ndarray]`` draws every random quantity
  for *one* image from an explicit :class:`~shiftbench.rng.seeding.Draws` source, in
  the reference implementation's draw order;
* ``apply(x, params, draws, ctx) -> Tensor`` is a pure function of a batch
  ``x`` (B x 3 x H x W, float, values in 0..255 as the reference code sees them
  after ``np.array(img)``), the severity parameters and the stacked draws. It
  returns the result in the same 0..255 domain (before the reference's final
  ``np.uint8`` truncation), on the device of ``x``.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..checks import suggest
from ..errors import InvalidArgumentError, UnknownCorruptionError, UnknownNameError
from ..registry import Registry

__all__ = [
    "Backend",
    "TENSOR",
    "BACKEND_DESCRIPTIONS",
    "BoundsFn",
    "MemoryFn",
    "DEFAULT_BYTES_PER_PIXEL",
    "per_pixel",
    "Corruption",
    "SampleContext",
    "ApplyContext",
    "register",
    "CORRUPTIONS",
    "get_corruption",
    "list_corruptions",
    "list_namespaces",
    "FAMILIES",
    "DEFAULT_NAMESPACE",
]

FAMILIES = ("noise", "blur", "weather", "digital", "occlusion", "geometric", "color", "style")
DEFAULT_NAMESPACE = "imagenet_c"
"""The namespace :func:`list_corruptions` lists unless told otherwise: the 19 ImageNet-C corruptions."""


@dataclass(frozen=True)
class Backend:
    """What one implementation of a corruption's ``apply`` runs on.

    Every corruption has the ``"tensor"`` backend (:data:`TENSOR`: torch operations on any device,
    the path the others must equal bit for bit in 8-bit output); some register a compiled CPU
    kernel (``"compiled"``) or a reference route (``"pillow"``) with :meth:`Corruption.kernel`.
    """

    name: str
    description: str
    devices: tuple[str, ...] | None = None  # device types it runs on; None: any
    dtypes: tuple[torch.dtype, ...] | None = None  # dtypes of x it takes; None: any

    def supports(self, device: torch.device | str, dtype: torch.dtype) -> bool:
        """Whether a batch of ``dtype`` on ``device`` can take this backend."""
        kind = torch.device(device).type
        return (self.devices is None or kind in self.devices) and (self.dtypes is None or dtype in self.dtypes)

    def describe_support(self) -> str:
        devs = "any device" if self.devices is None else "/".join(self.devices) + " tensors"
        dts = "" if self.dtypes is None else " of dtype " + "/".join(str(d).replace("torch.", "") for d in self.dtypes)
        return devs + dts


TENSOR = Backend("tensor", "torch operations on any device (the reference path of every corruption)")

BACKEND_DESCRIPTIONS: dict[str, str] = {
    "compiled": "Numba kernels compiled for the CPU",
    "pillow": "Pillow itself, image by image (the reference's route)",
}
"""Descriptions of the usual backend names (:meth:`Corruption.kernel` takes another with ``description=``)."""


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
    ``backend``: the implementation to run, one of the corruption's :attr:`Corruption.backends`
    (:func:`shiftbench.corrupt` picks it with :meth:`Corruption.select_backend`).
    """

    edition: str
    severity: int
    extra: dict[str, Any] = field(default_factory=dict)
    levels: bool = False
    out: torch.Tensor | None = None
    backend: str = "tensor"

    def result_array(self, shape: tuple[int, ...], float_dtype: Any) -> np.ndarray:
        """Where a compiled kernel writes its result: the caller's 8-bit buffer (``out``, viewed as
        ``shape``) when it returns levels and that buffer fits, else a new uint8 array (``levels``)
        or a new ``float_dtype`` array."""
        if not self.levels:
            return np.empty(shape, dtype=float_dtype)
        o = self.out
        if (
            o is not None
            and o.dtype == torch.uint8
            and o.is_cpu
            and o.is_contiguous()
            and o.numel() == math.prod(shape)
        ):
            return o.numpy().reshape(shape)
        return np.empty(shape, dtype=np.uint8)


SampleFn = Callable[[Any, SampleContext], dict[str, np.ndarray]]
ApplyFn = Callable[[torch.Tensor, Any, dict[str, torch.Tensor], ApplyContext], torch.Tensor]
BoundsFn = Callable[[int, int, str, Any, Mapping[str, np.ndarray]], dict[str, tuple[Any, Any]]]
"""``bounds(h, w, edition, params, draws) -> {key: (low, high)}``: the inclusive ranges a replayed
draw must lie in for an h x w image (scalars or per-element arrays); keys not listed: any finite value."""
MemoryFn = Callable[[int, int, str, Any], int]
"""``memory(h, w, edition, params) -> bytes``: the most memory corrupting one h x w image takes at once (its draws,
intermediates and operators; the input and output batches are counted by the caller)."""

DEFAULT_BYTES_PER_PIXEL = 240
"""Working memory per pixel of a corruption that declares none: ten float64 copies of an RGB image
(``perf/memory_per_pixel.py`` measures every corruption; the declared values are at least its peaks)."""


def per_pixel(nbytes: float) -> MemoryFn:
    """A :data:`MemoryFn` of ``nbytes`` per pixel (intermediates that grow with the image's area only)."""
    return lambda h, w, edition, params: int(nbytes * h * w)


@dataclass(frozen=True, eq=False)
class Corruption:
    """One registered corruption: its facts, its sampler and its kernels.

    ``tensor`` is the reference implementation of ``apply`` (torch operations, any device); other
    implementations are registered functions (:meth:`kernel`) with the same signature, and
    :meth:`apply` is the one dispatcher that runs the kernel ``ApplyContext.backend`` names.
    """

    name: str
    family: str
    group: str
    sample: SampleFn | None
    tensor: ApplyFn
    params: Mapping[str, Any]
    dtype: torch.dtype = torch.float64
    needs_image: bool = False
    quantized_output: bool = False
    description: str = ""
    order: int = 0
    accepts_levels: bool = False  # apply() also takes the raw uint8 levels (of 8-bit inputs) for x
    # values per batch chunk on the CPU (corrupt() splits larger batches); None: the default, which
    # keeps a chunk's intermediates in cache. Kernels that work image by image set a larger one:
    # they gain nothing from small chunks and lose a call per chunk
    chunk_values: int | None = None
    namespace: str = DEFAULT_NAMESPACE
    bounds: BoundsFn | None = None
    # the record type of a severity's parameters (a NamedTuple class), or None: the table's values as they are
    record: type | None = None
    # working memory of one image (MemoryFn); None: DEFAULT_BYTES_PER_PIXEL
    memory: MemoryFn | None = None
    # backend name -> (what it runs on, its kernel), "tensor" first, in the order backend="auto" tries them
    kernels: dict[str, tuple[Backend, ApplyFn]] = field(default_factory=dict, repr=False)
    # optional route of the compiled kernel that draws and applies in one pass (see kernel())
    draw_apply: Callable[..., torch.Tensor] | None = field(default=None, repr=False)
    draw_backend: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.kernels.setdefault(TENSOR.name, (TENSOR, self.tensor))

    def kernel(
        self,
        backend: str,
        *dtypes: torch.dtype,
        devices: tuple[str, ...] | None = ("cpu",),
        description: str | None = None,
        draw_apply: Callable[..., torch.Tensor] | None = None,
    ) -> Callable[[ApplyFn], ApplyFn]:
        """Decorator registering a function as this corruption's ``backend`` implementation.

        The function takes what the tensor path takes, ``(x, params, draws, ctx)``, and must give its
        8-bit output bit for bit (``tests/contracts.py`` checks every registered kernel). ``dtypes``:
        the dtypes of ``x`` it accepts (none: any); ``devices``: the device types it runs on (default
        the CPU; None: any). ``draw_apply(x, params, generators, ctx)``, a route of this backend that
        draws and applies in one pass, must equal the kernel on the sampler's draws from those
        generators. Registering a backend twice raises ``ValueError``.
        """
        if not isinstance(backend, str) or not backend.isidentifier() or backend == "auto":
            raise ValueError(f"backend={backend!r} must be an identifier other than 'auto'")

        def deco(fn: ApplyFn) -> ApplyFn:
            if backend in self.kernels:
                raise ValueError(f"{self.name!r} already has a {backend!r} kernel")
            text = description or BACKEND_DESCRIPTIONS.get(backend) or (fn.__doc__ or backend).strip().split("\n")[0]
            self.kernels[backend] = (Backend(backend, text, devices, tuple(dtypes) or None), fn)
            if draw_apply is not None:
                object.__setattr__(self, "draw_apply", draw_apply)  # the record is frozen for its users
                object.__setattr__(self, "draw_backend", backend)
            return fn

        return deco

    @property
    def implementations(self) -> tuple[Backend, ...]:
        """What each backend runs on, ``"tensor"`` first."""
        return tuple(b for b, _ in self.kernels.values())

    @property
    def backends(self) -> tuple[str, ...]:
        """Names of this corruption's implementations, ``"tensor"`` first."""
        return tuple(self.kernels)

    def backend(self, name: str) -> Backend:
        """The implementation called ``name`` (:class:`~shiftbench.errors.UnknownNameError` if none)."""
        hit = self.kernels.get(name) if isinstance(name, str) else None
        if hit is None:
            raise UnknownNameError("backend", name, ["auto", *self.backends], suggest(str(name), self.backends))
        return hit[0]

    def select_backend(self, device: torch.device | str, dtype: torch.dtype, backend: str = "auto") -> str:
        """The backend that runs a batch of ``dtype`` on ``device``.

        ``"auto"``: the first non-tensor backend that supports the batch, else ``"tensor"``.
        A named backend must exist for this corruption and support the batch, else
        :class:`~shiftbench.errors.InvalidArgumentError` (``UnknownNameError`` for a name it lacks).
        """
        if backend == "auto":
            for b in self.implementations[1:]:
                if b.supports(device, dtype):
                    return b.name
            return TENSOR.name
        if not isinstance(backend, str):
            raise InvalidArgumentError("backend", backend, f"one of {['auto', *self.backends]}")
        b = self.backend(backend)
        if not b.supports(device, dtype):
            runs = [n for n, (impl, _) in self.kernels.items() if impl.supports(device, dtype)]
            raise InvalidArgumentError(
                "backend",
                backend,
                f"a backend of {self.name} that runs this batch ({torch.device(device).type}, "
                f"{str(dtype).replace('torch.', '')}): {runs}",
                f"{backend!r} runs on {b.describe_support()}.",
            )
        return b.name

    def kernel_for(self, device: torch.device | str, dtype: torch.dtype, backend: str = "auto") -> ApplyFn:
        """The kernel that runs a batch of ``dtype`` on ``device`` (``backend`` as :meth:`select_backend`)."""
        return self.kernels[self.select_backend(device, dtype, backend)][1]

    def apply(self, x: torch.Tensor, params: Any, draws: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
        """Run the kernel of ``ctx.backend`` (the dispatcher; :func:`shiftbench.corrupt` picks the
        backend with :meth:`select_backend`)."""
        self.backend(ctx.backend)
        if self.record is not None and not isinstance(params, self.record):
            params = self.record(*params)  # a plain row of the table (e.g. ImageNet-P's own levels)
        return self.kernels[ctx.backend][1](x, params, draws, ctx)

    __call__ = apply

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

    def working_memory(self, height: int, width: int, edition: str, params: Any) -> int:
        """Bytes corrupting one ``height`` x ``width`` image takes at most (its :attr:`memory`; checked against the
        memory available before any work, so a size the machine cannot hold is a typed error, not an OOM kill)."""
        if self.memory is None:
            return DEFAULT_BYTES_PER_PIXEL * int(height) * int(width)
        return int(self.memory(int(height), int(width), edition, params))


def _corruption(name: str, entry: Corruption) -> Corruption:
    if not isinstance(entry, Corruption) or entry.name != name:
        raise InvalidArgumentError("corruption", name, "a Corruption registered under its own name (@register)")
    return entry


CORRUPTIONS: Registry[Corruption] = Registry(
    "corruption", group="shiftbench.corruptions", normalise=lambda s: str(s).strip().lower().replace("-", "_").replace(" ", "_"),
    check=_corruption, error=UnknownCorruptionError, order=lambda n: _paper_order(n), cutoff=0.5,
)
"""The registered corruptions by name, in every namespace (a :class:`~shiftbench.registry.Registry`; an installed
package adds its own through the entry-point group ``shiftbench.corruptions``, each naming a corruption made with
:func:`register`; hyphens, spaces and case are tolerated in lookups)."""


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
    params: Mapping[str, Any] | type | None = None,
    bounds: BoundsFn | None = None,
    accepts_levels: bool = False,
    chunk_values: int | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    memory: MemoryFn | None = None,
) -> Callable[[ApplyFn], Corruption]:
    """Decorator registering the tensor path ``apply`` of a corruption called ``name`` in ``namespace``.

    It returns the :class:`Corruption`, whose :meth:`~Corruption.kernel` decorator registers the
    other backends (``@defocus_blur.kernel("compiled", torch.uint8)``); calling it runs the
    dispatcher. ``params``: the per-edition table of 5 severity entries, or a record type (a
    ``NamedTuple`` class) whose fields name the entries of the package's ImageNet-C table
    (``imagenet_c_params.json``: each row becomes a record); None: that table's rows as they are.
    ``bounds``: the ranges replayed draws must lie in (:data:`BoundsFn`). ``memory``: its working memory per
    image (:data:`MemoryFn`; default :data:`DEFAULT_BYTES_PER_PIXEL` per pixel). Names are unique across
    namespaces (:func:`get_corruption` finds a name in any namespace); ``group`` is a free label
    inside the namespace (ImageNet-C: ``"benchmark"`` and ``"extra"``).
    """
    from ..params import imagenet_c_params

    if family not in FAMILIES:
        raise ValueError(f"family={family!r} must be one of {FAMILIES}")
    for label, value in (("group", group), ("namespace", namespace)):
        if not isinstance(value, str) or not value.isidentifier():
            raise ValueError(f"{label}={value!r} must be a lower-case identifier")

    def deco(fn: ApplyFn) -> Corruption:
        if CORRUPTIONS.registered(name):
            raise ValueError(f"corruption {name!r} is already registered")
        if params is None or isinstance(params, type):
            table: dict[str, Any] = dict(imagenet_c_params(name))
            if isinstance(params, type):
                table = {ed: tuple(params(*row) for row in rows) for ed, rows in table.items()}
        else:
            table = dict(params)
        spec = Corruption(
            name=name,
            family=family,
            group=group,
            sample=sample,
            tensor=fn,
            params=table,
            dtype=dtype,
            needs_image=needs_image,
            quantized_output=quantized_output,
            description=description or (fn.__doc__ or "").strip().split("\n")[0],
            order=_paper_order(name),
            accepts_levels=accepts_levels,
            chunk_values=chunk_values,
            namespace=namespace,
            bounds=bounds,
            record=params if isinstance(params, type) else None,
            memory=memory,
        )
        CORRUPTIONS.register(name, spec)
        return spec

    return deco


IMAGE_BY_IMAGE = 1 << 23
"""``chunk_values`` of corruptions whose CPU kernels work image by image (about 55 images of 224)."""


_PAPER_ORDER = (
    "gaussian_noise shot_noise impulse_noise defocus_blur glass_blur motion_blur zoom_blur snow frost fog "
    "brightness contrast elastic_transform pixelate jpeg_compression speckle_noise gaussian_blur spatter saturate"
).split()


def _paper_order(name: str) -> int:
    return _PAPER_ORDER.index(name) if name in _PAPER_ORDER else len(_PAPER_ORDER)


def get_corruption(name: str) -> Corruption:
    """The registered corruption called ``name``, in any namespace (hyphens and case are tolerated)."""
    if not isinstance(name, str):
        raise InvalidArgumentError("corruption", name, "a corruption name (str)")
    return CORRUPTIONS.get(name)


def list_namespaces() -> list[str]:
    """The namespaces that hold at least one corruption, the default one first."""
    found = {c.namespace for _, c in CORRUPTIONS.items()}
    return sorted(found, key=lambda n: (n != DEFAULT_NAMESPACE, n))


def list_corruptions(
    pattern: str | list[str] | None = None,
    *,
    namespace: str | None = None,
    group: str | None = None,
    family: str | None = None,
    edition: str | None = None,
) -> list[str]:
    """Names of registered corruptions in the papers' order.

    Args:
        pattern: fnmatch wildcard(s) such as ``"*blur*"``; ``None`` means all.
            The word ``"all"``, group names (``"benchmark"``, ``"extra"``, ``"candidate"``) and
            family names (``"noise"``, ``"blur"``, ``"weather"``, ``"digital"``...) select groups.
        namespace: ``"imagenet_c"`` (the 19 ImageNet-C corruptions), ``"noc"`` (the 25
            candidate corruptions of the overlap study, see :mod:`shiftbench.corruptions.candidates`),
            any other registered namespace (:func:`list_namespaces`), or ``"all"``. ``None``:
            the default namespace, plus the namespaces of a group asked for by ``group`` or by a
            group word in ``pattern`` (``group="candidate"`` lists the ``"noc"`` namespace), and of
            names given in full.
        group: keep only this group: ``"benchmark"`` (the 15), ``"extra"`` (the 4), ``"candidate"``...
        family: keep only one family.
        edition: keep only corruptions defined for this edition.
    """
    if edition is not None:
        from ..editions import get_edition

        edition = get_edition(edition).name  # 224, "224", an Edition; unknown ones raise
    spaces = list_namespaces()
    everything = [c for _, c in CORRUPTIONS.items()]
    groups = sorted({c.group for c in everything})
    if namespace is not None and namespace != "all" and namespace not in spaces:
        raise UnknownNameError("namespace", namespace, [*spaces, "all"], suggest(str(namespace), spaces))
    if group is not None and group not in groups:
        raise InvalidArgumentError("group", group, f"one of {tuple(groups)} or None")
    if family is not None and family not in FAMILIES:
        raise InvalidArgumentError("family", family, f"one of {FAMILIES} or None")
    patterns = [pattern] if isinstance(pattern, str) else list(pattern or ["*"])
    patterns = [str(p).strip().lower().replace("-", "_") for p in patterns]
    if namespace is None:
        asked = {group} | set(patterns)
        wanted = {DEFAULT_NAMESPACE} | {c.namespace for c in everything if c.group in asked or c.name in asked}
    else:
        wanted = set(spaces) if namespace == "all" else {namespace}
    items = sorted((c for c in everything if c.namespace in wanted), key=lambda c: c.order)
    selected: list[str] = []
    for pat in patterns:
        if pat in ("all", "*"):
            hits = [c.name for c in items]
        elif pat in groups:
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
