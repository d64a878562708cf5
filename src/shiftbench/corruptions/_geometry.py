"""Geometric primitives shared by blur and weather corruptions.

* :func:`motion_blur` reproduces ImageMagick's ``MotionBlurImage`` (used by the
  reference for motion_blur and for the snow layer): a one-sided half-Gaussian
  kernel of width ``2*ceil(radius)+1``, integer tap offsets
  ``ceil(i*cos(a) - 0.5), ceil(i*sin(a) - 0.5)``, edge replication, result
  converted to 8 bits the way the reference's ImageMagick build writes its PNG.
* :func:`clipped_zoom` reproduces the reference's ``clipped_zoom``: crop the
  centre ``ceil(H/z) x ceil(W/z)``, zoom with ``scipy.ndimage.zoom(order=1)``
  (corner-aligned bilinear), centre-trim to H x W.

On the CPU, :func:`motion_blur` runs the compiled kernel of :mod:`._cpu.motion` (threads over
images); elsewhere it uses torch slicing. Both give bit-identical results.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import torch

from ._cpu.motion import motion_blur_planes

__all__ = ["motion_blur", "clipped_zoom", "motion_blur_kernel", "motion_blur_offsets", "zoom_axis_table"]

# ImageMagick Q16: 8-bit samples are stored as v * 257 (QuantumRange 65535).
_Q16_SCALE = 257.0
_Q16_MAX = 65535.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)


# --------------------------------------------------------------------------- CPU helpers


def run_threaded(n: int, fn: Callable[[int, int], None], min_per_thread: int = 1) -> None:
    """Run ``fn(start, end)`` over ``range(n)`` split across ``torch.get_num_threads()`` threads.

    ``fn`` is expected to release the GIL (a ``nogil`` Numba kernel). Threads
    are created per call, so the helper is safe under fork and concurrent use.
    """
    workers = max(1, min(torch.get_num_threads(), n // max(1, min_per_thread)))
    if workers <= 1 or n <= 1:
        if n > 0:
            fn(0, n)
        return
    bounds = [(n * i) // workers for i in range(workers + 1)]
    errors: list[BaseException] = []

    def target(s: int, e: int) -> None:
        try:
            fn(s, e)
        except BaseException as exc:  # re-raised in the caller
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(bounds[i], bounds[i + 1])) for i in range(1, workers)]
    for t in threads:
        t.start()
    target(bounds[0], bounds[1])
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def use_compiled(x: torch.Tensor, compiled: bool | None) -> bool:
    """Whether a primitive runs its compiled CPU kernel on ``x``: ``compiled=None`` means for CPU
    tensors (the torch implementation elsewhere); True asks for the kernel (CPU tensors only),
    False for the torch implementation on any device. Corruptions pass their selected backend."""
    if compiled is None:
        return x.device.type == "cpu"
    if compiled and x.device.type != "cpu":
        raise ValueError(f"the compiled kernels run on CPU tensors, not {x.device.type} ones")
    return bool(compiled)


# --------------------------------------------------------------------------- motion blur


def motion_blur_kernel(radius: float, sigma: float) -> np.ndarray:
    """ImageMagick's one-sided motion-blur weights (float64, normalised to sum 1).

    The width is ``2*ceil(radius)+1`` (ImageMagick's ``GetOptimalKernelWidth1D``
    for a positive radius); tap ``i`` weighs ``exp(-i^2 / (2 sigma^2))``.
    """
    return _motion_blur_kernel(float(radius), float(sigma)).copy()


@lru_cache(maxsize=64)
def _motion_blur_kernel(radius: float, sigma: float) -> np.ndarray:
    if not radius > 0:
        raise ValueError(f"motion blur radius must be positive, got {radius}")
    width = 2 * int(math.ceil(radius)) + 1
    s = sigma if abs(sigma) >= 1e-12 else 1e-12
    # same operation order as ImageMagick (sequential normalisation sum, libm exp)
    k = [math.exp(-(float(i) * i) / (2.0 * s * s)) / (_SQRT_2PI * s) for i in range(width)]
    total = 0.0
    for v in k:
        total += v
    out = np.array([v / total for v in k], dtype=np.float64)
    out.setflags(write=False)
    return out


def motion_blur_offsets(width: int, angle_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """Integer tap offsets (dx, dy) of ImageMagick's motion blur for one angle.

    Computed with ImageMagick's own arithmetic (``point = width * (sin, cos)``,
    ``ceil(i * point / hypot(point) - 0.5)``) so that ties at exact half
    integers resolve identically.
    """
    rad = math.pi * float(angle_deg) / 180.0
    px = float(width) * math.sin(rad)
    py = float(width) * math.cos(rad)
    hyp = float(np.hypot(px, py))
    i = np.arange(width, dtype=np.float64)
    dx = np.ceil((i * py) / hyp - 0.5).astype(np.int64)
    dy = np.ceil((i * px) / hyp - 0.5).astype(np.int64)
    return dx, dy


def _edge_pad(x: torch.Tensor, top: int, bottom: int, left: int, right: int) -> torch.Tensor:
    """Edge replication of the last two dims by any amount (also beyond the image size)."""
    h, w = int(x.shape[-2]), int(x.shape[-1])
    if left or right:
        cols = torch.arange(-left, w + right, device=x.device).clamp_(0, w - 1)
        x = x.index_select(-1, cols)
    if top or bottom:
        rows = torch.arange(-top, h + bottom, device=x.device).clamp_(0, h - 1)
        x = x.index_select(-2, rows)
    return x


def _motion_blur_torch(x: torch.Tensor, k: np.ndarray, dxs: np.ndarray, dys: np.ndarray) -> torch.Tensor:
    b, _, h, w = (int(s) for s in x.shape)
    left, right = max(0, -int(dxs.min())), max(0, int(dxs.max()))
    top, bottom = max(0, -int(dys.min())), max(0, int(dys.max()))
    xq = _edge_pad(torch.round(x).clamp_(0, 255) * _Q16_SCALE, top, bottom, left, right)
    c, wp = int(xq.shape[1]), int(xq.shape[-1])
    flat = xq.reshape(b, c, -1)
    # one gather per tap for the whole batch (each image has its own offsets), taps summed in order
    base = (torch.arange(h, device=x.device) * wp).view(1, h, 1) + torch.arange(w, device=x.device).view(1, 1, w)
    rows = torch.as_tensor(top + dys, device=x.device)
    cols = torch.as_tensor(left + dxs, device=x.device)
    out = torch.zeros_like(x)
    for i in range(len(k)):
        idx = (base + (rows[:, i] * wp + cols[:, i]).view(b, 1, 1)).view(b, 1, h * w).expand(b, c, h * w)
        out += torch.gather(flat, 2, idx).view(b, c, h, w) * float(k[i])
    q = torch.floor(out + 0.5).clamp_(0.0, _Q16_MAX)
    return torch.div(q, _Q16_SCALE, rounding_mode="floor")


def motion_blur_taps(radius: float, sigma: float, angle_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The taps of :func:`motion_blur` for a batch: (weights, B x taps dx, B x taps dy)."""
    k = _motion_blur_kernel(float(radius), float(sigma))
    offs = [motion_blur_offsets(len(k), float(a)) for a in np.asarray(angle_deg, dtype=np.float64).reshape(-1)]
    if not offs:
        return k, np.zeros((0, len(k)), np.int64), np.zeros((0, len(k)), np.int64)
    return k, np.stack([o[0] for o in offs]), np.stack([o[1] for o in offs])


