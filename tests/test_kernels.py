"""CPU fast paths equal the device-agnostic tensor paths they stand in for."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shiftbench
from shiftbench.corruptions._cpu.hsv import hsv_edit_cpu
from shiftbench.corruptions._ops import hsv_to_rgb, rgb_to_hsv

from .conftest import photos


def _tensor_path(x: torch.Tensor, mode: int, a: float, b: float) -> torch.Tensor:
    hsv = rgb_to_hsv(x / 255.0)
    if mode == 0:
        hsv = torch.stack([hsv[:, 0], hsv[:, 1], torch.clamp(hsv[:, 2] + a, 0, 1)], dim=1)
    else:
        hsv = torch.stack([hsv[:, 0], torch.clamp(hsv[:, 1] * a + b, 0, 1), hsv[:, 2]], dim=1)
    return torch.clamp(hsv_to_rgb(hsv), 0, 1) * 255


@pytest.mark.parametrize(("mode", "a", "b"), [(0, 0.2, 0.0), (0, 0.5, 0.0), (0, -0.3, 0.0), (1, 0.1, 0.0), (1, 5.0, 0.1), (1, 20.0, 0.2)])
def test_fused_hsv_equals_tensor_path(mode: int, a: float, b: float) -> None:
    rng = np.random.default_rng(0)
    real = torch.from_numpy(photos("64", 2)).permute(0, 3, 1, 2).to(torch.float64)
    # plus every kind of tie: gray pixels, two equal maxima, black and white
    synth = torch.from_numpy(rng.integers(0, 4, (2, 3, 64, 64)).astype(np.float64) * 85.0)
    for x in (real, synth):
        assert torch.equal(hsv_edit_cpu(x, mode, a, b), _tensor_path(x, mode, a, b))


# Each edition's pixelate factors at its size, and odd, non-square sizes: the device
# path of pixelate (Pillow's BOX resampling as integer tensor ops) equals Pillow.
@pytest.mark.parametrize(
    ("edition", "height", "width"),
    [("224", 224, 224), ("299", 299, 299), ("64", 64, 64), ("32", 32, 32), ("224", 37, 101), ("64", 224, 180)],
)
def test_tensor_box_resize_equals_pillow(edition: str, height: int, width: int) -> None:
    from PIL import Image

    from shiftbench.corruptions.digital import pillow_box_resize

    rng = np.random.default_rng(height * 1000 + width)
    for c in [*shiftbench.get_corruption("pixelate").params[edition], 1.7]:  # 1.7: an enlargement
        a = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        size = (max(1, int(width * c)), max(1, int(height * c)))
        small_ref = Image.fromarray(a).resize(size, Image.BOX)
        back_ref = np.asarray(small_ref.resize((width, height), Image.BOX))
        x = torch.from_numpy(a).permute(2, 0, 1)[None]
        small = pillow_box_resize(x, size[1], size[0])
        back = pillow_box_resize(small, height, width)
        assert np.array_equal(small[0].permute(1, 2, 0).numpy(), np.asarray(small_ref)), c
        assert np.array_equal(back[0].permute(1, 2, 0).numpy(), back_ref), c


@pytest.mark.parametrize(("level", "scale"), [(0, 60.0), (1, 60.0), (128, 60.0), (255, 3.0), (200, 300.0)])
def test_alias_poisson_draws_follow_the_poisson_law(level: int, scale: float) -> None:
    from scipy.stats import poisson

    from shiftbench.rng.seeding import FastDraws

    draws = FastDraws(np.random.Generator(np.random.PCG64(level))).poisson_levels(
        np.full((500, 500, 4), level, dtype=np.uint8), scale
    )
    assert draws.dtype == np.float32 and draws.shape == (500, 500, 4)
    lam = scale * level / 255.0
    counts = np.bincount(draws.astype(np.int64).ravel())
    pmf = poisson.pmf(np.arange(len(counts) + 50), lam)
    emp = np.zeros_like(pmf)
    emp[: len(counts)] = counts / draws.size
    # total variation distance of 10^6 draws: sampling noise alone stays far below 0.01
    assert 0.5 * np.abs(emp - pmf).sum() < 0.01
    assert abs(float(draws.mean()) - lam) < 0.01 * max(1.0, lam**0.5)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_ziggurat_normals_follow_the_normal_law(precision: str) -> None:
    from scipy import stats

    from shiftbench.rng.seeding import FastDraws
    from shiftbench.rng.ziggurat import R

    src = FastDraws(np.random.Generator(np.random.PCG64(2024)))
    draw = src.standard_normal32 if precision == "float32" else src.normal
    parts = [draw((500, 500, 4)) for _ in range(4)]
    assert all(a.dtype == np.dtype(precision) and a.shape == (500, 500, 4) for a in parts)
    z = np.concatenate([a.ravel() for a in parts]).astype(np.float64)
    assert z.size == 4_000_000
    assert abs(z.mean()) < 0.003 and abs(z.var() - 1) < 0.004  # ~6 standard errors
    assert stats.kstest(z, "norm").pvalue > 1e-4
    # the tail beyond the base strip (drawn by its own rejection loop) and the top layer's wedge
    expected_tail = 2 * stats.norm.sf(R)
    assert abs((np.abs(z) > R).mean() - expected_tail) < 6 * np.sqrt(expected_tail / z.size)
    edges = np.linspace(-4.5, 4.5, 181)
    counts, _ = np.histogram(z, edges)
    expected = np.diff(stats.norm.cdf(edges)) * z.size
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert stats.chi2.sf(chi2, len(counts) - 1) > 1e-4


def test_ziggurat_is_a_function_of_the_stream_and_refills() -> None:
    from shiftbench.rng.ziggurat import (
        halves,
        standard_normal32,
        standard_normal64,
        tables,
        ziggurat_fill,
        ziggurat_fill64,
    )

    a = standard_normal32(np.random.PCG64(7), 10_000)
    b = standard_normal32(np.random.PCG64(7), 10_000)
    assert a.dtype == np.float32 and np.array_equal(a, b)
    # a buffer that runs short reports it; the longer buffer reproduces the same values
    raw = np.random.PCG64(7).random_raw(6_000)
    short = np.empty(10_000, dtype=np.float32)
    assert ziggurat_fill(halves(raw[:4_000]), short, *tables(), 3.6541528853610088) == -1
    full = np.empty(10_000, dtype=np.float32)
    assert ziggurat_fill(halves(raw), full, *tables(), 3.6541528853610088) > 0
    assert np.array_equal(full, a)
    a64 = standard_normal64(np.random.PCG64(7), 10_000)
    assert a64.dtype == np.float64 and np.array_equal(a64, standard_normal64(np.random.PCG64(7), 10_000))
    raw = np.random.PCG64(7).random_raw(12_000)
    short64 = np.empty(10_000, dtype=np.float64)
    assert ziggurat_fill64(raw[:9_000], short64, *tables(52), 3.6541528853610088) == -1
    assert ziggurat_fill64(raw, short64, *tables(52), 3.6541528853610088) > 0
    assert np.array_equal(short64, a64)
    # loc and scale, and the scalar form
    from shiftbench.rng.seeding import FastDraws

    src = np.random.Generator(np.random.PCG64(3))
    scaled = FastDraws(np.random.Generator(np.random.PCG64(3))).normal((100,), loc=2.0, scale=0.5)
    assert np.allclose(scaled, 2.0 + 0.5 * standard_normal64(src.bit_generator, 100))
    assert isinstance(FastDraws(np.random.Generator(np.random.PCG64(3))).normal(None, 1.0, 2.0), float)


def _ziggurat_by_hand(words: list[int], n: int, wide: bool) -> list[float]:
    """The ziggurat of shiftbench.rng.ziggurat written out in plain Python (the module's docstring)."""
    import math

    from shiftbench.rng.ziggurat import R, tables

    k, w, fo, fi = tables(52 if wide else 23)
    it = iter(words)

    def unit(word: int, positive: bool) -> float:
        if not wide:
            return (word + 0.5) * 2.0**-32
        return ((word >> 11) + (0.5 if positive else 0.0)) * 2.0**-53

    out: list[float] = []
    while len(out) < n:
        r = next(it)
        layer, neg = r & 0xFF, (r >> 8) & 1
        j = r >> 12 if wide else (r >> 9) & 0x7FFFFF
        x = j * float(w[layer])
        if j < int(k[layer]):
            out.append(-x if neg else x)
        elif layer == 0:
            while True:
                t = -math.log(unit(next(it), True)) / R
                y = -math.log(unit(next(it), True))
                if y + y > t * t:
                    break
            out.append(-(R + t) if neg else R + t)
        elif float(fo[layer]) + unit(next(it), False) * (float(fi[layer]) - float(fo[layer])) < math.exp(-0.5 * x * x):
            out.append(-x if neg else x)
    return out


def test_ziggurat_equals_the_algorithm_written_out() -> None:
    """The compiled fill (fast test with a branch-free sign, rare paths out of line) gives the values
    of the plain algorithm, word for word, on a stream long enough to pass through wedges and tails."""
    from shiftbench.rng.ziggurat import standard_normal32, standard_normal64

    n = 60_000
    raw = [int(v) for v in np.random.PCG64(5).random_raw(n)]
    halves = [h for v in raw for h in (v & 0xFFFFFFFF, v >> 32)]
    want32 = np.array(_ziggurat_by_hand(halves, n, wide=False), dtype=np.float32)
    assert np.sum(np.abs(want32) > 3.6541528853610088) >= 5  # the tail was exercised
    assert np.array_equal(standard_normal32(np.random.PCG64(5), n), want32)
    want64 = np.array(_ziggurat_by_hand(raw, n // 2, wide=True))
    assert np.array_equal(standard_normal64(np.random.PCG64(5), n // 2), want64)


def test_salt_and_pepper_masks() -> None:
    """Fast masks: one 32-bit word per value (low 31 bits: flip, top bit: salt), with the right law;
    legacy masks: the reference's two uniform arrays, in its order."""
    from shiftbench.rng.seeding import FastDraws, LegacyDraws

    shape = (300, 400, 3)
    for amount in (0.0, 0.03, 0.27, 1.0):
        flipped, salted = FastDraws(np.random.Generator(np.random.PCG64(12))).salt_and_pepper(shape, amount)
        assert flipped.shape == salted.shape == shape and flipped.dtype == salted.dtype == np.bool_
        words = np.random.PCG64(12).random_raw(flipped.size // 2)
        halves = np.stack([words & 0xFFFFFFFF, words >> 32], axis=1).ravel()
        assert np.array_equal(flipped.ravel(), (halves & 0x7FFFFFFF) < round(amount * 2**31))
        assert np.array_equal(salted.ravel(), (halves >> 31) == 1)
        n = flipped.size
        for observed, p in ((flipped.mean(), amount), (salted.mean(), 0.5), ((flipped & salted).mean(), amount / 2)):
            assert abs(observed - p) <= 6 * np.sqrt(p * (1 - p) / n) + 1e-12
    with pytest.raises(ValueError, match="amount"):
        FastDraws(np.random.Generator(np.random.PCG64(1))).salt_and_pepper(shape, 1.5)
    rs = np.random.RandomState(3)
    want_f, want_s = rs.random_sample(shape) <= 0.09, rs.random_sample(shape) <= 0.5
    got_f, got_s = LegacyDraws(3).salt_and_pepper(shape, 0.09)
    assert np.array_equal(got_f, want_f) and np.array_equal(got_s, want_s)


def test_raw_word_uniforms_equal_generator_random() -> None:
    from shiftbench.rng.seeding import FastDraws, poisson_alias_tables

    fast = FastDraws(np.random.Generator(np.random.PCG64(11)))
    ref = np.random.Generator(np.random.PCG64(11))
    levels = np.random.default_rng(0).integers(0, 256, (64, 80, 3)).astype(np.uint8)
    prob, alias = poisson_alias_tables(60.0)
    k = prob.shape[0] // 256
    v = ref.random(levels.shape).ravel() * k
    j = v.astype(np.int64)
    idx = levels.ravel().astype(np.int64) * k + j
    expected = np.where(v - j < prob[idx], j, alias[idx]).astype(np.float32).reshape(levels.shape)
    assert np.array_equal(fast.poisson_levels(levels, 60.0), expected)


@pytest.mark.parametrize(
    ("sigma", "mode", "truncate", "shape"),
    [(2.44, "reflect", 3.0, (224, 224)), (1.0, "nearest", 4.0, (64, 96)), (3.6, "mirror", 3.0, (299, 250)), (0.6, "wrap", 4.0, (32, 40)), (60.0, "reflect", 3.0, (224, 224))],
)
def test_gaussian_filter_equals_scipy(sigma: float, mode: str, truncate: float, shape: tuple[int, int]) -> None:
    """Short kernels take the compiled direct path (equal to SciPy), long ones the dense operators."""
    from scipy.ndimage import gaussian_filter

    from shiftbench.corruptions._ops import gaussian_filter2d, gaussian_matrix, separable

    x = np.random.default_rng(int(sigma * 100)).uniform(-1, 1, (3, 2, *shape))
    ref = np.stack([[gaussian_filter(x[b, c], sigma, mode=mode, truncate=truncate) for c in range(2)] for b in range(3)])
    got = gaussian_filter2d(torch.from_numpy(x), sigma, mode, truncate)
    assert got.dtype == torch.float64 and tuple(got.shape) == x.shape
    radius = int(truncate * sigma + 0.5)
    if 3 * (2 * radius + 1) <= min(shape):
        assert np.array_equal(got.numpy(), ref)  # same terms in SciPy's order
    else:
        assert np.abs(got.numpy() - ref).max() < 1e-12
    mh = torch.from_numpy(gaussian_matrix(shape[0], sigma, mode, truncate))
    mw = torch.from_numpy(gaussian_matrix(shape[1], sigma, mode, truncate))
    assert np.abs(separable(torch.from_numpy(x), mh, mw).numpy() - ref).max() < 1e-12


def test_tap_groups_rebuild_the_kernel() -> None:
    from shiftbench.corruptions._cpu.gauss import symmetric_tap_groups

    rng = np.random.default_rng(4)
    full = rng.random((7, 7))
    sym = full + full[::-1] + full[:, ::-1] + full[::-1, ::-1]
    sym[3, 0] = sym[3, 6] = 0.0  # zero taps are skipped
    for k in (full, sym, full + full[::-1]):
        weights, counts, dy, dx = symmetric_tap_groups(k)
        rebuilt = np.zeros_like(k)
        for g, (wt, c) in enumerate(zip(weights, counts)):
            assert c in (1, 2, 4)
            for m in range(c):
                rebuilt[dy[4 * g + m], dx[4 * g + m]] += wt
        assert np.array_equal(rebuilt, k)


def _defocus_cases() -> list[tuple[str, int]]:
    spec = shiftbench.get_corruption("defocus_blur")
    return [(ed, s) for ed in spec.editions for s in range(1, 6)]


@pytest.mark.parametrize(("edition", "severity"), _defocus_cases())
def test_disk_plan_rebuilds_the_kernel(edition: str, severity: int) -> None:
    """Disk (box sums) * Gaussian + frame taps = the reference kernel, to within the plan's bound."""
    from scipy.signal import convolve2d

    from shiftbench.corruptions._cpu.defocus import disk_plan, strips_frame
    from shiftbench.corruptions.blur import disk_kernel

    radius, blur = shiftbench.get_corruption("defocus_blur").severity_params(edition, severity)
    k = disk_kernel(radius, blur)
    plan = disk_plan(float(radius), float(blur), k.tobytes(), int(k.shape[0]))
    assert plan is not None
    n = 2 * plan.grid + 1
    disk = np.zeros((n, n))
    for c in range(n):
        if plan.width_slot[c] >= 0:
            w = int(plan.widths[plan.width_slot[c]])
            disk[plan.grid - w : plan.grid + w + 1, c] = plan.dval
    g = plan.g.astype(np.float64)
    rebuilt = convolve2d(disk, np.outer(g, g))
    rebuilt += strips_frame(plan.frame, rebuilt.shape[0])
    h = plan.half
    inner = rebuilt[h : h + n, h : h + n]
    outside = np.abs(rebuilt).sum() - np.abs(inner).sum()  # the full blur's spill, cancelled by the frame
    err = (np.abs(inner - k.astype(np.float64)).sum() + outside) * 255
    assert err <= plan.margin / 4 + 1e-12 and plan.margin < 1e-3
    assert abs(rebuilt.sum() - k.astype(np.float64).sum()) < 1e-12  # flat regions: level * sum(K)
    tw, tdy, tdx = plan.taps
    exact = np.zeros((n + 2 * h, n + 2 * h))
    exact[tdy, tdx] = tw
    assert np.array_equal(exact[h : h + n, h : h + n], k.astype(np.float64))


@pytest.mark.parametrize(("edition", "severity"), _defocus_cases())
def test_disk_defocus_equals_opencv_to_the_level(edition: str, severity: int) -> None:
    """On photos plus flat patches and exact ramps (where the reference's result sits on level
    boundaries, decided by the float32 rounding of its taps) the 8-bit result equals cv2.filter2D's."""
    import cv2

    from shiftbench.corruptions._registry import ApplyContext
    from shiftbench.corruptions.blur import disk_kernel

    spec = shiftbench.get_corruption("defocus_blur")
    imgs = photos(edition, 2).copy()
    side = imgs.shape[1]
    q = side // 4
    imgs[0, :q, :q] = 200  # flat
    ramp = (np.arange(side) % 97 + 40).astype(np.uint8)
    imgs[1, :q] = ramp[None, :, None]  # rows that are exact linear ramps in x
    imgs[1, q : 2 * q, :q] = (np.arange(q)[:, None] + np.arange(q)[None, :] + 30).astype(np.uint8)[..., None]
    x = torch.from_numpy(imgs).permute(0, 3, 1, 2).contiguous()
    params = spec.severity_params(edition, severity)
    k = disk_kernel(*params)
    want = np.stack([[cv2.filter2D(im[..., ch] / 255.0, -1, k) for ch in range(3)] for im in imgs])
    want = (np.clip(want, 0, 1) * 255).astype(np.uint8)
    for xin in (x, x.to(torch.float64)):  # 8-bit levels and float values take the same kernel
        got = spec.apply(xin, params, {}, ApplyContext(edition, severity, backend="compiled"))
        assert got.dtype == torch.float64 and tuple(got.shape) == tuple(x.shape)
        assert np.array_equal(got.numpy().astype(np.uint8), want), (edition, severity)
        fft = spec.apply(x.to(torch.float64), params, {}, ApplyContext(edition, severity, backend="tensor"))
        assert float((got - fft).abs().max()) < 1e-3




@pytest.mark.parametrize(("h", "w"), [(224, 224), (299, 299), (64, 64), (32, 32), (37, 52), (300, 120), (97, 41), (120, 300), (241, 120)])
def test_compiled_pixelate_equals_pillow(h: int, w: int) -> None:
    """Pillow's BOX down- and up-sampling, bit for bit, every edition's factors; the tensor path
    (other devices) runs the same passes. Images more than twice as tall as wide go through Pillow
    itself (Pillow runs the vertical pass first there)."""
    from PIL import Image

    from shiftbench.corruptions._registry import ApplyContext

    spec = shiftbench.get_corruption("pixelate")
    imgs = np.random.default_rng(h * w).integers(0, 256, (2, h, w, 3)).astype(np.uint8)
    imgs[0, : h // 3] = 255  # saturated and flat regions
    x = torch.from_numpy(imgs).permute(0, 3, 1, 2).contiguous()
    for ed in spec.editions:
        for s in (1, 2, 3, 4, 5):
            c = spec.severity_params(ed, s)
            want = np.stack([np.asarray(Image.fromarray(a).resize((int(w * c), int(h * c)), Image.BOX).resize((w, h), Image.BOX)) for a in imgs])
            got = spec.apply(x, c, {}, ApplyContext(ed, s, backend="compiled"))
            assert got.dtype == torch.uint8 and np.array_equal(got.permute(0, 2, 3, 1).numpy(), want), (ed, s)
            if h <= 2 * w:
                tensor = spec.apply(x, c, {}, ApplyContext(ed, s, backend="tensor"))
                assert torch.equal(tensor, got)


@pytest.mark.parametrize("name", ["frost", "contrast"])
@pytest.mark.parametrize("edition", ["224", "32"])
def test_compiled_blends_equal_tensor_path(name: str, edition: str) -> None:
    """Frost and contrast: the compiled CPU blends (8-bit levels in) equal the float64 tensor path."""
    from shiftbench.api import sample_draws
    from shiftbench.corruptions._registry import ApplyContext

    spec = shiftbench.get_corruption(name)
    imgs = photos(edition, 2)
    x = torch.from_numpy(imgs).permute(0, 3, 1, 2).contiguous()
    for severity in (1, 3, 5):
        params = spec.severity_params(edition, severity)
        draws = [sample_draws(imgs[i], name, severity, seed=4, edition=edition) for i in range(2)]
        stacked = {k: torch.stack([torch.as_tensor(np.asarray(d[k])) for d in draws]) for k in draws[0]} if draws[0] else {}
        tensor = spec.apply(x.to(torch.float64), params, stacked, ApplyContext(edition, severity, backend="tensor"))
        for xin in (x, x.to(torch.float64)):
            fused = spec.apply(xin, params, stacked, ApplyContext(edition, severity, backend="compiled"))
            assert fused.dtype == torch.float64 and torch.equal(fused, tensor), (severity, xin.dtype)


@pytest.mark.parametrize(("h", "w", "noise"), [(224, 224, False), (37, 52, False), (33, 71, False), (56, 90, False), (299, 120, False), (40, 57, True)])
def test_jpeg_round_trip_equals_pillow(h: int, w: int, noise: bool) -> None:
    """The compiled CPU pipeline and the integer tensor pipeline (the GPU route) give Pillow's
    pixels, for every quality the editions use and the release quality 85."""
    from shiftbench.corruptions._jpeg_torch import jpeg_round_trip_tensor
    from shiftbench.corruptions.digital import _pillow_jpeg, jpeg_round_trip

    if noise:  # uniform noise: the largest coefficients, and clipping at both ends after decoding
        imgs = np.random.default_rng(1).integers(0, 256, (2, h, w, 3)).astype(np.uint8)
    else:
        imgs = photos("224" if h <= 224 and w <= 224 else "299", 2)[:, :h, :w]
    x = torch.from_numpy(np.ascontiguousarray(imgs)).permute(0, 3, 1, 2).contiguous()
    spec = shiftbench.get_corruption("jpeg_compression")
    qualities = sorted({int(spec.severity_params(ed, s)) for ed in spec.editions for s in range(1, 6)} | {85})
    for q in qualities:
        got = jpeg_round_trip(x, q)
        assert got.dtype == torch.uint8 and tuple(got.shape) == tuple(x.shape)
        want = np.stack([_pillow_jpeg(np.ascontiguousarray(a), q) for a in imgs])
        assert np.array_equal(got.permute(0, 2, 3, 1).numpy(), want), q
        assert torch.equal(jpeg_round_trip(x, q, compiled=False), got)
        assert torch.equal(jpeg_round_trip_tensor(x, q), got), q


def test_compiled_jpeg_equals_pillow_on_a_sweep() -> None:
    """Random sizes from 5 px wide and 1 px high up (every edge case of the MCU padding and the
    chroma rows and columns), photo crops and noise, at random qualities 1..100: Pillow's pixels.
    Narrower images take Pillow's own route (jpeg_round_trip), also checked."""
    from shiftbench.corruptions._cpu.jpeg import jpeg_round_trip_planes
    from shiftbench.corruptions.digital import _pillow_jpeg, jpeg_round_trip

    rng = np.random.default_rng(5)
    photo = photos("299", 1)[0]
    sizes = [(1, 5), (1, 9), (2, 6), (3, 17), (17, 5), (8, 8), (16, 16), (15, 33)]
    sizes += [(int(rng.integers(1, 140)), int(rng.integers(5, 140))) for _ in range(40)]
    for i, (h, w) in enumerate(sizes):
        if i % 2:
            a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        else:
            y0, x0 = rng.integers(0, 299 - h), rng.integers(0, 299 - w)
            a = np.ascontiguousarray(photo[y0 : y0 + h, x0 : x0 + w])
        q = int(rng.integers(1, 101))
        got = jpeg_round_trip_planes(np.ascontiguousarray(a.transpose(2, 0, 1))[None], q)[0].transpose(1, 2, 0)
        assert np.array_equal(got, _pillow_jpeg(a, q)), (h, w, q)
    for h, w in [(9, 1), (3, 4), (1, 3)]:
        a = rng.integers(0, 256, (1, 3, h, w), dtype=np.uint8)
        got = jpeg_round_trip(torch.from_numpy(a), 40)[0].permute(1, 2, 0).numpy()
        assert np.array_equal(got, _pillow_jpeg(np.ascontiguousarray(a[0].transpose(1, 2, 0)), 40)), (h, w)


_JPEG_CHECK = """
import sys
import numpy as np
from shiftbench.corruptions._cpu import jpeg as J, jpeg_vec as V
from shiftbench.corruptions.digital import _pillow_jpeg
sys.path.insert(0, sys.argv[1])
from tests.conftest import photos

rng = np.random.default_rng(7)
photo = photos("224", 1)[0]
yy, xx = np.mgrid[:64, :64]
checker = np.repeat(((yy + xx) % 2 * 255).astype(np.uint8)[..., None], 3, 2)  # the largest high frequencies
stripes = np.repeat((xx // 1 % 2 * 255).astype(np.uint8)[..., None], 3, 2)
images = [photo, photo[:37, :52], photo[:8, :8], photo[:1, :5], photo[:299 - 180, :41], checker, stripes, 255 - checker]
images += [rng.integers(0, 256, (40, 57, 3), dtype=np.uint8), rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)]
# block counts at the 32-block step's edges: Y 32, 64, 31 and 33 blocks (chroma 16, 32, 32, 34), one block column
images += [photo[:32, :64], photo[:64, :64], photo[:8, :248], rng.integers(0, 256, (8, 264, 3), dtype=np.uint8), photo[:200, :8]]
for a in images:
    a = np.ascontiguousarray(a)
    for q in (1, 7, 15, 25, 50, 85, 100):
        got = J.jpeg_round_trip_planes(np.ascontiguousarray(a.transpose(2, 0, 1))[None], q)[0].transpose(1, 2, 0)
        assert np.array_equal(got, _pillow_jpeg(a, q)), (a.shape, q)
print(V._PIECES, J._buffers(224, 224).y.vector)
"""


@pytest.mark.parametrize("width", ["avx512", "avx2", "sse2", "off", "haswell-target"])
def test_jpeg_every_vector_width_equals_pillow(width: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The word-vector DCT passes in each machine width the CPU offers (512-, 256-, 128-bit
    pieces) and the portable kernels (off) give Pillow's pixels, on photos, crops smaller than one
    32-block step, noise, and checkerboards and stripes (the largest coefficients, where the
    16-bit saturation of libjpeg-turbo's SIMD code would show); and with numba compiling for an
    AVX2 target on this machine (NUMBA_CPU_NAME/FEATURES), where the width must follow the target.
    Each in its own process, as the width is fixed at import."""
    import os
    import platform
    import subprocess
    import sys
    from pathlib import Path

    from shiftbench.corruptions._cpu import jpeg_vec as V

    if platform.machine().lower() not in ("x86_64", "amd64") and width != "off":
        pytest.skip("word-vector kernels are x86 only")
    env = {**os.environ, V.ENV: width, "NUMBA_CACHE_DIR": str(tmp_path)}
    if width == "haswell-target":  # numba told to compile for an AVX2 machine: the width follows it
        if V._PIECES > 2:
            pytest.skip("the CPU has no AVX2")
        env.pop(V.ENV)
        env.update(NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES="+avx,+avx2,+fma,+sse2,+ssse3,+sse4.1,+sse4.2,+popcnt")
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", _JPEG_CHECK, str(root)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    pieces, vector = r.stdout.split()
    want = V._WIDTHS.get(width, 2)
    assert vector == str(want > 0)
    assert int(pieces) == (0 if want == 0 else max(want, V._PIECES)), (width, pieces)  # never wider than the CPU


def test_jpeg_portable_kernels_equal_the_vector_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from shiftbench.corruptions._cpu import jpeg as J

    x = np.ascontiguousarray(photos("299", 2).transpose(0, 3, 1, 2))
    fast = {q: J.jpeg_round_trip_planes(x, q) for q in (5, 30, 90)}
    monkeypatch.setattr(J, "_PORTABLE", True)
    assert not J._buffers(299, 299).y.vector
    for q, want in fast.items():
        assert np.array_equal(J.jpeg_round_trip_planes(x, q), want), q


def test_jpeg_vector_width_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from shiftbench.corruptions._cpu import jpeg_vec as V
    from shiftbench.errors import InvalidArgumentError

    monkeypatch.setenv(V.ENV, "neon")
    with pytest.raises(InvalidArgumentError, match=r"SHIFTBENCH_JPEG_VECTORS.*neon.*avx512, avx2, sse2, off"):
        V._pieces()
    monkeypatch.setenv(V.ENV, "OFF")
    assert V._pieces() == 0


def test_jpeg_colour_conversions_equal_libjpeg_tables_everywhere() -> None:
    """The compiled pipeline's 16-bit YCbCr -> RGB and RGB -> Y, Cb, Cr equal libjpeg's table
    arithmetic (jdcolor.c / jccolor.c, 16-bit fixed point) on all 2**24 inputs."""
    from shiftbench.corruptions._cpu import jpeg as J
    from shiftbench.corruptions._jpeg_tables import fix as _fix

    a, b, c = (v.reshape(4096, 4096) for v in np.meshgrid(np.arange(256), np.arange(256), np.arange(256), indexing="ij"))
    a8, b8, c8 = (v.astype(np.uint8) for v in (a, b, c))
    h = w = 4096
    nby = h // 8
    rows = (np.arange(h) & 7) * nby + (np.arange(h) >> 3)  # the pipeline's row order
    half = 1 << 15
    # decoding: a = Y, b = Cb, c = Cr
    y_perm = np.empty_like(a8)
    y_perm[rows] = a8
    out = np.empty((3, h, w), np.uint8)
    J._to_rgb(y_perm, np.stack([b8, c8]), h, w, nby, out)
    cb, cr = b - 128, c - 128
    want_r = a + ((_fix(1.40200) * cr + half) >> 16)
    want_g = a + ((-_fix(0.34414) * cb - _fix(0.71414) * cr + half) >> 16)
    want_b = a + ((_fix(1.77200) * cb + half) >> 16)
    for got, want in zip(out, (want_r, want_g, want_b)):
        assert np.array_equal(got, np.clip(want, 0, 255))
    # encoding, luma: a = R, b = G, c = B
    level = np.empty((h, w), np.int16)
    J._luma(np.stack([a8, b8, c8]), h, w, nby, level)
    want_y = (_fix(0.29900) * a + _fix(0.58700) * b + _fix(0.11400) * c + half) >> 16
    assert np.array_equal(level[rows], want_y - 128)
    # encoding, chroma: every pixel doubled in both directions, so that each 2 x 2 average is the
    # pixel's own Cb or Cr; a 1024 x 1024 quarter of the inputs at a time
    n = 1024
    cby = n // 8
    crows = (np.arange(n) & 7) * 2 * cby + (np.arange(n) >> 3)
    clevel = np.empty((2 * n, n), np.int16)
    for q in range(16):
        r, g, bl = (v[q * 256 : (q + 1) * 256].reshape(n, n) for v in (a, b, c))
        img = np.stack([v.astype(np.uint8).repeat(2, 0).repeat(2, 1) for v in (r, g, bl)])
        J._chroma(img, 2 * n, 2 * n, cby, clevel)
        want_cb = (-_fix(0.16874) * r - _fix(0.33126) * g + half * bl + half - 1) >> 16
        want_cr = (half * r - _fix(0.41869) * g - _fix(0.08131) * bl + half - 1) >> 16
        assert np.array_equal(clevel[crows], want_cb), q
        assert np.array_equal(clevel[crows + cby], want_cr), q


def test_compiled_jpeg_writes_into_the_callers_buffer() -> None:
    from shiftbench.corruptions.digital import jpeg_round_trip

    x = torch.from_numpy(photos("64", 3)).permute(0, 3, 1, 2).contiguous()
    out = torch.zeros_like(x)
    got = jpeg_round_trip(x, 15, out=out)
    assert got.data_ptr() == out.data_ptr() and torch.equal(got, jpeg_round_trip(x, 15))
    other = torch.zeros((3, 3, 64, 65), dtype=torch.uint8)  # not the batch's shape: a new tensor
    assert jpeg_round_trip(x, 15, out=other).data_ptr() != other.data_ptr() and not other.any()


@pytest.mark.parametrize("name", [n for n in shiftbench.list_corruptions() if shiftbench.get_corruption(n).draw_apply is not None])
def test_draw_apply_route_equals_sample_then_apply(name: str) -> None:
    """Corruptions that draw and apply in one CPU pass give exactly what replaying their sampled
    draws through the functional gives, for 8-bit and float inputs, in every output form."""
    from shiftbench.api import sample_draws

    assert name in ("gaussian_noise", "speckle_noise", "shot_noise", "glass_blur", "elastic_transform")
    imgs = photos("64", 3)
    for severity in (1, 5):
        for inp in (imgs, torch.from_numpy(imgs).permute(0, 3, 1, 2).float() / 255.0):
            draws = [sample_draws(inp[i], name, severity, seed=7, edition="64") for i in range(3)]
            for quantize in (False, True):
                fused = shiftbench.corrupt(inp, name, severity, seed=7, edition="64", quantize=quantize)
                replay = shiftbench.corrupt(inp, name, severity, edition="64", draws=draws, quantize=quantize)
                assert type(fused) is type(replay)
                assert np.array_equal(np.asarray(fused), np.asarray(replay)), (severity, quantize)


def test_fused_noise_kernel_reports_a_short_stream() -> None:
    from shiftbench.rng.ziggurat import R, halves, noise_image, standard_normal32, tables

    x = photos("32", 1)[0].transpose(2, 0, 1).copy()
    out = np.empty(x.shape, dtype=np.float32)
    raw = np.random.PCG64(3).random_raw(2_000)
    assert noise_image(halves(raw[:500]), x, np.float32(0.1), False, out, *tables(), R) == -1
    assert noise_image(halves(raw), x, np.float32(0.1), False, out, *tables(), R) > 0
    z = standard_normal32(np.random.PCG64(3), x.size).reshape(32, 32, 3).transpose(2, 0, 1)
    want = np.clip(x.astype(np.float32) / np.float32(255) + np.float32(0.1) * z, 0, 1) * np.float32(255)
    assert np.array_equal(out, want.astype(np.float32))


def test_seed_words_equal_seed_sequence() -> None:
    """The compiled SeedSequence gives NumPy's four PCG64 words for zeros, one- and two-word integers and
    random ones (the entropy's word count, 4 to 8, changes how the pool is mixed)."""
    from shiftbench.rng.seedseq import seed_words

    rng = np.random.default_rng(11)
    edges = [0, 1, 5, 2**32 - 1, 2**32, 2**32 + 1, 2**63, 2**64 - 1]
    cases = [[int(v) for v in rng.choice(np.array(edges, dtype=object), 4)] for _ in range(200)]
    cases += [[int(rng.integers(0, 2**62)) >> int(rng.integers(0, 62)) << int(rng.integers(0, 3)) for _ in range(4)] for _ in range(800)]
    for entropy in cases:
        want = np.random.SeedSequence(entropy).generate_state(4, np.uint64)
        assert np.array_equal(seed_words(*(np.uint64(v) for v in entropy)), want), entropy


def test_derived_generators_are_seed_sequence_ones() -> None:
    """derive_generator's PCG64 is the one SeedSequence([seed, key, name, level]) seeds, and its spawned children
    (two calls in a row) and other state sizes are SeedSequence's."""
    from shiftbench.rng.seeding import derive_generator, name_key

    for seed, key, name, level in [(0, 0, "fog", 1), (2**64 - 1, 2**64 - 1, "x", 5), (-1, -5, "gaussian_noise", 0),
                                   (7, 123, "user:abc", 3), (3, 4, "snow", 2**40)]:  # fmt: skip
        ss = np.random.SeedSequence([seed & (2**64 - 1), key & (2**64 - 1), name_key(name), level])
        want, got = np.random.Generator(np.random.PCG64(ss)), derive_generator(seed, key, name, level)
        assert got.bit_generator.state == want.bit_generator.state and got.random() == want.random()
        for n in (2, 1):
            assert [c.bit_generator.state for c in got.spawn(n)] == [c.bit_generator.state for c in want.spawn(n)]
        assert np.array_equal(got.bit_generator.seed_seq.generate_state(3), ss.generate_state(3))
    with pytest.raises(ValueError):
        derive_generator(0, 0, "fog", -1)  # SeedSequence's own error for a negative level


@pytest.mark.parametrize("n", [256, 257, 258, 259, 1_001, 50_176])
def test_uniform_words_equal_generator_uniform(n: int) -> None:
    """The compiled uniform draws (words and values in one pass), returned or written in place, are
    ``Generator.uniform``'s, and leave the generator where it does, for every length modulo the four lanes."""
    from shiftbench.rng.pcg64 import uniform_words
    from shiftbench.rng.seeding import FastDraws

    for low, high in ((-1.0, 1.0), (-4.88, 4.88), (0.0, 255.0)):
        want_gen = np.random.Generator(np.random.PCG64(n))
        want = want_gen.uniform(low, high, n)
        gen = np.random.Generator(np.random.PCG64(n))
        got = uniform_words(gen.bit_generator, low, high, n)
        assert got is not None and np.array_equal(got.view(np.uint64), want.view(np.uint64))
        assert gen.bit_generator.state == want_gen.bit_generator.state and gen.random() == want_gen.random()
        into = np.full((2, n), np.nan)
        gen, after = np.random.Generator(np.random.PCG64(n)), np.random.Generator(np.random.PCG64(n))
        FastDraws(gen).uniform_into(low, high, into[0])
        after.uniform(low, high, n)
        assert np.array_equal(into[0].view(np.uint64), want.view(np.uint64)) and np.isnan(into[1]).all()
        assert gen.bit_generator.state == after.bit_generator.state
    strided = np.zeros((300, 2))[:, 0]  # not contiguous: NumPy's values, written through the view
    gen = np.random.Generator(np.random.PCG64(5))
    FastDraws(gen).uniform_into(-1.0, 1.0, strided)
    assert np.array_equal(strided, np.random.Generator(np.random.PCG64(5)).uniform(-1.0, 1.0, 300))


@pytest.mark.parametrize("low, high", [(-1, 1), (-2, 2), (-3, 3), (-4, 4), (0, 3), (0, 2**31 + 5), (0, 2**32 - 1)])
def test_draw_bounded_equals_generator_integers(low: int, high: int) -> None:
    """Draws taken chunk by chunk from a small word buffer (rejections included: 2**31 + 5 rejects
    half of its draws) are Generator.integers's draws of one call of the total size."""
    from shiftbench.rng.pcg64 import draw_bounded, word_lanes

    for seed in range(4):
        n, chunk = 3_001 + seed, 13 + seed
        want = np.random.Generator(np.random.PCG64(seed)).integers(low, high, n)
        stream = word_lanes(np.random.PCG64(seed))
        assert stream is not None
        words, at = np.empty(chunk // 2 + 2 + (64 if high - low > 2**30 else 0), dtype=np.uint64), np.zeros(2, dtype=np.int64)
        got = np.empty(n, dtype=np.int64)
        for pos in range(0, n, chunk):
            draw_bounded(words, at, *stream, np.uint32(high - low - 1), np.int64(low), got[pos : pos + chunk])
        assert np.array_equal(got, want)
    buffered = np.random.PCG64(0)
    np.random.Generator(buffered).integers(0, 10, 1, dtype=np.uint32)  # a 32-bit half waits
    assert word_lanes(buffered) is None and word_lanes(np.random.Philox(0)) is None


@pytest.mark.parametrize("n", [256, 257, 258, 259, 4096, 77_001])
def test_raw_words_equal_numpy_random_raw(n: int) -> None:
    """The compiled PCG64 gives random_raw's words and leaves the generator where random_raw does,
    the buffered 32-bit half included (later draws of every kind are unchanged)."""
    from shiftbench.rng.pcg64 import raw_words

    for seed in (0, 12345, 2**63 + 7):
        a, b = np.random.Generator(np.random.PCG64(seed)), np.random.Generator(np.random.PCG64(seed))
        for g in (a, b):
            g.integers(0, 10, 3, dtype=np.uint32)  # leaves a buffered 32-bit half
        assert np.array_equal(raw_words(b.bit_generator, n), a.bit_generator.random_raw(n))
        assert b.bit_generator.state == a.bit_generator.state
        assert np.array_equal(b.integers(0, 1000, 5, dtype=np.uint32), a.integers(0, 1000, 5, dtype=np.uint32))
        assert np.array_equal(b.standard_normal(5), a.standard_normal(5))
    other = np.random.Generator(np.random.Philox(3))  # other bit generators: random_raw itself
    assert np.array_equal(raw_words(other.bit_generator, 300), np.random.Generator(np.random.Philox(3)).bit_generator.random_raw(300))


def test_jpeg_tensor_pipeline_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large batches go through the integer pipeline a few images at a time, with the same result."""
    import shiftbench.corruptions._jpeg_torch as J

    x = torch.from_numpy(photos("64", 5)).permute(0, 3, 1, 2).contiguous()
    whole = J.jpeg_round_trip_tensor(x, 30)
    monkeypatch.setattr(J, "_CHUNK_PIXELS", 2 * 64 * 64)  # two images per pass
    assert torch.equal(J.jpeg_round_trip_tensor(x, 30), whole)


@pytest.mark.parametrize(("w", "out_w"), [(224, 112), (224, 56), (96, 32), (64, 16), (300, 100), (57, 19)])
def test_whole_factor_reduction_equals_pillow(w: int, out_w: int) -> None:
    """Reductions by 2, 3 or 4 run as a direct strided pass (no transposes); Pillow's pixels."""
    from PIL import Image

    from shiftbench.corruptions._cpu.resample import _whole_factor, box_resize_planes

    assert _whole_factor(w, out_w) is not None
    rng = np.random.default_rng(w)
    imgs = rng.integers(0, 256, (3, 40, w)).astype(np.uint8)
    imgs[0, :10] = 255
    imgs[1, :, ::2] = 0
    for out_h in (40, 20):
        got = box_resize_planes(imgs, out_h, out_w)
        want = np.stack([np.asarray(Image.fromarray(a).resize((out_w, out_h), Image.BOX)) for a in imgs])
        assert np.array_equal(got, want), (w, out_w, out_h)
        # and back up by the same factor (the enlarging gather as k copies of each value)
        back = box_resize_planes(got, 40, w)
        want_back = np.stack([np.asarray(Image.fromarray(a).resize((w, 40), Image.BOX)) for a in want])
        assert np.array_equal(back, want_back), (w, out_w, out_h, "up")


def test_wide_vectors_hint_reaches_the_compiled_function() -> None:
    """The 512-bit hint is written into the kernel's LLVM function (it only widens registers:
    the kernels' outputs are covered by the equality tests above)."""
    import numba

    from shiftbench.rng.simd import wide_vectors

    @numba.njit
    def double(a: np.ndarray) -> None:  # pragma: no cover - compiled
        wide_vectors()
        for i in range(a.shape[0]):
            a[i] *= 2

    a = np.arange(5, dtype=np.int32)
    double(a)
    assert a.tolist() == [0, 2, 4, 6, 8]
    ir_text = next(iter(double.inspect_llvm().values()))
    assert '"prefer-vector-width"="512"' in ir_text


def test_jpeg_vector_width_follows_numbas_target_features(monkeypatch: pytest.MonkeyPatch) -> None:
    """With NUMBA_CPU_FEATURES set (code built for other machines), the width comes from those
    features, not from the host's: 512-bit intrinsics on a target without AVX-512 would not compile."""
    from numba.core import config

    from shiftbench.corruptions._cpu import jpeg_vec as V

    if V._pieces() == 0:
        pytest.skip("word-vector kernels are x86 only")
    monkeypatch.delenv(V.ENV, raising=False)
    monkeypatch.setattr(config, "CPU_FEATURES", "+sse2,+ssse3,+avx,+avx2,-avx512f,-avx512bw")
    assert V._pieces() == 2
    monkeypatch.setattr(config, "CPU_FEATURES", "+sse2,-avx2")
    assert V._pieces() == 4
    monkeypatch.setattr(config, "CPU_FEATURES", "+avx2,+avx512f,+avx512bw")
    assert V._pieces() == 1


@pytest.mark.parametrize(("h", "w"), [(224, 224), (16, 16), (37, 53), (134, 224), (1, 40), (40, 1), (15, 17), (0, 5)])
def test_vector_transpose_equals_numpy(h: int, w: int) -> None:
    """16 x 16 blocks as byte shuffles, the edges byte by byte: every byte lands where ``.T`` puts it."""
    from shiftbench.corruptions._cpu.transpose import transpose_into

    a = np.random.default_rng(h * 100 + w).integers(0, 256, (h, w)).astype(np.uint8)
    out = np.full((w, h), 7, dtype=np.uint8)
    transpose_into(a, out)
    assert np.array_equal(out, a.T)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_transpose4_equals_numpy(dtype: type) -> None:
    """4 x 4 blocks of floats as vector shuffles: every value lands where ``.T`` puts it."""
    import numba

    from shiftbench.corruptions._cpu.transpose import transpose4

    @numba.njit
    def blocks(a: np.ndarray, out: np.ndarray) -> None:
        for i in range(0, a.shape[0], 4):
            for j in range(0, a.shape[1], 4):
                transpose4(a, i, j, out, j, i)

    a = np.random.default_rng(5).random((12, 20)).astype(dtype)
    out = np.zeros((20, 12), dtype=dtype)
    blocks(a, out)
    assert np.array_equal(out, a.T)


@pytest.mark.parametrize(("h", "w"), [(224, 224), (299, 299), (64, 48), (100, 37), (33, 70)])
def test_one_call_pixelate_equals_two_resizes(h: int, w: int) -> None:
    """The fused kernel (both resizes of every plane in one call) writes what two BOX resizes give, into
    the caller's buffer, for ImageNet-C's factors and others (reductions by whole factors, enlargements
    that copy, unchanged sides)."""
    from shiftbench.corruptions._cpu.resample import box_resize_planes, pixelate_planes

    planes = np.random.default_rng(h + w).integers(0, 256, (5, h, w)).astype(np.uint8)
    planes[0, : h // 2] = 255
    for sh, sw in [(int(h * c), int(w * c)) for c in (0.6, 0.5, 0.4, 0.3, 0.25, 0.1, 0.9)] + [(h, w // 2), (h // 3, w)]:
        if min(sh, sw) < 1:
            continue
        out = np.zeros_like(planes)
        assert pixelate_planes(planes, sh, sw, out) is out
        assert np.array_equal(out, box_resize_planes(box_resize_planes(planes, sh, sw), h, w)), (sh, sw)



def test_integers_stored_narrow_are_the_same_draws() -> None:
    """``integers(..., dtype=np.int8)`` (glass blur's offsets) writes NumPy's int64 draws straight into int8:
    the same values and the same generator state afterwards, for FastDraws (compiled and NumPy paths) and LegacyDraws."""
    from shiftbench.rng.seeding import FastDraws, LegacyDraws

    for seed in range(12):
        for lo, hi, size in [(-2, 2, (3, 50, 60, 2)), (-4, 4, 1000), (0, 3, 777), (-1, 1, 300), (0, 100, (4, 5))]:
            mine = np.random.Generator(np.random.PCG64(seed))
            ref = np.random.Generator(np.random.PCG64(seed))
            got = FastDraws(mine).integers(lo, hi, size=size, dtype=np.int8)
            want = ref.integers(lo, hi, size)
            assert got.dtype == np.int8 and np.array_equal(got, want), (seed, lo, hi)
            assert mine.bit_generator.state == ref.bit_generator.state
            assert np.array_equal(FastDraws(mine).integers(lo, hi, size=size), ref.integers(lo, hi, size))
    legacy = LegacyDraws(5).integers(-3, 3, (40, 2), dtype=np.int8)
    assert legacy.dtype == np.int8 and np.array_equal(legacy, np.random.RandomState(5).randint(-3, 3, (40, 2)))
