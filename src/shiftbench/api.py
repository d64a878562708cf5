"""Public corruption API: :func:`corrupt`, :func:`sample_draws` and the :class:`Corrupt` transform."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from . import corruptions  # noqa: F401  (registers every corruption)
from .checks import check_seed, check_severity
from .corruptions._drawcheck import Schema, validate_draws
from .corruptions._images import Batch, Output, require_memory, to_batch, typed_memory_errors
from .corruptions._parallel import resolve_threads, run_in_threads, split
from .corruptions._registry import ApplyContext, Corruption, SampleContext, get_corruption
from .editions import Edition, edition_for_size, get_edition
from .errors import InvalidArgumentError
from .rng.seeding import Draws, FastDraws, derive_generator, image_key, key_to_int

__all__ = ["corrupt", "sample_draws", "Corrupt", "release_jpeg", "RELEASE_JPEG_QUALITY"]

RELEASE_JPEG_QUALITY = 85


def _resolve_edition(spec: Corruption, edition: Any, h: int, w: int) -> Edition:
    ed = get_edition(edition) if edition is not None else edition_for_size(h, w)
    if ed.name not in spec.params:
        raise InvalidArgumentError("edition", edition, f"one of {list(spec.params)} for {spec.name}")
    return ed


def _sample_one(
    spec: Corruption, params: Any, ed: Edition, severity: int, b: Batch, i: int, source: Draws
) -> dict[str, np.ndarray]:
    assert spec.sample is not None
    h, w = b.size
    cache: dict[str, np.ndarray] = {}

    def image() -> np.ndarray:
        if "img" not in cache:
            cache["img"] = b.rgb(i, i + 1, torch.float64, torch.device("cpu"))[0].permute(1, 2, 0).numpy() / 255.0
        return cache["img"]

    def levels() -> np.ndarray:
        if "lv" not in cache:
            cache["lv"] = b.levels_hwc(i)
        return cache["lv"]

    ctx = SampleContext(
        params=params, height=h, width=w, edition=ed.name, severity=severity, _image=image, _levels=levels
    )
    return spec.sample(source, ctx)


def _stack_draws(per_image: list[dict[str, Any]], device: torch.device) -> dict[str, torch.Tensor]:
    if not per_image:
        return {}
    out: dict[str, torch.Tensor] = {}
    for k in per_image[0]:
        arr = np.stack([np.asarray(d[k]) for d in per_image])
        out[k] = torch.from_numpy(arr).to(device)
    return out


def _threaded_stacked_draws(draw: Any, a: int, e: int, device: torch.device) -> dict[str, torch.Tensor]:
    """The draws of images a..e-1 for an accelerator, which waits for them: sampled in parallel
    threads (each image has its own generator, so the draws do not depend on which thread makes
    them; the compiled samplers release the GIL), each written by its thread into one batch buffer
    (pinned for CUDA), then one copy to the device."""
    first = {k: np.asarray(v) for k, v in draw(a).items()}
    pin = device.type == "cuda" and torch.cuda.is_available()
    bufs = {
        k: torch.empty((e - a,) + v.shape, dtype=torch.from_numpy(v.reshape(-1)[:0]).dtype, pin_memory=pin)
        for k, v in first.items()
    }
    views = {k: t.numpy() for k, t in bufs.items()}

    def put(i: int, d: dict[str, Any]) -> None:
        for k, v in d.items():
            views[k][i - a] = v

    put(a, first)
    list(_draw_pool().map(lambda i: put(i, draw(i)), range(a + 1, e)))
    return {k: t.to(device, non_blocking=pin) for k, t in bufs.items()}


@lru_cache(maxsize=64)
def _draw_schema(name: str, h: int, w: int, edition: str, severity: int) -> Schema:
    """(key, shape, dtype) of the draws sampling produces for an image of h x w (blank image, seed 0)."""
    d = sample_draws(np.zeros((h, w, 3), np.uint8), name, severity, seed=0, key=0, edition=edition)
    return tuple((k, tuple(np.asarray(v).shape), np.asarray(v).dtype.str) for k, v in d.items())


def sample_draws(
    image: Any,
    corruption: str,
    severity: int,
    *,
    source: Draws | None = None,
    seed: int = 0,
    key: Any = None,
    edition: Any = None,
) -> dict[str, np.ndarray]:
    """Draw every random quantity ``corruption`` needs for one image.

    By default the draws come from the generator of ``(seed, key, corruption,
    severity)``, exactly as :func:`corrupt` would draw them; ``source`` replaces
    that generator (e.g. :class:`~shiftbench.rng.seeding.LegacyDraws` to replay the
    reference implementation). Returns ``{}`` for deterministic corruptions.
    Pass the result to ``corrupt(..., draws=[...])`` to replay or audit a result.
    """
    spec = get_corruption(corruption)
    s = check_severity(severity)
    b = to_batch(image, "image")
    if b.n != 1:
        raise InvalidArgumentError("image", tuple(b.raw.shape), "a single image")
    h, w = b.size
    ed = _resolve_edition(spec, edition, h, w)
    if spec.sample is None:
        return {}
    if source is None:
        k = key_to_int(key) if key is not None else image_key(b.canonical_uint8(0))
        source = FastDraws(derive_generator(check_seed(seed), k, spec.name, s))
    return _sample_one(spec, spec.severity_params(ed.name, s), ed, s, b, 0, source)


def release_jpeg(y_uint8: torch.Tensor, quality: int = RELEASE_JPEG_QUALITY) -> torch.Tensor:
    """Store-and-reload as the published datasets did: JPEG (4:2:0) and decode.

    ``y_uint8``: B x 3 x H x W uint8. Returns the decoded batch (uint8, same device). (The released
    files also used optimised Huffman tables, which change their size, not their pixels.)
    """
    from .corruptions.digital import jpeg_round_trip

    return jpeg_round_trip(y_uint8, quality)


_CHUNK_VALUES = 1 << 20  # values per chunk on the CPU: keeps intermediates cache-resident


_POOL: tuple[int, ThreadPoolExecutor] | None = None  # (pid that made it, pool)


def _draw_pool() -> ThreadPoolExecutor:
    """Threads that sample the draws of accelerator batches (``SHIFTBENCH_DRAW_THREADS``, default: the
    cores, at most 16).
    A forked child gets its own pool (the parent's threads do not exist there)."""
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():
        env = os.environ.get("SHIFTBENCH_DRAW_THREADS", "")
        n = int(env) if env.isdigit() and int(env) > 0 else min(16, os.cpu_count() or 1)
        _POOL = (os.getpid(), ThreadPoolExecutor(max_workers=n, thread_name_prefix="shiftbench-draws"))
    return _POOL[1]


def _threaded_draws(b: Batch) -> bool:
    """Sample in threads for accelerator batches (on the CPU, the apply step already keeps the cores busy)."""
    return not b.raw.is_cpu


def _chunk_size(b: Batch, spec: Corruption) -> int:
    """Images per call of the corruption's functional: the whole batch on a GPU; on the CPU as many
    as hold the corruption's ``chunk_values`` (default :data:`_CHUNK_VALUES`)."""
    if not b.raw.is_cpu:
        return b.n
    h, w = b.size
    return max(1, (spec.chunk_values or _CHUNK_VALUES) // (3 * h * w))


def corrupt(
    images: Any,
    corruption: str,
    severity: int = 1,
    *,
    seed: int = 0,
    edition: str | int | Edition | None = None,
    keys: Sequence[Any] | None = None,
    release: bool = False,
    draws: Sequence[dict[str, Any]] | None = None,
    device: torch.device | str | None = None,
    quantize: bool = False,
    backend: str = "auto",
    threads: int | None = None,
) -> Any:
    """Apply an ImageNet-C corruption to one image or a batch.

    Args:
        images: a torch tensor (uint8 in 0..255 or float in [0, 1]; C x H x W or
            B x C x H x W; C = 1, 3 or 4), a NumPy array (H x W, H x W x C or
            B x H x W x C) or a PIL image (or list of PIL images of one size).
            Sides must be at least 32 px; non-square images are fine.
        corruption: a registered name, e.g. ``"fog"`` (see :func:`list_corruptions`).
        severity: 1..5.
        seed: the experiment seed; with the image key it fixes every random draw.
        edition: ``"224"``, ``"299"``, ``"64"`` or ``"32"`` (parameter table);
            default: chosen from the image size (:func:`edition_for_size`).
        keys: one key (int/str/bytes) per image instead of the pixel digest.
        release: also reproduce how the published datasets were stored
            (8-bit truncation, then JPEG quality 85); output is then 8-bit valued.
        draws: replay previously sampled draws (one dict per image, see :func:`sample_draws`).
        device: run on this device (default: the input's device).
        quantize: for float inputs, truncate the result to 8-bit levels as the reference does.
        backend: which implementation runs (``get_corruption(name).backends``): ``"auto"`` (the
            compiled CPU kernels for CPU batches where the corruption has them, else the tensor
            path), ``"tensor"`` (torch operations, any device), ``"compiled"``... All give the same
            8-bit output; a backend the corruption lacks, or one that cannot run the batch (e.g.
            ``"compiled"`` on a GPU), raises :class:`~shiftbench.errors.InvalidArgumentError`.
        threads: how many threads a CPU batch is split across, images in parallel (default:
            ``torch.get_num_threads()``, at most the CPUs the process may use and at most the CPUs
            that other runnable tasks leave free at the time of the call). The output is the
            same, bit for bit, whatever the split: torch operations run single-threaded in each
            thread of the call (the parallelism is over images), so the pixels do not depend on
            ``torch.get_num_threads()`` either. Ignored for accelerator batches.

    Returns:
        The corrupted image(s) in the input's type, dtype, layout and device.
    """
    spec = get_corruption(corruption)
    s = check_severity(severity)
    seed = check_seed(seed)
    b = to_batch(images, "images", device)
    n = b.n
    h, w = b.size
    ed = _resolve_edition(spec, edition, h, w)
    params = spec.severity_params(ed.name, s)
    workers = resolve_threads(threads)
    if not b.raw.is_cpu:
        workers = 1  # an accelerator batch runs as one call (its draws are sampled in threads)
    if keys is not None and len(keys) != n:
        raise InvalidArgumentError("keys", f"{len(keys)} keys", f"exactly one key per image ({n})")
    if draws is not None:  # before any kernel runs: kernels index by the draws
        draws = validate_draws(
            spec, draws, n, h, w, ed.name, s, params, lambda: _draw_schema(spec.name, h, w, ed.name, s)
        )
    chosen = spec.select_backend(b.raw.device, spec.input_dtype(b.float_input), backend)
    step = _chunk_size(b, spec)
    what = f"{n} image(s) of {h}x{w} (HxW) for {spec.name}"
    if b.raw.is_cpu:  # before the output batch or any draw is allocated
        in_flight = min(n, step * max(1, workers))
        require_memory(spec.working_memory(h, w, ed.name, params) * in_flight + _batch_bytes(b), what)
    with typed_memory_errors(what):
        return _corrupt(b, spec, s, seed, ed, params, keys, release, draws, quantize, chosen, workers, step)


def _batch_bytes(b: Batch) -> int:
    """The output batch and the 8-bit copies corrupt() makes beside the input (canonical levels, keys)."""
    n, c = b.n, int(b.raw.shape[1])
    h, w = b.size
    return n * h * w * (c * b.raw.element_size() + 2 * 3)


def _corrupt(b: Batch, spec: Corruption, s: int, seed: int, ed: Edition, params: Any, keys: Sequence[Any] | None,
             release: bool, draws: Sequence[dict[str, Any]] | None, quantize: bool, chosen: str, workers: int,
             step: int) -> Any:
    n = b.n
    out = Output(b, quantize=quantize or release)
    levels = out.to_uint8 and b.raw.is_cpu

    def run(a: int, e: int) -> None:
        """Images a..e-1: draw (per image, from its own generator) and apply; a pure function of the
        range, so ranges may run in any order on any thread."""
        ctx = ApplyContext(edition=ed.name, severity=s, levels=levels, backend=chosen)
        ctx.out = None if release else out.levels_view(a, e)
        stacked: dict[str, torch.Tensor] = {}
        if spec.draw_apply is not None and draws is None and chosen == spec.draw_backend:
            gens = [
                derive_generator(
                    seed, key_to_int(keys[i]) if keys is not None else image_key(b.canonical_uint8(i)), spec.name, s
                )
                for i in range(a, e)
            ]
            y = spec.draw_apply(b.rgb(a, e, spec.input_dtype(b.float_input)), params, gens, ctx)
            if release:
                y = release_jpeg(y.clamp(0, 255).to(torch.uint8))
            out.put(a, e, y)
            return
        if spec.sample is not None:
            if draws is None:

                def draw(i: int) -> dict[str, np.ndarray]:
                    k = key_to_int(keys[i]) if keys is not None else image_key(b.canonical_uint8(i))
                    src = FastDraws(derive_generator(seed, k, spec.name, s))
                    return _sample_one(spec, params, ed, s, b, i, src)

                if not _threaded_draws(b) or e - a < 2:
                    stacked = _stack_draws([draw(i) for i in range(a, e)], b.raw.device)
                else:
                    if keys is None:
                        b.prefetch_host(a, e)
                    stacked = _threaded_stacked_draws(draw, a, e, b.raw.device)
            else:
                stacked = _stack_draws(list(draws[a:e]), b.raw.device)
        y = spec.apply(b.rgb(a, e, spec.input_dtype(b.float_input)), params, stacked, ctx)
        if release:
            y = release_jpeg(y.clamp(0, 255).to(torch.uint8))
        out.put(a, e, y)

    # with several threads, ranges small enough that a thread slowed by other load takes fewer of them
    run_in_threads(run, split(n, step if workers <= 1 else min(step, -(-n // (2 * workers)))), workers)
    return out.result()


class Corrupt:
    """A transform that applies one corruption; drops into torchvision/timm pipelines.

    Works on PIL images, tensors and arrays (see :func:`corrupt`). Because the
    draws derive from the image's pixels (or ``key_fn``), results do not depend on
    DataLoader workers, batch size or shuffling. ``threads``: as in :func:`corrupt` (a CPU batch
    is split across that many threads; default ``torch.get_num_threads()``).

    Example:
        >>> t = Corrupt("fog", severity=3, seed=0)
        >>> out = t(img)  # doctest: +SKIP
    """

    def __init__(
        self,
        corruption: str,
        severity: int = 1,
        *,
        seed: int = 0,
        edition: str | int | None = None,
        release: bool = False,
        quantize: bool = False,
        backend: str = "auto",
        threads: int | None = None,
    ) -> None:
        self.spec = get_corruption(corruption)
        self.severity = check_severity(severity)
        self.seed = check_seed(seed)
        self.edition = None if edition is None else get_edition(edition).name
        if self.edition is not None and self.edition not in self.spec.params:
            raise InvalidArgumentError("edition", edition, f"one of {list(self.spec.params)}")
        self.release = release
        self.quantize = quantize
        if backend != "auto":
            self.spec.backend(backend)  # an unknown name fails here, not at the first image
        self.backend = backend
        if threads is not None:
            resolve_threads(threads)  # a bad value fails here, not at the first image
        self.threads = threads

    def __call__(self, image: Any, key: Any = None) -> Any:
        keys = None if key is None else [key]
        if keys is not None and isinstance(image, torch.Tensor) and image.ndim == 4:
            raise InvalidArgumentError(
                "key", key, "a single key for a single image (use corrupt() with keys= for batches)"
            )
        return corrupt(
            image,
            self.spec.name,
            self.severity,
            seed=self.seed,
            edition=self.edition,
            keys=keys,
            release=self.release,
            quantize=self.quantize,
            backend=self.backend,
            threads=self.threads,
        )

    def __repr__(self) -> str:
        return (
            f"Corrupt({self.spec.name!r}, severity={self.severity}, seed={self.seed}, "
            f"edition={self.edition!r}, release={self.release})"
        )
