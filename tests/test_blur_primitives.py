"""Blur building blocks against direct transcriptions of what the reference computes.

* ImageMagick motion blur vs a slow per-pixel NumPy transcription of
  ``MotionBlurImage`` (and, when the peers environment is present, vs Wand itself);
* ``clipped_zoom`` vs ``scipy.ndimage.zoom``;
* the SciPy-order Gaussian vs ``scipy.ndimage.gaussian_filter`` (bit for bit);
* the glass pixel loop: Numba kernel, torch row algorithm and a plain Python loop;
* the defocus disk kernel and its REFLECT_101 correlation vs OpenCV;
* the CPU kernels vs the torch implementations used on other devices, per corruption;
* the samplers' draw order vs the reference's calls on ``RandomState``.
"""

from __future__ import annotations

import math
import subprocess
import tempfile
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from scipy import ndimage

import shiftbench
from shiftbench.corruptions import _geometry, blur
from shiftbench.corruptions._registry import ApplyContext, get_corruption
from shiftbench.rng.seeding import LegacyDraws

from .conftest import photos

# --------------------------------------------------------------------------- helpers


def _im_motion_blur_slow(img: np.ndarray, radius: float, sigma: float, angle: float) -> np.ndarray:
    """Per-pixel transcription of ImageMagick 6 Q16 ``MotionBlurImage`` + 8-bit PNG export.

    img: H x W x C uint8. Kernel width 2*ceil(radius)+1, weights exp(-i^2/2s^2)
    normalised by their sequential sum, offsets ceil(i*point/hypot(point) - 0.5)
    with point = width*(sin, cos), edge virtual pixels, double accumulation of
    weight * (257 v) in tap order, ClampToQuantum (round half up), then
    floor(q / 257) as the reference's ImageMagick writes 8-bit PNG samples.
    """
    width = 2 * math.ceil(radius) + 1
    raw = [math.exp(-(float(i) * i) / (2.0 * sigma * sigma)) / (math.sqrt(2 * math.pi) * sigma) for i in range(width)]
    total = 0.0
    for v in raw:
        total += v
    k = [v / total for v in raw]
    rad = math.pi * angle / 180.0
    px, py = width * math.sin(rad), width * math.cos(rad)
    hyp = float(np.hypot(px, py))
    offs = [(math.ceil(i * py / hyp - 0.5), math.ceil(i * px / hyp - 0.5)) for i in range(width)]
    h, w, ch = img.shape
    src = img.astype(np.float64) * 257.0
    out = np.empty(img.shape, dtype=np.uint8)
    for y in range(h):
        for x in range(w):
            for c in range(ch):
                acc = 0.0
                for i, (dx, dy) in enumerate(offs):
                    acc += k[i] * src[min(max(y + dy, 0), h - 1), min(max(x + dx, 0), w - 1), c]
                q = 0.0 if acc <= 0 else 65535.0 if acc >= 65535 else math.floor(acc + 0.5)
                out[y, x, c] = int(q // 257)
    return out


def _motion(img: np.ndarray, radius: float, sigma: float, angle: float) -> np.ndarray:
    x = torch.from_numpy(img).permute(2, 0, 1)[None].to(torch.float64)
    y = _geometry.motion_blur(x, radius, sigma, torch.tensor([angle], dtype=torch.float64))
    return y[0].permute(1, 2, 0).numpy().astype(np.uint8)


def _reference_clipped_zoom_square(img: np.ndarray, z: float) -> np.ndarray:
    """The reference's square ``clipped_zoom`` (H x H x C), transcribed."""
    h = img.shape[0]
    ch = int(np.ceil(h / z))
    top = (h - ch) // 2
    out = ndimage.zoom(img[top : top + ch, top : top + ch], (z, z, 1), order=1)
    trim = (out.shape[0] - h) // 2
    return out[trim : trim + h, trim : trim + h]


def _scipy_clipped_zoom(img: np.ndarray, z: float) -> np.ndarray:
    """General H x W version with the same steps, straight from scipy.ndimage.zoom."""
    h, w = img.shape
    ch, cw = math.ceil(h / z), math.ceil(w / z)
    top, left = (h - ch) // 2, (w - cw) // 2
    out = ndimage.zoom(img[top : top + ch, left : left + cw], (z, z), order=1)
    th, tw = (out.shape[0] - h) // 2, (out.shape[1] - w) // 2
    return out[th : th + h, tw : tw + w]


def _glass_loop_python(u: np.ndarray, off: np.ndarray, d: int) -> np.ndarray:
    """The reference loop (copy semantics) on C x H x W with offsets (iters, n_h, n_w, 2)."""
    u = u.copy()
    _, h, w = u.shape
    for it in range(off.shape[0]):
        for hi, row in enumerate(range(h - d, d, -1)):
            for wi, col in enumerate(range(w - d, d, -1)):
                dx, dy = off[it, hi, wi]
                u[:, row, col] = u[:, row + dy, col + dx]
    return u


# --------------------------------------------------------------------------- motion blur

ANGLES = [-180.0, -135.0, -90.0, -60.0, -45.0, -30.0, -17.3, 0.0, 12.5, 30.0, 45.0, 60.0, 89.9, 90.0, 135.0, 171.0]


@pytest.mark.parametrize("angle", ANGLES)
def test_motion_blur_matches_imagemagick_formula(angle: float) -> None:
    rng = np.random.default_rng(int(abs(angle) * 10))
    img = rng.integers(0, 256, (13, 17, 3)).astype(np.uint8)
    img[:4, :6] = 200  # a flat patch: exact ties of the rounding steps
    for radius, sigma in [(3, 1.5), (10, 3.0), (20, 15.0)]:  # width 41 > image: clamped taps
        want = _im_motion_blur_slow(img, radius, sigma, angle)
        np.testing.assert_array_equal(_motion(img, radius, sigma, angle), want)


def test_motion_blur_offsets_follow_the_documented_formula() -> None:
    # away from exact half-integer ties ImageMagick's arithmetic is ceil(i*cos(a) - 0.5), ceil(i*sin(a) - 0.5)
    for angle in np.random.default_rng(1).uniform(-180, 180, 50):
        dx, dy = _geometry.motion_blur_offsets(41, float(angle))
        i = np.arange(41)
        a = math.radians(float(angle))
        np.testing.assert_array_equal(dx, np.ceil(i * math.cos(a) - 0.5))
        np.testing.assert_array_equal(dy, np.ceil(i * math.sin(a) - 0.5))


def test_motion_blur_kernel_weights() -> None:
    k = _geometry.motion_blur_kernel(15, 5)
    assert len(k) == 31
    i = np.arange(31)
    np.testing.assert_allclose(k, np.exp(-(i**2) / 50.0) / np.exp(-(i**2) / 50.0).sum(), rtol=1e-14)
    assert len(_geometry.motion_blur_kernel(2.5, 1)) == 7


def test_motion_blur_batch_gray_and_torch_path() -> None:
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.integers(0, 256, (3, 1, 33, 47)).astype(np.float64))
    angles = torch.tensor([-44.0, 3.0, 170.0], dtype=torch.float64)
    torch_out = _geometry.motion_blur(x, 12, 6, angles, compiled=False)
    numba_out = _geometry.motion_blur(x, 12, 6, angles)
    assert torch.equal(torch_out, numba_out)
    assert numba_out.dtype == x.dtype and numba_out.shape == x.shape
    for n in range(3):
        img = x[n].permute(1, 2, 0).numpy().astype(np.uint8)
        want = _im_motion_blur_slow(img, 12, 6, float(angles[n]))
        np.testing.assert_array_equal(numba_out[n].permute(1, 2, 0).numpy(), want)


