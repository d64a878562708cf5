"""Batched building blocks shared by the corruptions (torch, CPU or CUDA).

Separable linear filters (Gaussian blurs with SciPy's boundary modes, bilinear
zooms) are expressed as small dense operator matrices built once in float64 with
NumPy and cached. Applying them is two batched matrix products, which runs at
BLAS speed on the CPU and on the GPU and reproduces SciPy's boundary handling
exactly, whatever the kernel length (even kernels longer than the image).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

__all__ = [
    "extend_index",
    "gaussian_kernel1d",
    "gaussian_matrix",
    "separable",
    "gaussian_filter2d",
    "gaussian_filter2d_memory",
    "dense_gaussian_memory",
    "rgb_to_hsv",
    "hsv_to_rgb",
    "as_tensor_matrix",
]


def extend_index(idx: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Map integer indices outside 0..n-1 into range following a SciPy ndimage boundary mode.

    Returns -1 for samples that fall outside with ``mode='constant'`` (cval 0).
    """
    idx = np.asarray(idx, dtype=np.int64)
    if mode == "nearest":
        return np.clip(idx, 0, n - 1)
    if mode == "reflect":  # half-sample symmetric: d c b a | a b c d | d c b a
        if n == 1:
            return np.zeros_like(idx)
        j = np.mod(idx, 2 * n)
        return np.where(j >= n, 2 * n - 1 - j, j)
    if mode == "mirror":  # whole-sample symmetric: d c b | a b c d | c b a
        if n == 1:
            return np.zeros_like(idx)
        p = 2 * n - 2
        j = np.mod(idx, p)
        return np.where(j >= n, p - j, j)
    if mode == "wrap":
        return np.mod(idx, n)
    if mode == "constant":
        return np.where((idx < 0) | (idx >= n), -1, idx)
    raise ValueError(f"unknown boundary mode {mode!r}")


def gaussian_kernel1d(sigma: float, truncate: float) -> np.ndarray:
    """SciPy's ``gaussian_filter1d`` weights: radius ``int(truncate*sigma + 0.5)``, sum 1."""
    radius = int(truncate * float(sigma) + 0.5)
    x = np.arange(-radius, radius + 1)
    phi = np.exp(-0.5 / (float(sigma) * float(sigma)) * x.astype(np.float64) ** 2)
    return phi / phi.sum()


@lru_cache(maxsize=256)
def _gaussian_matrix_np(n: int, sigma: float, mode: str, truncate: float) -> np.ndarray:
    if sigma <= 1e-15:  # SciPy skips axes with (near) zero sigma
        return np.eye(n)
    w = gaussian_kernel1d(sigma, truncate)
    r = (len(w) - 1) // 2
    m = np.zeros((n, n), dtype=np.float64)
    rows = np.arange(n)
    for k in range(-r, r + 1):
        src = extend_index(rows + k, n, mode)
        ok = src >= 0
        np.add.at(m, (rows[ok], src[ok]), w[k + r])
    return m


def gaussian_matrix(n: int, sigma: float, mode: str = "nearest", truncate: float = 4.0) -> np.ndarray:
    """n x n matrix M with ``M @ v == scipy.ndimage.gaussian_filter1d(v, sigma, mode=mode, truncate=truncate)``."""
    from ._images import require_memory

    require_memory(3 * 8 * int(n) ** 2, f"a side of {int(n)} px (a {int(n)} x {int(n)} filter matrix)")
    return _gaussian_matrix_np(int(n), float(sigma), str(mode), float(truncate))


_TENSOR_CACHE: dict[tuple[int, str, torch.dtype], tuple[np.ndarray, torch.Tensor]] = {}


