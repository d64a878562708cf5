"""Geometric kernels of the ImageNet-P generators, in torch (CPU or GPU).

Every kernel evaluates only a window of the output canvas (the part a later
centre crop keeps), samples with explicitly computed source coordinates
(a gather-based grid sampler) and reproduces the integer arithmetic of the
library the reference generator called, so frames come out 8-bit exact:

* :func:`affine_matrix_tv021`: the inverse affine matrix of torchvision 0.2.1's
  ``transforms.functional.affine`` (centre ``(w/2 + 0.5, h/2 + 0.5)``, one
  shear angle, scale inverted), evaluated with the same floating-point
  operation order.
* :func:`pil_affine`: Pillow's ``Image.transform(AFFINE)`` with ``BILINEAR``
  (source position ``M @ (x + 0.5, y + 0.5)``, outside test before the half
  pixel shift, edge-clamped neighbours, double-precision lerps, truncation to
  8 bits, black fill) or ``NEAREST`` (``int()`` of the source position).
* :func:`tilt_homography` and :func:`cv_warp_perspective`: the tilt
  homography and OpenCV's fixed-point ``warpPerspective`` (``INTER_LINEAR``,
  constant 0 border) as OpenCV computed it up to 4.10: source positions
  rounded to 1/32 pixel, 15-bit integer weights, rounding shift.
* :func:`pil_resize`: Pillow's ``Image.resize(BILINEAR)`` (triangle filter
  widened by the reduction factor, 22-bit fixed-point coefficients, horizontal
  then vertical pass with 8-bit intermediate).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..editions import bilinear_coefficients, bilinear_resize

__all__ = [
    "affine_matrix_tv021",
    "tilt_homography",
    "pil_affine",
    "cv_warp_perspective",
    "pil_resize",
    "pil_resize_coefficients",
    "Window",
]

Window = tuple[int, int, int, int]
"""``(top, left, height, width)`` of the evaluated part of the output canvas."""


def affine_matrix_tv021(
    width: int, height: int, angle: float, translate: tuple[float, float], scale: float, shear: float
) -> tuple[float, ...]:
    """Coefficients ``(a, b, c, d, e, f)`` that torchvision 0.2.1 hands to Pillow.

    The forward map is ``T * C * RSS * C^-1`` about the centre
    ``(w * 0.5 + 0.5, h * 0.5 + 0.5)``, with
    ``RSS = scale * [[cos a, -sin(a + s)], [sin a, cos(a + s)]]``; Pillow needs
    its inverse (output pixel -> source position). The arithmetic follows the
    0.2.1 formula step by step so that the doubles are identical.

    Args:
        width, height: image size in pixels.
        angle: rotation in degrees.
        translate: (tx, ty) in pixels, applied after the rotation.
        scale: zoom factor (> 0).
        shear: shear angle in degrees (one angle: the 0.2.x convention).

    Returns:
        The six affine coefficients of Pillow's ``Image.transform(AFFINE)``.
    """
    cx = width * 0.5 + 0.5
    cy = height * 0.5 + 0.5
    a = math.radians(angle)
    s = math.radians(shear)
    inv_scale = 1.0 / scale
    det = math.cos(a + s) * math.cos(a) + math.sin(a + s) * math.sin(a)
    m = [math.cos(a + s), math.sin(a + s), 0.0, -math.sin(a), math.cos(a), 0.0]
    m = [inv_scale / det * v for v in m]
    m[2] += m[0] * (-cx - translate[0]) + m[1] * (-cy - translate[1])
    m[5] += m[3] * (-cx - translate[0]) + m[4] * (-cy - translate[1])
    m[2] += cx
    m[5] += cy
    return tuple(m)


def tilt_homography(width: int, height: int, phi_deg: float, theta_deg: float) -> np.ndarray:
    """The 3 x 3 tilt homography (source pixel -> output pixel).

    The pixel grid is centred and placed in the plane z = 1, rotated by ``phi``
    about the y axis and then by ``theta`` about the x axis, moved by
    ``f = sqrt(w^2 + h^2)`` along z and projected with focal length ``f`` and
    principal point ``(w/2, h/2)``. The product is formed in the same order as
    the reference (``P2 @ T @ RX @ RY @ P1``).
    """
    w, h = float(width), float(height)
    phi, theta = np.deg2rad(phi_deg), np.deg2rad(theta_deg)
    f = np.sqrt(w**2 + h**2)
    p1 = np.array([[1, 0, -w / 2], [0, 1, -h / 2], [0, 0, 1], [0, 0, 1]])
    rx = np.array(
        [[1, 0, 0, 0], [0, np.cos(theta), -np.sin(theta), 0], [0, np.sin(theta), np.cos(theta), 0], [0, 0, 0, 1]]
    )
    ry = np.array([[np.cos(phi), 0, -np.sin(phi), 0], [0, 1, 0, 0], [np.sin(phi), 0, np.cos(phi), 0], [0, 0, 0, 1]])
    t = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, f], [0, 0, 0, 1]])
    p2 = np.array([[f, 0, w / 2, 0], [0, f, h / 2, 0], [0, 0, 1, 0]])
    return p2 @ t @ rx @ ry @ p1


def _grid(window: Window, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    top, left, wh, ww = window
    ys = torch.arange(top, top + wh, device=device, dtype=torch.float64)
    xs = torch.arange(left, left + ww, device=device, dtype=torch.float64)
    return ys.view(1, wh, 1), xs.view(1, 1, ww)


def _gather(img: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """``img[:, rows, cols]`` for C x H x W ``img`` and equally shaped index tensors -> C x *idx."""
    c, _, w = (int(s) for s in img.shape)
    flat = img.reshape(c, -1)
    idx = (rows * w + cols).reshape(-1)
    return flat.index_select(1, idx).reshape((c,) + tuple(rows.shape))


_KERNELS: dict[str, Any] = {}
USE_CPU_KERNELS = True
"""On the CPU, run the compiled kernels (True) or the torch code used on other devices (False)."""


def _cpu_kernels() -> dict[str, Any]:
    """Compile (once) the Numba kernels of the CPU path; they repeat the torch arithmetic per pixel."""
    ks = _KERNELS.get("warp")
    if ks is not None:
        return ks
    import numba

    @numba.njit(cache=True, nogil=True)
    def affine_bilinear(img, coeffs, top, left, out, f0, f1):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        nc, h, w = img.shape
        wh, ww = out.shape[2], out.shape[3]
        for t in range(f0, f1):
            a0, a1, a2, a3, a4, a5 = coeffs[t, 0], coeffs[t, 1], coeffs[t, 2], coeffs[t, 3], coeffs[t, 4], coeffs[t, 5]
            for yy in range(wh):
                yin = float(top + yy) + 0.5
                for xx in range(ww):
                    xin = float(left + xx) + 0.5
                    sx = a0 * xin + a1 * yin + a2
                    sy = a3 * xin + a4 * yin + a5
                    if sx < 0.0 or sx >= w or sy < 0.0 or sy >= h:
                        for c in range(nc):
                            out[t, c, yy, xx] = 0.0
                        continue
                    sx -= 0.5
                    sy -= 0.5
                    fx = np.floor(sx)
                    fy = np.floor(sy)
                    dx = sx - fx
                    dy = sy - fy
                    x0 = int(fx)
                    y0 = int(fy)
                    c0 = min(max(x0, 0), w - 1)
                    c1 = min(max(x0 + 1, 0), w - 1)
                    r0 = min(max(y0, 0), h - 1)
                    r1 = y0 + 1
                    for c in range(nc):
                        p00 = img[c, r0, c0]
                        v1 = p00 + (img[c, r0, c1] - p00) * dx
                        if 0 <= r1 < h:
                            p10 = img[c, r1, c0]
                            v2 = p10 + (img[c, r1, c1] - p10) * dx
                        else:
                            v2 = v1
                        out[t, c, yy, xx] = np.trunc(v1 + (v2 - v1) * dy)

    @numba.njit(cache=True, nogil=True)
    def affine_nearest(img, coeffs, top, left, out, f0, f1):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        nc, h, w = img.shape
        wh, ww = out.shape[2], out.shape[3]
        for t in range(f0, f1):
            a0, a1, a2, a3, a4, a5 = coeffs[t, 0], coeffs[t, 1], coeffs[t, 2], coeffs[t, 3], coeffs[t, 4], coeffs[t, 5]
            for yy in range(wh):
                yin = float(top + yy) + 0.5
                for xx in range(ww):
                    xin = float(left + xx) + 0.5
                    sx = a0 * xin + a1 * yin + a2
                    sy = a3 * xin + a4 * yin + a5
                    ix = -1 if sx < 0.0 else int(sx)
                    iy = -1 if sy < 0.0 else int(sy)
                    if ix < 0 or ix >= w or iy < 0 or iy >= h:
                        for c in range(nc):
                            out[t, c, yy, xx] = 0.0
                    else:
                        for c in range(nc):
                            out[t, c, yy, xx] = img[c, iy, ix]

    @numba.njit(cache=True, nogil=True)
    def perspective_fixed(img, inv, top, left, out, f0, f1):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        nc, h, w = img.shape
        wh, ww = out.shape[2], out.shape[3]
        lo = -2147483648.0
        hi = 2147483647.0
        for t in range(f0, f1):
            m = inv[t]
            for yy in range(wh):
                y = float(top + yy)
                for xx in range(ww):
                    x = float(left + xx)
                    xn = m[0] * x + m[1] * y + m[2]
                    yn = m[3] * x + m[4] * y + m[5]
                    z = m[6] * x + m[7] * y + m[8]
                    zi = 32.0 / z if z != 0.0 else 0.0
                    qx = np.int64(np.rint(min(max(xn * zi, lo), hi)))
                    qy = np.int64(np.rint(min(max(yn * zi, lo), hi)))
                    sx = qx >> 5
                    sy = qy >> 5
                    fx = qx & 31
                    fy = qy & 31
                    w00 = (32 - fy) * (32 - fx) * 32
                    w01 = (32 - fy) * fx * 32
                    w10 = fy * (32 - fx) * 32
                    w11 = fy * fx * 32
                    ok0x = 0 <= sx < w
                    ok1x = 0 <= sx + 1 < w
                    ok0y = 0 <= sy < h
                    ok1y = 0 <= sy + 1 < h
                    for c in range(nc):
                        acc = np.int64(0)
                        if ok0y:
                            if ok0x:
                                acc += np.int64(img[c, sy, sx]) * w00
                            if ok1x:
                                acc += np.int64(img[c, sy, sx + 1]) * w01
                        if ok1y:
                            if ok0x:
                                acc += np.int64(img[c, sy + 1, sx]) * w10
                            if ok1x:
                                acc += np.int64(img[c, sy + 1, sx + 1]) * w11
                        v = (acc + 16384) >> 15
                        out[t, c, yy, xx] = min(max(v, 0), 255)

    ks = {"bilinear": affine_bilinear, "nearest": affine_nearest, "perspective": perspective_fixed}
    _KERNELS["warp"] = ks
    return ks


def _run_cpu(kernel: Any, img: torch.Tensor, mats: np.ndarray, window: Window) -> torch.Tensor:
    from ..corruptions import run_threaded

    top, left, wh, ww = window
    src = np.ascontiguousarray(img.detach().to(torch.float64).numpy())
    m = np.ascontiguousarray(mats, dtype=np.float64)
    out = np.empty((m.shape[0], src.shape[0], wh, ww), dtype=np.float64)
    run_threaded(m.shape[0], lambda s, e: kernel(src, m, int(top), int(left), out, s, e))
    return torch.from_numpy(out)


def pil_affine(img: torch.Tensor, coeffs: torch.Tensor, window: Window, *, bilinear: bool = True) -> torch.Tensor:
    """Pillow's ``Image.transform(size, AFFINE, coeffs, BILINEAR | NEAREST)`` of an RGB image.

    Args:
        img: 3 x H x W float64 tensor of 8-bit levels (the source image).
        coeffs: T x 6 float64 affine coefficients (one transform per frame).
        window: part of the H x W output canvas to evaluate.
        bilinear: ``BILINEAR`` (True) or ``NEAREST`` (False).

    Returns:
        T x 3 x wh x ww float64 tensor of 8-bit levels; positions outside the
        source are black.
    """
    if img.device.type == "cpu" and USE_CPU_KERNELS:
        kern = _cpu_kernels()["bilinear" if bilinear else "nearest"]
        return _run_cpu(kern, img, coeffs.detach().cpu().numpy().reshape(-1, 6), window)
    _, h, w = (int(s) for s in img.shape)
    ys, xs = _grid(window, img.device)
    a = coeffs.to(device=img.device, dtype=torch.float64).view(-1, 6, 1, 1)
    xin = xs + 0.5
    yin = ys + 0.5
    sx = a[:, 0] * xin + a[:, 1] * yin + a[:, 2]
    sy = a[:, 3] * xin + a[:, 4] * yin + a[:, 5]
    if not bilinear:
        # int() truncation, with every negative position mapped outside (Pillow's COORD)
        ix = torch.where(sx < 0, torch.full_like(sx, -1.0), torch.trunc(sx)).to(torch.int64)
        iy = torch.where(sy < 0, torch.full_like(sy, -1.0), torch.trunc(sy)).to(torch.int64)
        inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
        v = _gather(img, iy.clamp(0, h - 1), ix.clamp(0, w - 1))
        return torch.where(inside.unsqueeze(0), v, torch.zeros_like(v)).transpose(0, 1)
    inside = (sx >= 0) & (sx < w) & (sy >= 0) & (sy < h)
    sx = sx - 0.5
    sy = sy - 0.5
    fx = torch.floor(sx)
    fy = torch.floor(sy)
    dx = (sx - fx).unsqueeze(0)
    dy = (sy - fy).unsqueeze(0)
    x0 = fx.to(torch.int64)
    y0 = fy.to(torch.int64)
    c0 = x0.clamp(0, w - 1)
    c1 = (x0 + 1).clamp(0, w - 1)
    r0 = y0.clamp(0, h - 1)
    r1_ok = ((y0 + 1) >= 0) & ((y0 + 1) < h)
    r1 = (y0 + 1).clamp(0, h - 1)
    p00 = _gather(img, r0, c0)
    p01 = _gather(img, r0, c1)
    v1 = p00 + (p01 - p00) * dx
    p10 = _gather(img, r1, c0)
    p11 = _gather(img, r1, c1)
    v2 = p10 + (p11 - p10) * dx
    v2 = torch.where(r1_ok.unsqueeze(0), v2, v1)
    v = torch.trunc(v1 + (v2 - v1) * dy)
    return torch.where(inside.unsqueeze(0), v, torch.zeros_like(v)).transpose(0, 1)


_INTER_BITS = 5
_INTER_TAB = 1 << _INTER_BITS
_COEF_BITS = 15


def cv_warp_perspective(img: torch.Tensor, homographies: np.ndarray, window: Window) -> torch.Tensor:
    """OpenCV's ``warpPerspective(img, M, (W, H))`` (INTER_LINEAR, BORDER_CONSTANT 0), fixed point.

    ``M`` maps source pixels to output pixels and is inverted in double
    precision. For output pixel ``(x, y)`` the source position
    ``(X/Z, Y/Z)`` is rounded (half to even) to 1/32 pixel; the four
    neighbours are weighted with ``(32 - fy)(32 - fx) * 32`` and so on (15-bit
    weights summing to 32768); neighbours outside the image count as 0; the
    sum is rounded by ``(s + 2^14) >> 15``. This is OpenCV's arithmetic up to
    release 4.10 (the generation environment used 3.4).

    Args:
        img: 3 x H x W float64 tensor of 8-bit levels.
        homographies: T x 3 x 3 forward homographies.
        window: part of the output canvas (same size as ``img``) to evaluate.

    Returns:
        T x 3 x wh x ww float64 tensor of 8-bit levels.
    """
    inv = np.stack([np.linalg.inv(np.asarray(m, dtype=np.float64)) for m in homographies])
    if img.device.type == "cpu" and USE_CPU_KERNELS:
        return _run_cpu(_cpu_kernels()["perspective"], img, inv.reshape(-1, 9), window)
    _, h, w = (int(s) for s in img.shape)
    m = torch.from_numpy(inv).to(img.device).view(-1, 9, 1, 1)
    ys, xs = _grid(window, img.device)
    x_num = m[:, 0] * xs + m[:, 1] * ys + m[:, 2]
    y_num = m[:, 3] * xs + m[:, 4] * ys + m[:, 5]
    z = m[:, 6] * xs + m[:, 7] * ys + m[:, 8]
    zinv = torch.where(z != 0, _INTER_TAB / torch.where(z != 0, z, torch.ones_like(z)), torch.zeros_like(z))
    big = float(2**31 - 1)
    qx = torch.round(torch.clamp(x_num * zinv, -big - 1, big)).to(torch.int64)
    qy = torch.round(torch.clamp(y_num * zinv, -big - 1, big)).to(torch.int64)
    sx = qx >> _INTER_BITS
    sy = qy >> _INTER_BITS
    fx = qx & (_INTER_TAB - 1)
    fy = qy & (_INTER_TAB - 1)
    acc = torch.zeros((3,) + tuple(sx.shape), dtype=torch.float64, device=img.device)
    for ox, oy, wgt in (
        (0, 0, (_INTER_TAB - fy) * (_INTER_TAB - fx)),
        (1, 0, (_INTER_TAB - fy) * fx),
        (0, 1, fy * (_INTER_TAB - fx)),
        (1, 1, fy * fx),
    ):
        cx = sx + ox
        cy = sy + oy
        ok = (cx >= 0) & (cx < w) & (cy >= 0) & (cy < h)
        v = _gather(img, cy.clamp(0, h - 1), cx.clamp(0, w - 1))
        acc += v * (wgt * ok * _INTER_TAB).to(torch.float64).unsqueeze(0)
    out = torch.floor((acc + (1 << (_COEF_BITS - 1))) / (1 << _COEF_BITS)).clamp_(0, 255)
    return out.transpose(0, 1)


# Pillow's BILINEAR resize as Pillow <= 12 ran it is engine code (the ImageNet-C editions resize with it too)
pil_resize = bilinear_resize
pil_resize_coefficients = bilinear_coefficients