def _peers_python() -> Path | None:
    from .oracle import harness

    return harness.peers_python()


_WAND_SCRIPT = """
import ctypes, sys
from io import BytesIO
import numpy as np, cv2
from PIL import Image
from wand.image import Image as WImage
from wand.api import library
library.MagickMotionBlurImage.argtypes = (ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_double)
data = np.load(sys.argv[1], allow_pickle=True)
outs = []
for img, (r, s, a) in zip(data["images"], data["params"]):
    buf = BytesIO(); Image.fromarray(img).save(buf, format="PNG")
    w = WImage(blob=buf.getvalue())
    library.MagickMotionBlurImage(w.wand, float(r), float(s), float(a))
    y = cv2.imdecode(np.frombuffer(w.make_blob(), np.uint8), cv2.IMREAD_UNCHANGED)
    outs.append(y[..., ::-1] if y.ndim == 3 else np.stack([y] * 3, -1))
np.save(sys.argv[2], np.stack(outs))
"""


def test_motion_blur_matches_wand_when_available() -> None:
    py = _peers_python()
    if py is None:
        pytest.skip("peers environment with Wand/ImageMagick not available")
    rng = np.random.default_rng(11)
    images = rng.integers(0, 256, (6, 36, 52, 3)).astype(np.uint8)
    images[0, :, :] = images[0, :, :, :1]  # a gray image: written as a gray PNG
    images[1, 5:20, 5:30] = 17
    params = np.array([(10, 3, 12.0), (15, 5, -44.9), (15, 12, 0.0), (20, 15, 45.0), (12, 8, -100.0), (6, 2, 170.0)])
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.npz", Path(tmp) / "out.npy"
        np.savez(inp, images=images, params=params)
        script = Path(tmp) / "wand_probe.py"
        script.write_text(_WAND_SCRIPT)
        subprocess.run([str(py), str(script), str(inp), str(out)], check=True, capture_output=True)
        want = np.load(out)
    for img, (r, s, a), w in zip(images, params, want):
        np.testing.assert_array_equal(_motion(img, r, s, a), w)