def as_tensor_matrix(m: np.ndarray, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Cached device copy of a (cached, immutable) NumPy operator matrix."""
    key = (id(m), str(device), dtype)
    hit = _TENSOR_CACHE.get(key)
    if hit is not None and hit[0] is m:  # holding m keeps its id from being reused while cached
        return hit[1]
    if len(_TENSOR_CACHE) > 512:
        _TENSOR_CACHE.clear()
    t = torch.from_numpy(m).to(device=device, dtype=dtype)
    _TENSOR_CACHE[key] = (m, t)
    return t


def separable(x: torch.Tensor, mh: torch.Tensor, mw: torch.Tensor) -> torch.Tensor:
    """Apply row operator ``mh`` (H' x H) and column operator ``mw`` (W' x W) to ... x H x W."""
    return torch.matmul(torch.matmul(mh, x), mw.transpose(0, 1))


def gaussian_filter2d(
    x: torch.Tensor, sigma: float, mode: str = "nearest", truncate: float = 4.0
) -> torch.Tensor:
    """Spatial Gaussian blur of ... x H x W (channels independent), SciPy semantics.

    Dense operator matrices in general; on the CPU in float64, short kernels (at most a third
    of each side) take the compiled direct correlation of ``_gauss_cpu``, which equals SciPy, and the
    dense operators of mode ``reflect`` use their symmetry (half the multiplications; the same values up
    to the rounding of the float64 sums: 8-bit outputs unchanged, ``tests/test_fidelity.py``).
    """
    h, w = int(x.shape[-2]), int(x.shape[-1])
    if x.device.type == "cpu" and x.dtype == torch.float64 and sigma > 1e-15 and mode != "constant":
        radius = int(truncate * float(sigma) + 0.5)
        if 3 * (2 * radius + 1) <= min(h, w):
            return _gaussian_direct_cpu(x, sigma, mode, truncate)
        if mode == "reflect" and min(h, w) >= 2:
            return _gaussian_dense_cpu(x, sigma, mode, truncate)
    mh = as_tensor_matrix(gaussian_matrix(h, sigma, mode, truncate), x.device, x.dtype)
    mw = mh if w == h else as_tensor_matrix(gaussian_matrix(w, sigma, mode, truncate), x.device, x.dtype)
    return separable(x, mh, mw)


def gaussian_filter2d_memory(h: int, w: int, sigma: float, mode: str = "nearest", truncate: float = 4.0) -> int:
    """Bytes :func:`gaussian_filter2d` allocates for one H x W float64 plane on the CPU at most: two copies of the
    plane, and, where it takes the dense operators (kernels longer than a third of a side), the two n x n matrices as
    NumPy arrays and tensors (a 32 x 20000 strip: 12 GiB)."""
    radius = int(truncate * float(sigma) + 0.5)
    direct = sigma > 1e-15 and mode != "constant" and 3 * (2 * radius + 1) <= min(h, w)
    return 2 * 8 * h * w + (0 if direct else 2 * 8 * (h * h + w * w))


def dense_gaussian_memory(h: int, w: int) -> int:
    """Bytes of the dense Gaussian operators of an H x W plane (:func:`gaussian_matrix` of both sides, as NumPy arrays
    and tensors)."""
    return 2 * 8 * (h * h + w * w)


@lru_cache(maxsize=64)
def _symmetric_halves(n: int, sigma: float, mode: str, truncate: float) -> tuple[torch.Tensor, ...]:
    """(P, M, P^T, M^T) of the side's Gaussian operator, contiguous float64 tensors (never written)."""
    from ._cpu.gauss import symmetric_halves

    p, m = symmetric_halves(gaussian_matrix(n, sigma, mode, truncate))
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in (p, m, p.T, m.T))


def _gaussian_dense_cpu(x: torch.Tensor, sigma: float, mode: str, truncate: float) -> torch.Tensor:
    """The dense operators of a symmetric boundary mode on the CPU (float64), plane by plane: their
    centrosymmetry halves the multiplications (:mod:`._cpu.gauss`), which run as torch matrix products on
    the calling thread's torch threads."""
    from ._cpu.gauss import fold_rows, unfold_cols, unfold_rows_fold_cols

    h, w = int(x.shape[-2]), int(x.shape[-1])
    ph, mh = _symmetric_halves(h, float(sigma), mode, float(truncate))[:2]
    pwt, mwt = _symmetric_halves(w, float(sigma), mode, float(truncate))[2:]
    kh, mrows, kw, mcols = ph.shape[0], mh.shape[0], pwt.shape[0], mwt.shape[0]
    flat = np.ascontiguousarray(x.detach().reshape(-1, h, w).numpy())
    out = np.empty_like(flat)
    f64 = torch.float64
    s, d, p, q = torch.empty(kh, w, dtype=f64), torch.empty(mrows, w, dtype=f64), torch.empty(kh, w, dtype=f64), torch.empty(mrows, w, dtype=f64)
    t = np.empty((h, w))
    sc, dc, pc, qc = torch.empty(h, kw, dtype=f64), torch.empty(h, mcols, dtype=f64), torch.empty(h, kw, dtype=f64), torch.empty(h, mcols, dtype=f64)
    for k in range(flat.shape[0]):
        fold_rows(flat[k], s.numpy(), d.numpy())
        torch.mm(ph, s, out=p)
        torch.mm(mh, d, out=q)
        unfold_rows_fold_cols(p.numpy(), q.numpy(), t, sc.numpy(), dc.numpy())
        torch.mm(sc, pwt, out=pc)
        torch.mm(dc, mwt, out=qc)
        unfold_cols(pc.numpy(), qc.numpy(), out[k])
    return torch.from_numpy(out).reshape(x.shape)


