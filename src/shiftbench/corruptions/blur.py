"""Blur corruptions: defocus, glass, motion, zoom (benchmark) and gaussian (extra).

Every function reproduces the reference arithmetic in the reference precision:

* ``gaussian_blur``: SciPy/scikit-image Gaussian (mode ``nearest``, truncate 4)
  of ``x / 255`` in float64.
* ``glass_blur``: Gaussian, 8-bit truncation, the sequential pixel-copy loop
  driven by the drawn offsets, Gaussian again (float64).
* ``defocus_blur``: correlation with the anti-aliased disk kernel (float32
  kernel, float64 image, ``REFLECT_101`` borders), computed with FFTs.
* ``motion_blur``: ImageMagick's motion blur (see :mod:`._geometry`), 8-bit result.
* ``zoom_blur``: average of the image and its ``clipped_zoom`` copies, float32.

On the CPU, Gaussian, glass and zoom blur run the compiled Numba kernels of
:mod:`._cpu.blur` (registered as their ``"compiled"`` backends) over threads
(one image range per thread). Other devices use torch implementations
of the same operation sequences: the Gaussian performs SciPy's ``correlate1d``
steps in SciPy's order (bit-identical to ``scipy.ndimage.gaussian_filter``),
the glass pixel loop runs row by row with in-row chains resolved by pointer
jumping, and the zooms use :func:`~._geometry.clipped_zoom`. Both paths give
identical results.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
import torch

from ..rng.pcg64 import word_lanes
from ..rng.seeding import FastDraws
from ._cpu.blur import gauss_planes, gaussian_blur_kernel, glass_kernel_for, shuffle_batch, zoom_kernel
from ._geometry import cached_zoom_axis_table, clipped_zoom, run_threaded, use_compiled
from ._geometry import motion_blur as _im_motion_blur
from ._ops import extend_index, fdiv, gaussian_kernel1d
from ._registry import IMAGE_BY_IMAGE, ApplyContext, SampleContext, register

__all__ = [
    "gaussian_blur",
    "glass_blur",
    "defocus_blur",
    "motion_blur",
    "zoom_blur",
    "disk_kernel",
    "gaussian_nearest",
    "glass_shuffle",
    "glass_shuffle_torch",
    "correlate_reflect101",
]


def _half_weights(sigma: float) -> np.ndarray:
    """SciPy's Gaussian weights (truncate 4) from the centre outwards: w[0], w[1], ..., w[r]."""
    return _half_weights_cached(float(sigma))


@lru_cache(maxsize=64)
def _half_weights_cached(sigma: float) -> np.ndarray:
    if sigma <= 1e-15:  # SciPy leaves the axis untouched
        out = np.ones(1)
    else:
        k = gaussian_kernel1d(sigma, 4.0)
        r = (len(k) - 1) // 2
        out = np.ascontiguousarray(k[r:])
    out.setflags(write=False)
    return out


def _cpu_array(x: torch.Tensor) -> np.ndarray:
    return x.detach().to(torch.float64).contiguous().numpy()