# --------------------------------------------------------------------------- clipped zoom

ZOOMS = [1.0, 1.01, 1.06, 1.11, 1.1300000000000001, 1.2000000000000002, 1.25, 1.3000000000000003, 1.75, 2.25, 2.5, 3.0, 4.5]


@pytest.mark.parametrize("size", [(224, 224), (299, 299), (64, 64), (32, 32), (37, 53), (100, 41), (224, 180)])
def test_clipped_zoom_matches_scipy(size: tuple[int, int]) -> None:
    rng = np.random.default_rng(size[0] * 1000 + size[1])
    img = rng.random(size)
    for z in ZOOMS:
        ours = _geometry.clipped_zoom(torch.from_numpy(img)[None, None], z)[0, 0].numpy()
        np.testing.assert_allclose(ours, _scipy_clipped_zoom(img, z), rtol=0, atol=1e-15)


@pytest.mark.parametrize("size", [224, 299, 64, 32])
def test_clipped_zoom_equals_reference_square_version(size: int) -> None:
    rng = np.random.default_rng(size)
    img = rng.random((size, size, 3))
    x = torch.from_numpy(img).permute(2, 0, 1)
    for z in ZOOMS:
        want = _reference_clipped_zoom_square(img, z)
        ours = _geometry.clipped_zoom(x, z).permute(1, 2, 0).numpy()
        np.testing.assert_allclose(ours, want, rtol=0, atol=1e-15)


def test_clipped_zoom_float32_and_leading_dims() -> None:
    rng = np.random.default_rng(3)
    img = rng.random((2, 3, 45, 61)).astype(np.float32)
    for z in (1.07, 2.25):
        y = _geometry.clipped_zoom(torch.from_numpy(img), z)
        assert y.dtype == torch.float32 and y.shape == img.shape
        want = _scipy_clipped_zoom(img[1, 2], z)
        np.testing.assert_allclose(y[1, 2].numpy(), want, rtol=0, atol=2e-7)


@pytest.mark.parametrize("size", [(33, 37), (299, 299), (32, 32), (5, 7), (224, 225), (31, 4), (100, 61)])
def test_compiled_zoom_blur_equals_tensor_path_on_any_size(size: tuple[int, int]) -> None:
    """The compiled zoom blur (blocks of 32 rows, 4 x 4 transposes, widths padded to whole tiles) gives
    the tensor path's values on sizes that fill no whole block or tile, for levels and float input."""
    from shiftbench.corruptions._cpu.blur import zoom_kernel

    h, w = size
    rng = np.random.default_rng(h * 1000 + w)
    for zooms in [(1.0, 1.01, 1.1, 1.3), (1.2, 1.0, 1.11)]:
        tables = blur._zoom_tables(h, w, zooms)
        for levels_in in (True, False):
            x = rng.integers(0, 256, (2, 3, h, w)).astype(np.uint8)
            if not levels_in:
                x = x.astype(np.float32) + rng.random(x.shape).astype(np.float32) * 0.9
            want = blur._zoom_blur_torch(torch.from_numpy(x), list(zooms)).numpy()
            for dtype in (np.float32, np.uint8):
                out = np.empty(x.shape, dtype=dtype)
                zoom_kernel(x, levels_in, *tables, 0, 2, out)
                assert np.array_equal(out, want.astype(dtype)), (zooms, levels_in, dtype)


