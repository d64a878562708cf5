"""Pillow's resampling as Pillow <= 12 ran it: the BOX coefficients shared by the tensor path
(:func:`.digital.pillow_box_resize`) and the compiled CPU passes (:mod:`._resample_cpu`), and the BILINEAR
resize of the editions' preparation and of ImageNet-P (:func:`bilinear_resize`, public as
``shiftbench.editions.bilinear_resize``)."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

__all__ = ["PRECISION_BITS", "box_coefficients", "bilinear_coefficients", "bilinear_resize"]

# Pillow (Resample.c) computes, per output position, the input span of a filter of
# support 0.5 * max(scale, 1) around the centre (i + 0.5) * scale, weights
# box((j - centre + 0.5) / max(scale, 1)) normalised to sum 1, then to fixed point
# with 22 fraction bits (rounded half away from zero). A pass adds 2^21 to the
# integer weighted sum and shifts right by 22, clipping to 0..255. The horizontal
# pass runs first, then the vertical pass on its 8-bit result.
PRECISION_BITS = 22


@lru_cache(maxsize=256)
def box_coefficients(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Input indices and fixed-point weights (out_size x taps) of Pillow's BOX filter."""
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = 0.5 * filterscale
    taps = int(math.ceil(support)) * 2 + 1
    idx = np.zeros((out_size, taps), dtype=np.int64)
    wts = np.zeros((out_size, taps), dtype=np.int64)
    for i in range(out_size):
        centre = (i + 0.5) * scale
        lo = max(int(centre - support + 0.5), 0)
        hi = min(int(centre + support + 0.5), in_size)
        # Pillow evaluates the filter at (j - centre + 0.5) * (1 / filterscale): a product with the
        # reciprocal, which rounds differently from a division at the box's edges
        ss = 1.0 / filterscale
        w = np.array([1.0 if -0.5 < (j + 0.5 - centre) * ss <= 0.5 else 0.0 for j in range(lo, hi)])
        if w.sum() != 0.0:
            w = w / w.sum()
        n = hi - lo
        idx[i, :n] = np.arange(lo, hi)
        idx[i, n:] = lo
        wts[i, :n] = np.floor(w * (1 << PRECISION_BITS) + 0.5).astype(np.int64)  # weights are >= 0
    return idx, wts


def bilinear_coefficients(in_size: int, out_size: int) -> np.ndarray:
    """Pillow's fixed-point BILINEAR resampling matrix (``out_size x in_size``, int64).

    For output sample ``i`` the centre is ``(i + 0.5) * scale`` with
    ``scale = in / out``; the triangle filter is widened by ``max(scale, 1)``,
    its support window is ``int(centre -/+ support + 0.5)`` clipped to the
    input, the weights are normalised in double precision and then rounded to
    22-bit integers (half away from zero).
    """
    return _bilinear_coefficients(int(in_size), int(out_size)).copy()


@lru_cache(maxsize=64)
def _bilinear_coefficients(in_size: int, out_size: int) -> np.ndarray:
    scale = float(in_size) / out_size
    filterscale = max(scale, 1.0)
    support = 1.0 * filterscale
    mat = np.zeros((out_size, in_size), dtype=np.int64)
    for i in range(out_size):
        centre = (i + 0.5) * scale
        xmin = max(int(centre - support + 0.5), 0)
        xmax = min(int(centre + support + 0.5), in_size) - xmin
        ws = []
        total = 0.0
        for k in range(xmax):
            t = abs((k + xmin - centre + 0.5) * (1.0 / filterscale))
            wv = 1.0 - t if t < 1.0 else 0.0
            ws.append(wv)
            total += wv
        for k, wv in enumerate(ws):
            if total != 0.0:
                wv = wv / total
            fixed = int(-0.5 + wv * (1 << PRECISION_BITS)) if wv < 0 else int(0.5 + wv * (1 << PRECISION_BITS))
            mat[i, xmin + k] = fixed
    mat.setflags(write=False)
    return mat


def _resample_pass(x: torch.Tensor, mat: np.ndarray, dim: int) -> torch.Tensor:
    m = torch.tensor(mat, device=x.device, dtype=torch.float64)
    if dim == -1:
        acc = torch.matmul(x, m.transpose(0, 1))
    else:
        acc = torch.matmul(m, x)
    # the sums are exact integers in float64 (|sum| < 2^53)
    return torch.floor((acc + (1 << (PRECISION_BITS - 1))) / (1 << PRECISION_BITS)).clamp_(0, 255)


def bilinear_resize(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Pillow's ``Image.resize((width, height), BILINEAR)`` of ... x H x W 8-bit levels (float64), as Pillow <= 12
    ran it: the horizontal pass first, an 8-bit intermediate, then the vertical pass; a pass whose size does not
    change is skipped, as in Pillow. (Pillow 13 runs the passes in another order for some shapes, which moves some
    pixels by one level.)
    """
    h, w = int(x.shape[-2]), int(x.shape[-1])
    y = x.to(torch.float64)
    if w != width:
        y = _resample_pass(y, _bilinear_coefficients(w, width), -1)
    if h != height:
        y = _resample_pass(y, _bilinear_coefficients(h, height), -2)
    return y