def motion_blur(
    x: torch.Tensor, radius: float, sigma: float, angle_deg: torch.Tensor, *, compiled: bool | None = None
) -> torch.Tensor:
    """ImageMagick motion blur of a batch (``compiled``: see :func:`use_compiled`).

    ImageMagick (Q16) accumulates ``weight * (257 v)`` in double precision tap
    by tap, rounds to a 16-bit quantum and the reference's PNG export keeps
    ``floor(quantum / 257)``; this reproduces those steps bit for bit. The
    8-bit result is therefore close to, but not exactly, a rounding of the
    blurred value (it rounds up only within 1/514 of the next level).

    Args:
        x: B x C x H x W float tensor holding 8-bit values 0..255 (other values
            are rounded and clamped to 8 bits first).
        radius, sigma: ImageMagick's radius and sigma (same for the whole batch).
        angle_deg: B angles in degrees (one per image), image y axis pointing down.

    Returns:
        B x C x H x W float tensor of 8-bit values, same dtype/device.
    """
    b = int(x.shape[0])
    k = _motion_blur_kernel(float(radius), float(sigma))
    angles = torch.as_tensor(angle_deg).detach().reshape(-1).to("cpu", torch.float64).numpy()
    if len(angles) != b:
        raise ValueError(f"angle_deg has {len(angles)} entries for a batch of {b}")
    if b == 0:
        return x.clone()
    offs = [motion_blur_offsets(len(k), float(a)) for a in angles]
    dxs = np.stack([o[0] for o in offs])
    dys = np.stack([o[1] for o in offs])
    if not use_compiled(x, compiled):
        return _motion_blur_torch(x, k, dxs, dys)
    xa = x.detach().to(torch.float64).contiguous().numpy()
    out = np.empty(xa.shape, dtype=np.float64)
    run_threaded(b, lambda s, e: motion_blur_planes(xa, k, dxs, dys, s, e, out))
    return torch.from_numpy(out).to(x.dtype)