def test_levels_times_the_reciprocal_of_255_round_as_the_quotient() -> None:
    """The compiled zoom blur scales 8-bit levels by 1 / 255 (float64, then float32): the reference's
    float32(level / 255) for every level."""
    v = np.arange(256, dtype=np.float64)
    assert np.array_equal((v * (1.0 / 255.0)).astype(np.float32), (v / 255.0).astype(np.float32))


# --------------------------------------------------------------------------- gaussian


@pytest.mark.parametrize("sigma", [0.05, 0.4, 0.7, 1.0, 2.5, 6.5])
def test_gaussian_is_bit_identical_to_scipy(sigma: float) -> None:
    rng = np.random.default_rng(int(sigma * 100))
    a = rng.random((2, 3, 41, 34))
    want = np.stack([[ndimage.gaussian_filter(a[i, c], sigma, mode="nearest", truncate=4.0) for c in range(3)] for i in range(2)])
    torch_out = blur.gaussian_nearest(torch.from_numpy(a), sigma, compiled=False).numpy()
    numba_out = blur.gaussian_nearest(torch.from_numpy(a), sigma).numpy()
    np.testing.assert_array_equal(torch_out, want)
    np.testing.assert_array_equal(numba_out, want)


# --------------------------------------------------------------------------- glass


@pytest.mark.parametrize(("h", "w", "d", "iters"), [(32, 32, 1, 2), (37, 45, 2, 1), (40, 33, 4, 2), (50, 50, 5, 3)])
def test_glass_shuffle_kernels_agree(h: int, w: int, d: int, iters: int) -> None:
    rng = np.random.default_rng(h * w + d)
    u = rng.integers(0, 256, (2, 3, h, w)).astype(np.float64)
    off = rng.integers(-d, d, (2, iters, h - 2 * d, w - 2 * d, 2)).astype(np.int8)
    ut, ot = torch.from_numpy(u), torch.from_numpy(off)
    numba_out = blur.glass_shuffle(ut, ot, d)
    torch_out = blur.glass_shuffle_torch(ut, ot, d)
    assert torch.equal(numba_out, torch_out)
    np.testing.assert_array_equal(numba_out[1].numpy(), _glass_loop_python(u[1], off[1], d))
    assert not torch.equal(numba_out, ut)


def test_glass_shuffle_resolves_long_in_row_chains() -> None:
    # every pixel copies from its right neighbour in the same row: one chain per row
    h, w, d = 34, 40, 2
    u = torch.arange(3 * h * w, dtype=torch.float64).reshape(1, 3, h, w)
    off = torch.zeros((1, 1, h - 2 * d, w - 2 * d, 2), dtype=torch.int8)
    off[..., 0] = 1
    want = _glass_loop_python(u[0].numpy(), off[0].numpy(), d)
    np.testing.assert_array_equal(blur.glass_shuffle_torch(u, off, d)[0].numpy(), want)
    np.testing.assert_array_equal(blur.glass_shuffle(u, off, d)[0].numpy(), want)
    # the whole row segment takes the value just right of the sweep range
    assert torch.all(blur.glass_shuffle(u, off, d)[0, :, 10, d + 1 : w - d + 1] == u[0, :, 10, w - d + 1 : w - d + 2])


def test_glass_sampler_replays_reference_draw_order() -> None:
    img = np.zeros((36, 41, 3), dtype=np.uint8)
    d = shiftbench.sample_draws(img, "glass_blur", 5, source=LegacyDraws(123), edition="224")
    _, delta, iters = get_corruption("glass_blur").severity_params("224", 5)
    rs = np.random.RandomState(123)
    want = []
    for _ in range(iters):
        for _h in range(36 - delta, delta, -1):
            for _w in range(41 - delta, delta, -1):
                want.append(rs.randint(-delta, delta, size=(2,)))
    np.testing.assert_array_equal(d["offsets"].reshape(-1, 2), np.array(want))