def _gaussian_nearest_torch(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """SciPy's ``correlate1d`` sequence in torch ops: axis -2 then -1, taps r..1, edge replication."""
    w = [float(v) for v in _half_weights(float(sigma))]
    r = len(w) - 1
    for dim in (x.ndim - 2, x.ndim - 1):
        n = int(x.shape[dim])
        idx = torch.arange(-r, n + r, device=x.device).clamp_(0, n - 1)
        xp = x.index_select(dim, idx)
        out = xp.narrow(dim, r, n) * w[0]
        for j in range(r, 0, -1):
            # separate add, multiply and accumulate: the same roundings as SciPy
            out += (xp.narrow(dim, r - j, n) + xp.narrow(dim, r + j, n)) * w[j]
        x = out
    return x


def gaussian_nearest(x: torch.Tensor, sigma: float, *, compiled: bool | None = None) -> torch.Tensor:
    """``scipy.ndimage.gaussian_filter`` (mode ``nearest``, truncate 4) over the last two dims.

    Channels and leading dims are independent. Both implementations (a Numba
    kernel for CPU tensors, torch ops elsewhere) perform SciPy's operations in
    SciPy's order, so results are bit-identical to SciPy's on every device. ``compiled``: see
    :func:`~._geometry.use_compiled`.
    """
    if not use_compiled(x, compiled):
        return _gaussian_nearest_torch(x, float(sigma))
    shape = x.shape
    h, w = int(shape[-2]), int(shape[-1])
    xa = _cpu_array(x).reshape(-1, h, w)
    out = np.empty_like(xa)
    kern = gauss_planes
    wts = _half_weights(float(sigma))
    run_threaded(xa.shape[0], lambda s, e: kern(xa, wts, s, e, out))
    return torch.from_numpy(out.reshape(shape)).to(x.dtype)


# --------------------------------------------------------------------------- gaussian


@register("gaussian_blur", family="blur", group="extra", sample=None)
def gaussian_blur(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Gaussian blur of standard deviation c (per channel, nearest-edge boundary)."""
    return torch.clamp(_gaussian_nearest_torch(fdiv(x, 255.0), float(c)), 0, 1) * 255


@gaussian_blur.kernel("compiled")
def _gaussian_blur_compiled(x: torch.Tensor, c: float, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    sigma = float(c)
    xa = _cpu_array(x)
    out = np.empty_like(xa)
    kern = gaussian_blur_kernel
    wts = _half_weights(sigma)
    run_threaded(xa.shape[0], lambda s, e: kern(xa, wts, s, e, out))
    return torch.from_numpy(out).to(x.dtype)


# --------------------------------------------------------------------------- glass


class GlassParams(NamedTuple):
    """A severity of glass_blur: the Gaussian's sigma, the largest pixel displacement and the number of shuffle sweeps."""

    sigma: float
    delta: int
    iterations: int


def _glass_offsets(draws: Any, params: GlassParams, height: int, width: int) -> np.ndarray:
    delta, iters = int(params.delta), int(params.iterations)
    n_h = max(0, height - 2 * delta)
    n_w = max(0, width - 2 * delta)
    # reference: randint(-d, d, size=2) -> (dx, dy) per visited pixel, rows and
    # columns descending, `iters` sweeps; one bulk call yields the same stream.
    return np.asarray(draws.integers(-delta, delta, size=(iters, n_h, n_w, 2), dtype=np.int8), dtype=np.int8)


def _sample_glass(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    return {"offsets": _glass_offsets(draws, ctx.params, ctx.height, ctx.width)}


def _check_offsets(u: torch.Tensor, offsets: torch.Tensor, delta: int) -> None:
    b, _, h, w = (int(s) for s in u.shape)
    want = (b, max(0, h - 2 * delta), max(0, w - 2 * delta), 2)
    got = (int(offsets.shape[0]),) + tuple(int(s) for s in offsets.shape[2:])
    if offsets.ndim != 5 or got != want:
        raise ValueError(f"glass offsets of shape {tuple(offsets.shape)} do not fit images {tuple(u.shape)} with d={delta}")
    # the reference draws randint(-d, d): -d..d-1, which keeps every source inside the image
    if offsets.numel() and (int(offsets.min()) < -delta or int(offsets.max()) > delta - 1):
        raise ValueError(f"glass offsets must lie within -{delta}..{delta - 1}")


def glass_shuffle(u: torch.Tensor, offsets: torch.Tensor, delta: int) -> torch.Tensor:
    """The reference's local pixel shuffle: a sequential copy loop (CPU, Numba).

    For each sweep, for rows ``h`` from ``H-d`` down to ``d+1`` and columns ``w``
    from ``W-d`` down to ``d+1``, pixel ``(h, w)`` takes the current value of
    ``(h+dy, w+dx)`` (all channels).

    Args:
        u: B x C x H x W tensor (any real dtype).
        offsets: B x iters x (H-2d) x (W-2d) x 2 integer (dx, dy) offsets in draw order.
        delta: the maximal displacement d.

    Returns:
        A new tensor with the shuffled pixels (same dtype and device as ``u``).
    """
    _check_offsets(u, offsets, delta)
    arr = _cpu_array(u).copy()
    off = np.ascontiguousarray(offsets.detach().to("cpu").numpy())
    if off.size:
        kern = shuffle_batch
        run_threaded(arr.shape[0], lambda s, e: kern(arr, off, int(delta), s, e))
    return torch.from_numpy(arr).to(device=u.device, dtype=u.dtype)


def glass_shuffle_torch(u: torch.Tensor, offsets: torch.Tensor, delta: int) -> torch.Tensor:
    """Device-agnostic equivalent of :func:`glass_shuffle` (torch ops only).

    Rows are processed in the reference's descending order, all pixels of a row
    at once. Within a row a pixel whose source lies in the same row to its right
    (already overwritten in this sweep) takes that pixel's new value; such chains
    are resolved by pointer jumping. Every other source is read from the buffer
    as it stands before the row is processed.
    """
    _check_offsets(u, offsets, delta)
    u = u.clone(memory_format=torch.contiguous_format)
    b, c, h, w = (int(s) for s in u.shape)
    iters, n_h, n_w = int(offsets.shape[1]), int(offsets.shape[2]), int(offsets.shape[3])
    if b == 0 or n_h == 0 or n_w == 0:
        return u
    dev = u.device
    off = offsets.to(device=dev, dtype=torch.int64)
    pos = torch.arange(n_w, device=dev)  # position in processing order
    cols = (w - delta) - pos  # column of each position
    steps = max(1, int(np.ceil(np.log2(max(n_w, 2)))))
    flat = u.view(b, c, h * w)
    base = pos.expand(b, n_w)
    for it in range(iters):
        for hi in range(n_h):
            row = h - delta - hi
            dx = off[:, it, hi, :, 0]
            dy = off[:, it, hi, :, 1]
            src_col = cols + dx
            # same-row source already processed: a column to the right inside the sweep range
            chained = (dy == 0) & (dx > 0) & (src_col <= w - delta)
            ptr = torch.where(chained, pos - dx, base)
            for _ in range(steps):
                ptr = torch.gather(ptr, 1, ptr)
            src = (row + dy) * w + src_col
            vals = torch.gather(flat, 2, src[:, None, :].expand(b, c, n_w))
            new = torch.gather(vals, 2, ptr[:, None, :].expand(b, c, n_w))
            # positions run right to left: flip to write the row segment d+1 .. W-d
            u[:, :, row, delta + 1 : w - delta + 1] = new.flip(-1)
    return u


def _glass_bounds(h: int, w: int, edition: str, params: GlassParams, d: Any) -> dict[str, tuple[Any, Any]]:
    # the reference draws randint(-d, d): -d..d-1
    return {"offsets": (-int(params.delta), int(params.delta) - 1)}


@register(
    "glass_blur", family="blur", group="benchmark", sample=_sample_glass, params=GlassParams, bounds=_glass_bounds,
    accepts_levels=True, chunk_values=IMAGE_BY_IMAGE,
)
def glass_blur(x: torch.Tensor, c: GlassParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Gaussian blur, local pixel shuffling by up to delta pixels (iterations sweeps), Gaussian blur."""
    sigma, delta = float(c.sigma), int(c.delta)
    offsets = d["offsets"]
    _check_offsets(x, offsets, delta)
    g = _gaussian_nearest_torch(fdiv(x.to(torch.float64), 255.0), sigma)
    u = torch.clamp(torch.trunc(g * 255), 0, 255)  # np.uint8(...) of values within 0..255
    u = glass_shuffle_torch(u, offsets, delta)
    return torch.clamp(_gaussian_nearest_torch(fdiv(u, 255.0), sigma), 0, 1) * 255


_NO_OFFSETS = np.zeros((0, 0, 0, 0, 2), dtype=np.int8)
_NO_STREAMS = np.zeros((0, 4, 2), dtype=np.uint64)
_NO_JUMPS = np.zeros((0, 4), dtype=np.uint64)


def _glass_draw_apply(x: torch.Tensor, c: GlassParams, generators: list[np.random.Generator], ctx: ApplyContext) -> torch.Tensor:
    """Draw each image's offsets (the sampler's ``integers`` draws from its generator) inside the compiled
    pass, as the shuffle uses them (:func:`._cpu.blur.glass_kernel`)."""
    streams = [word_lanes(g.bit_generator) for g in generators]
    if int(x.shape[1]) > 4 or any(st is None for st in streams):
        h, w = int(x.shape[-2]), int(x.shape[-1])
        off = np.stack([_glass_offsets(FastDraws(g), c, h, w) for g in generators])
        return _glass_run(x, c, off, _NO_STREAMS, _NO_JUMPS, ctx)
    lanes = np.stack([st[0] for st in streams if st is not None])
    jumps = np.stack([st[1] for st in streams if st is not None])
    return _glass_run(x, c, _NO_OFFSETS, lanes, jumps, ctx)


@glass_blur.kernel("compiled", draw_apply=_glass_draw_apply)
def _glass_blur_compiled(x: torch.Tensor, c: GlassParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """One compiled pass per image (:func:`._cpu.blur.glass_kernel`): 8-bit levels or float values in,
    float64 values or (``ctx.levels``) the truncated 8-bit levels out."""
    offsets = d["offsets"]
    _check_offsets(x, offsets, int(c.delta))
    off = np.ascontiguousarray(offsets.detach().to("cpu").numpy())
    return _glass_run(x, c, off, _NO_STREAMS, _NO_JUMPS, ctx)


def _glass_run(x: torch.Tensor, c: GlassParams, off: np.ndarray, lanes: np.ndarray, jumps: np.ndarray, ctx: ApplyContext) -> torch.Tensor:
    sigma, delta, iters = float(c.sigma), int(c.delta), int(c.iterations)
    xa = np.ascontiguousarray(x.detach().numpy())
    out = ctx.result_array(tuple(xa.shape), np.float64)
    wts = _half_weights(sigma)
    kern = glass_kernel_for(len(wts) - 1, int(xa.shape[1]))
    run_threaded(xa.shape[0], lambda s, e: kern(xa, wts, off, delta, iters, lanes, jumps, s, e, out))
    y = torch.from_numpy(out)
    return y if torch.uint8 in (x.dtype, y.dtype) else y.to(x.dtype)


# --------------------------------------------------------------------------- defocus


def disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """The reference defocus kernel (float32): a normalised disk smoothed by a small Gaussian.

    The grid spans -8..8 for ``radius <= 8`` (3 x 3 smoothing), else
    -radius..radius (5 x 5 smoothing); OpenCV's ``GaussianBlur`` (default
    ``REFLECT_101`` border) smooths it and the result is *not* renormalised.
    """
    return _disk_kernel(float(radius), float(alias_blur)).copy()


@lru_cache(maxsize=64)
def _disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    import cv2

    grid: np.ndarray
    if radius <= 8:
        grid = np.arange(-8, 8 + 1)
        ksize = (3, 3)
    else:
        grid = np.arange(-radius, radius + 1)
        ksize = (5, 5)
    xx, yy = np.meshgrid(grid, grid)
    disk = np.array((xx**2 + yy**2) <= radius**2, dtype=np.float32)
    disk /= np.sum(disk)
    k = cv2.GaussianBlur(disk, ksize=ksize, sigmaX=alias_blur)
    k.setflags(write=False)
    return k


def _fast_len(n: int) -> int:
    """Smallest 5-smooth integer >= n (an efficient FFT length)."""
    m = n
    while True:
        r = m
        for p in (2, 3, 5):
            while r % p == 0:
                r //= p
        if r == 1:
            return m
        m += 1


_KERNEL_FFT_CACHE: dict[tuple[Any, ...], torch.Tensor] = {}


def _kernel_fft(k: np.ndarray, fh: int, fw: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    key = (k.shape, k.dtype.str, k.tobytes(), fh, fw, str(device), dtype)
    hit = _KERNEL_FFT_CACHE.get(key)
    if hit is None:
        if len(_KERNEL_FFT_CACHE) > 256:
            _KERNEL_FFT_CACHE.clear()
        kp = torch.zeros((fh, fw), dtype=torch.float64)
        kp[: k.shape[0], : k.shape[1]] = torch.from_numpy(k.astype(np.float64))
        # correlation = product with the conjugate spectrum
        cdtype = torch.complex128 if dtype == torch.float64 else torch.complex64
        hit = torch.conj(torch.fft.rfft2(kp)).to(device=device, dtype=cdtype)
        _KERNEL_FFT_CACHE[key] = hit
    return hit


_INDEX_CACHE: dict[tuple[int, int, str], torch.Tensor] = {}


def _reflect101_index(n: int, pad: int, device: torch.device) -> torch.Tensor:
    key = (n, pad, str(device))
    hit = _INDEX_CACHE.get(key)
    if hit is None:
        if len(_INDEX_CACHE) > 256:
            _INDEX_CACHE.clear()
        idx = extend_index(np.arange(-pad, n + pad), n, "mirror")  # mirror == OpenCV REFLECT_101
        hit = torch.from_numpy(idx).to(device)
        _INDEX_CACHE[key] = hit
    return hit


def correlate_reflect101(x: torch.Tensor, k: np.ndarray) -> torch.Tensor:
    """``cv2.filter2D(x, -1, k)`` per channel of ... x H x W (odd square kernel, REFLECT_101).

    Computed by FFT on the padded image (the padded length is rounded up to an
    FFT-friendly size; the circular wrap-around never reaches the kept window).
    """
    h, w = int(x.shape[-2]), int(x.shape[-1])
    r = (int(k.shape[0]) - 1) // 2
    xp = x.index_select(-1, _reflect101_index(w, r, x.device)).index_select(-2, _reflect101_index(h, r, x.device))
    fh, fw = _fast_len(h + 2 * r), _fast_len(w + 2 * r)
    spec = torch.fft.rfft2(xp, s=(fh, fw))
    spec *= _kernel_fft(k, fh, fw, x.device, x.dtype)
    y = torch.fft.irfft2(spec, s=(fh, fw))
    return y[..., :h, :w]


_DIRECT_MAX_GROUPS = 40
"""Kernels with at most this many distinct (mirror-grouped) taps correlate directly on the CPU;
larger ones by FFT (measured crossover at 224 px: ~50 groups)."""


@lru_cache(maxsize=64)
def _tap_groups(radius: float, alias_blur: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from ._cpu.gauss import symmetric_tap_groups

    return symmetric_tap_groups(_disk_kernel(radius, alias_blur))


def _defocus_direct_cpu(x: torch.Tensor, k: np.ndarray, groups: tuple[np.ndarray, ...]) -> torch.Tensor:
    """cv2.filter2D's correlation (REFLECT_101) as a direct sum over the kernel's non-zero taps (float64)."""
    from ._cpu.gauss import correlate_taps, pad_planes

    b, c, h, w = (int(v) for v in x.shape)
    r = (int(k.shape[0]) - 1) // 2
    planes = np.ascontiguousarray(x.detach().numpy()).reshape(b * c, h, w) / 255.0
    cpu = torch.device("cpu")
    xp = pad_planes(planes, _reflect101_index(h, r, cpu).numpy(), _reflect101_index(w, r, cpu).numpy())
    out = np.empty((b * c, h, w), dtype=np.float64)
    correlate_taps(xp, *groups, out)
    np.clip(out, 0, 1, out=out)
    out *= 255
    return torch.from_numpy(out.reshape(b, c, h, w))


def _defocus_disk_cpu(x: torch.Tensor, plan: Any, ctx: ApplyContext) -> torch.Tensor:
    """Defocus through the disk decomposition (:mod:`._defocus_cpu`); float64 result, or the
    truncated uint8 levels when ``ctx.levels`` (into ``ctx.out`` where it fits)."""
    from ._cpu.defocus import disk_correlate

    b, c, h, w = (int(v) for v in x.shape)
    planes = np.ascontiguousarray(x.detach().numpy()).reshape(b * c, h, w)
    cpu = torch.device("cpu")
    ridx, cidx = _reflect101_index(h, plan.pad, cpu).numpy(), _reflect101_index(w, plan.pad, cpu).numpy()
    out = ctx.result_array((b * c, h, w), np.float64)
    disk_correlate(
        planes, ridx, cidx, plan.grid, plan.half, plan.widths, plan.width_slot, plan.g, plan.dval, *plan.frame, *plan.taps, plan.margin, planes.dtype == np.uint8, out
    )
    return torch.from_numpy(out.reshape(b, c, h, w))


class DefocusParams(NamedTuple):
    """A severity of defocus_blur: the disk's radius and the sigma of the Gaussian that smooths it."""

    radius: float
    alias_blur: float


@register("defocus_blur", family="blur", group="benchmark", sample=None, params=DefocusParams, accepts_levels=True, chunk_values=IMAGE_BY_IMAGE)
def defocus_blur(x: torch.Tensor, c: DefocusParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Defocus: correlation with an anti-aliased disk of the given radius."""
    return _defocus_fft(x, _disk_kernel(float(c.radius), float(c.alias_blur)))


@defocus_blur.kernel("compiled", torch.float64, torch.uint8)
def _defocus_blur_compiled(x: torch.Tensor, c: DefocusParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """The disk decomposition, or a direct sum over the kernel's taps, or (large kernels) the FFT path."""
    from ._cpu.defocus import disk_plan

    radius, alias_blur = float(c.radius), float(c.alias_blur)
    k = _disk_kernel(radius, alias_blur)
    plan = disk_plan(radius, alias_blur, k.tobytes(), int(k.shape[0]))
    if plan is not None and min(int(x.shape[-2]), int(x.shape[-1])) > plan.pad:
        return _defocus_disk_cpu(x, plan, ctx)
    groups = _tap_groups(radius, alias_blur)
    if len(groups[0]) <= _DIRECT_MAX_GROUPS:
        return _defocus_direct_cpu(x, k, groups)
    return _defocus_fft(x, k)


def _defocus_fft(x: torch.Tensor, k: np.ndarray) -> torch.Tensor:
    b = int(x.shape[0])
    if x.dtype == torch.uint8:
        x = x.to(torch.float64)
    step = 2 if x.device.type == "cpu" else max(b, 1)  # small CPU chunks stay in cache
    out = torch.empty_like(x)
    for s in range(0, b, step):
        y = correlate_reflect101(x[s : s + step] / 255.0, k)
        out[s : s + step] = torch.clamp(y, 0, 1) * 255
    return out


# --------------------------------------------------------------------------- motion


def _sample_motion(draws: Any, ctx: SampleContext) -> dict[str, np.ndarray]:
    return {"angle": np.asarray(draws.uniform(-45, 45), dtype=np.float64)}


class MotionParams(NamedTuple):
    """A severity of motion_blur: ImageMagick's radius and sigma."""

    radius: float
    sigma: float


@register(
    "motion_blur", family="blur", group="benchmark", sample=_sample_motion, params=MotionParams, quantized_output=True,
    bounds=lambda h, w, edition, params, d: {"angle": (-45.0, 45.0)},
)
def motion_blur(x: torch.Tensor, c: MotionParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """ImageMagick motion blur (radius, sigma) at a random angle in [-45, 45) degrees."""
    # the reference blurs the 8-bit image; the primitive rounds float input to 8 bits
    return _im_motion_blur(x, float(c.radius), float(c.sigma), d["angle"].reshape(-1), compiled=False)


@motion_blur.kernel("compiled")
def _motion_blur_compiled(x: torch.Tensor, c: MotionParams, d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    return _im_motion_blur(x, float(c.radius), float(c.sigma), d["angle"].reshape(-1), compiled=True)


# --------------------------------------------------------------------------- zoom


@lru_cache(maxsize=64)
def _zoom_tables(h: int, w: int, zooms: tuple[float, ...]) -> tuple[np.ndarray, ...]:
    rows = [cached_zoom_axis_table(h, z) for z in zooms]
    cols = [cached_zoom_axis_table(w, z) for z in zooms]
    out = (
        np.stack([r[0] for r in rows]),
        np.stack([r[1] for r in rows]),
        np.stack([r[2] for r in rows]),
        np.stack([col[0] for col in cols]),
        np.stack([col[1] for col in cols]),
        np.stack([col[2] for col in cols]),
        np.array([z == 1.0 for z in zooms]),
    )
    for a in out:
        a.setflags(write=False)
    return out


def _zoom_blur_torch(x: torch.Tensor, zooms: list[float]) -> torch.Tensor:
    x32 = fdiv(x.to(torch.float64), 255.0).to(torch.float32)
    x64 = x32.to(torch.float64)
    out = torch.zeros_like(x32)
    for z in zooms:
        # SciPy interpolates float32 input in double and rounds the result to float32
        out += clipped_zoom(x64, z).to(torch.float32)
    y = fdiv(x32 + out, len(zooms) + 1)
    return torch.clamp(y, 0, 1) * 255


@register(
    "zoom_blur", family="blur", group="benchmark", sample=None, dtype=torch.float32, accepts_levels=True,
    chunk_values=IMAGE_BY_IMAGE,
)
def zoom_blur(x: torch.Tensor, c: tuple[float, ...], d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """Average of the image and its centre zooms by each factor in the list (float32)."""
    y = _zoom_blur_torch(x, [float(z) for z in c])
    return y if x.dtype == torch.uint8 else y.to(x.dtype)


@zoom_blur.kernel("compiled")
def _zoom_blur_compiled(x: torch.Tensor, c: tuple[float, ...], d: dict[str, torch.Tensor], ctx: ApplyContext) -> torch.Tensor:
    """One compiled pass per image (:func:`._cpu.blur.zoom_kernel`): 8-bit levels or float32 values in,
    float32 values or (``ctx.levels``) the truncated 8-bit levels out."""
    zooms = tuple(float(z) for z in c)
    h, w = int(x.shape[-2]), int(x.shape[-1])
    tables = _zoom_tables(h, w, zooms)
    xa = np.ascontiguousarray(x.detach().numpy())
    out = ctx.result_array(tuple(xa.shape), np.float32)
    kern = zoom_kernel
    levels_in = xa.dtype == np.uint8
    run_threaded(xa.shape[0], lambda s, e: kern(xa, levels_in, *tables, s, e, out))
    y = torch.from_numpy(out)
    return y if torch.uint8 in (x.dtype, y.dtype) else y.to(x.dtype)