# --------------------------------------------------------------------------- clipped zoom


def zoom_axis_table(n: int, zoom: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source indices and weights of :func:`clipped_zoom` along one axis of length ``n``.

    Returns ``(i0, i1, t)``: output ``j`` (0..n-1) interpolates input positions
    ``i0[j]`` and ``i1[j]`` (absolute indices into the uncropped axis) with
    weight ``t[j]`` on ``i1``, i.e. ``a + (b - a) * t``.
    """
    i0, i1, t = cached_zoom_axis_table(int(n), float(zoom))
    return i0.copy(), i1.copy(), t.copy()


@lru_cache(maxsize=512)
def cached_zoom_axis_table(n: int, zoom: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`zoom_axis_table` as shared, cached arrays: read them, never write to them."""
    ch = int(math.ceil(n / zoom))
    start = (n - ch) // 2
    out = int(round(ch * zoom))  # scipy.ndimage.zoom's output length (round half even)
    trim = (out - n) // 2
    # grid_mode=False: output j samples input coordinate j * (in - 1) / (out - 1)
    step = (ch - 1) / (out - 1) if out > 1 else 1.0
    cc = np.arange(trim, trim + n, dtype=np.float64) * step
    cc = np.minimum(cc, float(ch - 1))
    f = np.floor(cc)
    t = cc - f
    i0 = f.astype(np.int64) + start
    i1 = np.minimum(f.astype(np.int64) + 1, ch - 1) + start
    for a in (i0, i1, t):
        a.setflags(write=False)
    return i0, i1, t


_TABLE_CACHE: dict[tuple[int, float, str, torch.dtype], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def _axis_tensors(
    n: int, zoom: float, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    key = (n, zoom, str(device), dtype)
    hit = _TABLE_CACHE.get(key)
    if hit is None:
        if len(_TABLE_CACHE) > 1024:
            _TABLE_CACHE.clear()
        i0, i1, t = cached_zoom_axis_table(n, zoom)
        hit = (
            torch.tensor(i0, device=device),
            torch.tensor(i1, device=device),
            torch.tensor(t, device=device, dtype=dtype),
        )
        _TABLE_CACHE[key] = hit
    return hit


def _lerp_axis(x: torch.Tensor, dim: int, n: int, zoom: float) -> torch.Tensor:
    i0, i1, t = _axis_tensors(n, zoom, x.device, x.dtype)
    a = x.index_select(dim, i0)
    b = x.index_select(dim, i1)
    shape = [1] * x.ndim
    shape[dim] = n
    # a + (b - a) * t as three separate roundings (no fused multiply-add), so
    # every device gives the same bits; flat regions stay exact, as in SciPy
    return a + (b - a) * t.view(shape)


def clipped_zoom(x: torch.Tensor, zoom: float) -> torch.Tensor:
    """The reference ``clipped_zoom`` on ... x H x W (any leading dims, any H, W; same dtype).

    The centre ``ceil(H/z) x ceil(W/z)`` crop is zoomed by ``z`` with
    ``scipy.ndimage.zoom(order=1)`` semantics (bilinear on a corner-aligned grid,
    output side ``round(side * z)``) and the centre H x W window of the result
    is returned; only that window is computed. In float64 the result equals
    SciPy's to rounding; float32 inputs are interpolated in float32.
    """
    zoom = float(zoom)
    h, w = int(x.shape[-2]), int(x.shape[-1])
    if zoom == 1.0:
        return x.clone()
    y = _lerp_axis(x, x.ndim - 2, h, zoom)
    return _lerp_axis(y, x.ndim - 1, w, zoom)