# --------------------------------------------------------------------------- defocus


def test_disk_kernel_sums() -> None:
    sums = {7: 1.00286, 8: 1.01298, 10: 1.01079, 12: 1.00775}
    for radius, want in sums.items():
        assert float(blur.disk_kernel(radius, 0.5).sum()) == pytest.approx(want, abs=5e-6)
    for radius in (3, 4, 5, 6):
        assert float(blur.disk_kernel(radius, 0.5).sum()) == pytest.approx(1.0, abs=1e-6)
    assert blur.disk_kernel(8, 0.5).shape == (17, 17)
    assert blur.disk_kernel(0.5, 0.6).shape == (17, 17)
    assert blur.disk_kernel(12, 0.5).shape == (25, 25)
    assert blur.disk_kernel(3, 0.1).dtype == np.float32


@pytest.mark.parametrize("params", [(3, 0.1), (10, 0.5), (12, 0.5), (0.5, 0.6), (1.5, 0.1)])
def test_defocus_correlation_matches_opencv(params: tuple[float, float]) -> None:
    rng = np.random.default_rng(7)
    a = rng.random((33, 50))
    k = blur.disk_kernel(*params)
    want = cv2.filter2D(a, -1, k)  # float64 image, float32 kernel, REFLECT_101
    ours = blur.correlate_reflect101(torch.from_numpy(a)[None], k)[0].numpy()
    np.testing.assert_allclose(ours, want, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- whole corruptions


def _stacked(draws: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    if not draws or not draws[0]:
        return {}
    return {k: torch.from_numpy(np.stack([np.asarray(d[k]) for d in draws])) for k in draws[0]}


@pytest.mark.parametrize("name", ["gaussian_blur", "glass_blur", "defocus_blur", "motion_blur", "zoom_blur"])
@pytest.mark.parametrize("edition", ["224", "32"])
def test_cpu_kernels_equal_torch_paths(name: str, edition: str) -> None:
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (2, 37, 52, 3)).astype(np.uint8)
    imgs[0, :15] = 255  # saturated and flat regions: exact ties of every rounding step
    imgs[1, 10:30, 5:40] = 128
    spec = get_corruption(name)
    x = torch.from_numpy(imgs).permute(0, 3, 1, 2).to(spec.dtype)
    for sev in (1, 5):
        params = spec.severity_params(edition, sev)
        draws = _stacked([shiftbench.sample_draws(im, name, sev, seed=1, edition=edition) for im in imgs])
        fast = spec.apply(x, params, draws, ApplyContext(edition, sev, backend="compiled"))
        slow = spec.apply(x, params, draws, ApplyContext(edition, sev, backend="tensor"))
        assert fast.shape == x.shape and fast.dtype == x.dtype
        if name == "defocus_blur":  # the tensor path is an FFT: its float sums round differently
            assert float((fast - slow).abs().max()) < 1e-3, (name, edition, sev)
            levels = x.to(torch.uint8)
            fast8 = spec.apply(levels, params, draws, ApplyContext(edition, sev, backend="compiled"))
            slow8 = spec.apply(levels, params, draws, ApplyContext(edition, sev, backend="tensor"))
            assert torch.equal(fast8.clamp(0, 255).to(torch.uint8), slow8.clamp(0, 255).to(torch.uint8)), (name, edition, sev)
        else:
            assert torch.equal(fast, slow), (name, edition, sev)


def test_zoom_blur_matches_reference_formula_on_a_photo() -> None:
    img = photos("64", 1)[0]
    zooms = get_corruption("zoom_blur").severity_params("64", 5)
    x = (img / 255.0).astype(np.float32)
    out = np.zeros_like(x)
    for z in zooms:
        out += _reference_clipped_zoom_square(x, z)
    want = np.clip((x + out) / (len(zooms) + 1), 0, 1) * 255
    ours = shiftbench.corrupt(img, "zoom_blur", 5, edition="64")
    np.testing.assert_array_equal(ours, np.uint8(want))