def _gaussian_direct_cpu(x: torch.Tensor, sigma: float, mode: str, truncate: float) -> torch.Tensor:
    from ._cpu.gauss import filter_cols, filter_rows

    h, w = int(x.shape[-2]), int(x.shape[-1])
    taps = gaussian_kernel1d(sigma, truncate)
    r = (len(taps) - 1) // 2
    half = np.ascontiguousarray(taps[r:])  # symmetric: taps 0..r
    flat = np.ascontiguousarray(x.detach().reshape(-1, h, w).numpy())
    mid = np.empty_like(flat)
    filter_rows(flat, extend_index(np.arange(-r, h + r), h, mode), half, mid)
    out = np.empty_like(flat)
    filter_cols(mid, extend_index(np.arange(-r, w + r), w, mode), half, out)
    return torch.from_numpy(out).reshape(x.shape)


def fdiv(x: torch.Tensor, d: float) -> torch.Tensor:
    """``x / d`` with IEEE division on every device.

    CUDA divides a tensor by a Python number as a multiplication by its reciprocal,
    which is one bit off now and then; truncation to 8 bits can show that bit. A
    0-d tensor on the same device gets a true division, so CPU and GPU agree.
    """
    if x.device.type == "cpu":
        return x / d
    return x / torch.full((), d, dtype=x.dtype, device=x.device)


def rgb_to_hsv(rgb: torch.Tensor) -> torch.Tensor:
    """RGB (B x 3 x H x W, [0, 1]) to HSV with scikit-image's conventions and tie rules."""
    r, g, b = rgb[:, 0], rgb[:, 1], rgb[:, 2]
    v = torch.maximum(torch.maximum(r, g), b)
    delta = v - torch.minimum(torch.minimum(r, g), b)
    zero = delta == 0
    safe_v = torch.where(v == 0, torch.ones_like(v), v)
    s = torch.where(zero, torch.zeros_like(v), delta / safe_v)
    safe_d = torch.where(zero, torch.ones_like(delta), delta)
    h = torch.zeros_like(v)
    # later assignments win, as in scikit-image (red, then green, then blue)
    h = torch.where(r == v, (g - b) / safe_d, h)
    h = torch.where(g == v, 2.0 + (b - r) / safe_d, h)
    h = torch.where(b == v, 4.0 + (r - g) / safe_d, h)
    h = torch.remainder(fdiv(h, 6.0), 1.0)
    h = torch.where(zero, torch.zeros_like(h), h)
    return torch.stack([h, s, v], dim=1)


def hsv_to_rgb(hsv: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`rgb_to_hsv` (scikit-image's ``hsv2rgb``)."""
    h, s, v = hsv[:, 0], hsv[:, 1], hsv[:, 2]
    hi = torch.floor(h * 6)
    f = h * 6 - hi
    p = v * (1 - s)
    q = v * (1 - f * s)
    t = v * (1 - (1 - f) * s)
    hi = torch.remainder(hi.to(torch.int64), 6)
    choices = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out_r = torch.zeros_like(v)
    out_g = torch.zeros_like(v)
    out_b = torch.zeros_like(v)
    for k, (cr, cg, cb) in enumerate(choices):
        m = hi == k
        out_r = torch.where(m, cr, out_r)
        out_g = torch.where(m, cg, out_g)
        out_b = torch.where(m, cb, out_b)
    return torch.stack([out_r, out_g, out_b], dim=1)
