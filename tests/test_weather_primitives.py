"""Building blocks of fog, frost, snow, spatter and elastic_transform.

* the plasma fractal (fog): range, shape, determinism and draw consumption;
* the ``cv2.warpAffine`` replica (elastic) against OpenCV itself, and against
  the reference environment's OpenCV when it is available;
* the ``scipy.ndimage.map_coordinates(order=1, mode='reflect')`` replica
  (elastic) against SciPy, including far out-of-range coordinates;
* the frost textures: files, sizes per edition, colour order;
* OpenCV's float RGB -> gray conversion (snow);
* the samplers' draw order (they must replay the reference's RNG calls).
"""

from __future__ import annotations

import hashlib
import subprocess
import textwrap
from importlib import resources

import cv2
import numpy as np
import pytest
import torch
from scipy.ndimage import map_coordinates

from shiftbench.corruptions._registry import SampleContext, get_corruption
from shiftbench.corruptions.elastic import (
    affine_source_points,
    invert_affine,
    map_coordinates_linear,
    warp_affine,
)
from shiftbench.corruptions.weather import (
    FROST_FILES,
    FROST_SELECTABLE,
    FogParams,
    fog_mapsize,
    frost_texture,
    plasma_fractal,
    rgb_to_gray_f32,
)
from shiftbench.rng.seeding import FastDraws, LegacyDraws

from .oracle import harness

# ----------------------------------------------------------------- plasma fractal


@pytest.mark.parametrize("mapsize,decay", [(256, 2.0), (64, 1.4), (32, 3.0), (2, 2.0)])
def test_plasma_range_and_shape(mapsize: int, decay: float) -> None:
    m = plasma_fractal(FastDraws(np.random.default_rng(1)), mapsize, decay)
    assert m.shape == (mapsize, mapsize)
    assert m.dtype == np.float64
    assert m.min() == 0.0 and m.max() == 1.0
    assert np.isfinite(m).all()


def test_plasma_deterministic_given_draws() -> None:
    a = plasma_fractal(LegacyDraws(7), 128, 1.7)
    b = plasma_fractal(LegacyDraws(7), 128, 1.7)
    c = plasma_fractal(LegacyDraws(8), 128, 1.7)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    f1 = plasma_fractal(FastDraws(np.random.default_rng(3)), 64, 2.0)
    f2 = plasma_fractal(FastDraws(np.random.default_rng(3)), 64, 2.0)
    assert np.array_equal(f1, f2)


def test_plasma_draw_order_and_count() -> None:
    """Per octave: one (n, n) uniform array for the centres, then two for the diamonds."""
    calls: list[tuple[float, float, tuple[int, int]]] = []
    rng = np.random.default_rng(0)

    class Recorder:
        def uniform(self, low: float, high: float, size: tuple[int, int]) -> np.ndarray:
            calls.append((low, high, tuple(size)))
            return rng.uniform(low, high, size)

    plasma_fractal(Recorder(), 16, 2.0)
    expected = []
    wibble, step = 100.0, 16
    while step >= 2:
        n = 16 // step
        expected += [(-wibble, wibble, (n, n))] * 3
        step //= 2
        wibble /= 2.0
    assert calls == expected


def test_plasma_matches_reference_arithmetic() -> None:
    """Diamond-square on a torus with the reference's operation order (small map, by hand)."""
    rs = np.random.RandomState(11)
    size, decay = 8, 1.5
    grid = np.empty((size, size))
    grid[0, 0] = 0.0
    step, wib = size, 100.0
    while step >= 2:
        h = step // 2
        corners = grid[0::step, 0::step]
        acc = corners + np.roll(corners, -1, axis=0)
        acc += np.roll(acc, -1, axis=1)
        grid[h::step, h::step] = acc / 4 + wib * rs.uniform(-wib, wib, acc.shape)
        centres = grid[h::step, h::step]
        corners = grid[0::step, 0::step]
        lt = (centres + np.roll(centres, 1, axis=0)) + (corners + np.roll(corners, -1, axis=1))
        grid[0::step, h::step] = lt / 4 + wib * rs.uniform(-wib, wib, lt.shape)
        tt = (centres + np.roll(centres, 1, axis=1)) + (corners + np.roll(corners, -1, axis=0))
        grid[h::step, 0::step] = tt / 4 + wib * rs.uniform(-wib, wib, tt.shape)
        step //= 2
        wib /= decay
    grid -= grid.min()
    grid /= grid.max()
    assert np.array_equal(plasma_fractal(LegacyDraws(11), size, decay), grid)


def test_plasma_rejects_non_power_of_two() -> None:
    with pytest.raises(ValueError):
        plasma_fractal(LegacyDraws(0), 48, 2.0)


@pytest.mark.parametrize(
    "edition,h,w,expected",
    [("224", 224, 224, 256), ("299", 299, 299, 512), ("64", 64, 64, 64), ("32", 32, 32, 32), ("224", 300, 700, 1024), ("32", 40, 33, 64)],
)
def test_fog_mapsize(edition: str, h: int, w: int, expected: int) -> None:
    assert fog_mapsize(edition, h, w) == expected


def test_fog_sampler_crops_the_map() -> None:
    spec = get_corruption("fog")
    ctx = SampleContext(params=spec.severity_params("224", 3), height=100, width=180, edition="224", severity=3)
    d = spec.sample(LegacyDraws(5), ctx)
    full = plasma_fractal(LegacyDraws(5), 256, spec.severity_params("224", 3)[1])
    assert d["plasma"].shape == (100, 180)
    assert np.array_equal(d["plasma"], full[:100, :180])


class _Uniforms32:
    """plasma_fractal's draws as the compiled fog sampler makes them: -w + 2w * (word + 0.5) / 2**32
    from the 32-bit halves of the generator's 64-bit output, low half first."""

    def __init__(self, gen: np.random.Generator, n: int) -> None:
        raw = gen.bit_generator.random_raw((n + 1) // 2)
        self.words = np.stack([raw & 0xFFFFFFFF, raw >> 32], axis=1).ravel().astype(np.float64)
        self.p = 0

    def uniform(self, low: float, high: float, size: tuple[int, int]) -> np.ndarray:
        n = int(np.prod(size))
        u = (self.words[self.p : self.p + n] + 0.5) * 2.0**-32
        self.p += n
        return (low + (high - low) * u).reshape(size)


@pytest.mark.parametrize(("mapsize", "decay", "h", "w"), [(256, 2.0, 224, 224), (512, 1.6, 299, 260), (64, 3.0, 64, 64), (32, 2.0, 32, 32)])
def test_compiled_plasma_equals_numpy_plasma(mapsize: int, decay: float, h: int, w: int) -> None:
    """The fog sampler's compiled map is plasma_fractal's on the same 32-bit uniforms (as float32),
    consuming mapsize**2 / 2 words of the generator."""
    spec = get_corruption("fog")
    for seed in (0, 1, 2):
        src = _Uniforms32(np.random.Generator(np.random.PCG64(seed)), mapsize * mapsize)
        want = plasma_fractal(src, mapsize, decay)[:h, :w].astype(np.float32)
        assert src.p == mapsize * mapsize - 1
        gen = np.random.Generator(np.random.PCG64(seed))
        ed = {256: "224", 512: "299", 64: "64", 32: "32"}[mapsize]
        assert fog_mapsize(ed, h, w) == mapsize
        ctx = SampleContext(params=FogParams(spec.severity_params(ed, 1)[0], decay), height=h, width=w, edition=ed, severity=1)
        got = spec.sample(FastDraws(gen), ctx)["plasma"]
        assert got.shape == (h, w) and got.dtype == np.float32 and np.array_equal(got, want)
        assert float(got.min()) >= 0.0 and float(got.max()) <= 1.0
        ref = np.random.Generator(np.random.PCG64(seed))
        ref.bit_generator.random_raw(mapsize * mapsize // 2)
        assert gen.bit_generator.state == ref.bit_generator.state


@pytest.mark.parametrize("severity", [1, 5])
def test_fog_kernel_equals_tensor_path(severity: int) -> None:
    """The compiled blend (8-bit levels or float64 values in) equals the tensor operations."""
    from shiftbench.corruptions._registry import ApplyContext

    spec = get_corruption("fog")
    imgs = harness.load_sample_224(3)
    x = torch.from_numpy(imgs).permute(0, 3, 1, 2).contiguous()
    params = spec.severity_params("224", severity)
    ctx = SampleContext(params=params, height=224, width=224, edition="224", severity=severity)
    plasma = torch.from_numpy(np.stack([spec.sample(FastDraws(np.random.default_rng(i)), ctx)["plasma"] for i in range(3)]))
    tensor = spec.apply(x.to(torch.float64), params, {"plasma": plasma}, ApplyContext("224", severity, backend="tensor"))
    for xin in (x, x.to(torch.float64)):
        fused = spec.apply(xin, params, {"plasma": plasma}, ApplyContext("224", severity, backend="compiled"))
        assert fused.dtype == torch.float64 and torch.equal(fused, tensor)


# ------------------------------------------------------------------- warpAffine


def _cv2_quantises() -> bool:
    """OpenCV 3.x/4.x quantise warp coordinates to 1/32 px; OpenCV 5 does not."""
    img = np.zeros((8, 8), np.float32)
    img[:, 4:] = 1
    out = cv2.warpAffine(img, np.float32([[1, 0, 0.01], [0, 1, 0]]), (8, 8), borderMode=cv2.BORDER_REFLECT_101)
    return bool(out[0, 4] == 1.0)


def _warp_cases(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    cases = []
    for k, (h, w) in enumerate([(224, 224), (37, 53), (64, 40), (32, 32), (50, 50)]):
        img = rng.random((h, w, 3)).astype(np.float32)
        src = affine_source_points(h, w)
        a = [2.0, 5.0, 24.4, 48.8, 90.0][k]
        dst = src + rng.uniform(-a, a, (3, 2)).astype(np.float32)
        cases.append((img, cv2.getAffineTransform(src, dst)))
    return cases


def _ours_warp(img: np.ndarray, m: np.ndarray, mode: str) -> np.ndarray:
    x = torch.from_numpy(img).permute(2, 0, 1)[None]
    return warp_affine(x, m[None], mode=mode)[0].permute(1, 2, 0).numpy()


def test_warp_affine_matches_cv2() -> None:
    quantised = _cv2_quantises()
    for img, m in _warp_cases(0):
        ref = cv2.warpAffine(img, m, (img.shape[1], img.shape[0]), borderMode=cv2.BORDER_REFLECT_101)
        if quantised:
            assert np.array_equal(_ours_warp(img, m, "fixed"), ref)
        else:
            # float32 coordinates in newer OpenCV: equal up to float32 rounding of the coordinates
            np.testing.assert_allclose(_ours_warp(img, m, "float"), ref, rtol=0, atol=5e-5)
            # the 1/32 px quantisation moves samples by at most 1/64 px
            np.testing.assert_allclose(_ours_warp(img, m, "fixed"), ref, rtol=0, atol=0.05)


def test_warp_affine_batch_and_identity() -> None:
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.random((3, 3, 20, 30)).astype(np.float32))
    eye = np.tile(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), (3, 1, 1))
    assert torch.equal(warp_affine(x, eye), x)
    # an integer shift samples the reflected border (REFLECT_101)
    shift = np.tile(np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]]), (3, 1, 1))
    out = warp_affine(x, shift)
    assert torch.equal(out[..., 2:], x[..., :-2])
    assert torch.equal(out[..., 0], x[..., 2]) and torch.equal(out[..., 1], x[..., 1])
    # each image uses its own matrix
    mats = np.stack([eye[0], shift[0], eye[0]])
    out = warp_affine(x, mats)
    assert torch.equal(out[0], x[0]) and torch.equal(out[2], x[2]) and torch.equal(out[1, :, :, 2:], x[1, :, :, :-2])


def test_warp_affine_rejects_bad_input() -> None:
    x = torch.zeros(2, 3, 8, 8)
    with pytest.raises(ValueError):
        warp_affine(x, np.zeros((1, 2, 3)))
    with pytest.raises(ValueError):
        warp_affine(x, np.zeros((2, 2, 3)), mode="cubic")


def test_invert_affine_matches_cv2() -> None:
    rng = np.random.default_rng(4)
    m = rng.normal(size=(5, 2, 3))
    ours = invert_affine(m)
    for a, b in zip(m, ours):
        np.testing.assert_allclose(b, cv2.invertAffineTransform(a), rtol=1e-13, atol=1e-13)


@pytest.mark.oracle
def test_warp_affine_bit_exact_against_reference_opencv(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The reference environment's OpenCV (4.11, fixed point): identical float32 output."""
    py = harness.peers_python()
    if py is None:
        pytest.skip("reference environment not available (run tools/reference-env.sh)")
    cases = _warp_cases(1)
    inp = tmp_path / "in.npz"
    out = tmp_path / "out.npz"
    np.savez(inp, **{f"img{i}": c[0] for i, c in enumerate(cases)}, **{f"m{i}": c[1] for i, c in enumerate(cases)})
    script = textwrap.dedent(
        f"""
        import numpy as np, cv2
        d = np.load({str(inp)!r})
        n = len([k for k in d.files if k.startswith("img")])
        res = {{}}
        for i in range(n):
            img, m = d[f"img{{i}}"], d[f"m{{i}}"]
            res[f"o{{i}}"] = cv2.warpAffine(img, m, (img.shape[1], img.shape[0]), borderMode=cv2.BORDER_REFLECT_101)
        np.savez({str(out)!r}, **res)
        """
    )
    subprocess.run([str(py), "-c", script], check=True, capture_output=True)
    ref = np.load(out)
    for i, (img, m) in enumerate(cases):
        assert np.array_equal(_ours_warp(img, m, "fixed"), ref[f"o{i}"])


# -------------------------------------------------------------- map_coordinates


@pytest.mark.parametrize("h,w,spread", [(37, 53, 3.0), (40, 32, 150.0), (224, 224, 25.0), (33, 34, 1000.0)])
def test_map_coordinates_matches_scipy(h: int, w: int, spread: float) -> None:
    rng = np.random.default_rng(int(spread) + h)
    img = rng.random((3, h, w)).astype(np.float32)
    rows = np.arange(h)[:, None] + rng.uniform(-spread, spread, (h, w))
    cols = np.arange(w)[None, :] + rng.uniform(-spread, spread, (h, w))
    # exact borders, half-sample points and whole periods
    rows[0, :6] = [-1.0, -0.5, h - 1, h - 0.5, -2 * h, 2 * h]
    cols[0, :6] = [w - 0.5, w, -w, 2 * w, -0.25, w - 1]
    ours = map_coordinates_linear(torch.from_numpy(img)[None], torch.from_numpy(rows)[None], torch.from_numpy(cols)[None])[0]
    ref = np.stack([map_coordinates(img[k], [rows, cols], order=1, mode="reflect") for k in range(3)])
    assert ours.dtype == torch.float32
    assert np.array_equal(ours.numpy(), ref)


def test_map_coordinates_reference_layout() -> None:
    """The reference samples an H x W x 3 array with (row, col, channel) index triples."""
    rng = np.random.default_rng(9)
    h, w = 31, 45
    img = rng.random((h, w, 3)).astype(np.float32)
    dy = rng.normal(0, 2, (h, w, 1)).astype(np.float32)
    dx = rng.normal(0, 2, (h, w, 1)).astype(np.float32)
    x, y, z = np.meshgrid(np.arange(w), np.arange(h), np.arange(3))
    idx = np.reshape(y + dy, (-1, 1)), np.reshape(x + dx, (-1, 1)), np.reshape(z, (-1, 1))
    ref = map_coordinates(img, idx, order=1, mode="reflect").reshape(h, w, 3)
    rows = torch.arange(h, dtype=torch.float64).view(1, h, 1) + torch.from_numpy(dy[..., 0]).double()[None]
    cols = torch.arange(w, dtype=torch.float64).view(1, 1, w) + torch.from_numpy(dx[..., 0]).double()[None]
    ours = map_coordinates_linear(torch.from_numpy(img).permute(2, 0, 1)[None], rows, cols)[0].permute(1, 2, 0)
    assert np.array_equal(ours.numpy(), ref)


# ----------------------------------------------------------------- frost textures

# spec section 1.6: (width, height) native, after x0.3 (editions 64), after x0.2 (edition 32)
FROST_SIZES = {
    "frost1.png": ((900, 600), (270, 180), (180, 120)),
    "frost2.png": ((560, 315), (168, 94), (112, 63)),
    "frost3.png": ((560, 315), (168, 94), (112, 63)),
    "frost4.jpg": ((527, 350), (158, 105), (105, 70)),
    "frost5.jpg": ((660, 495), (198, 148), (132, 99)),
    "frost6.jpg": ((485, 323), (146, 97), (97, 65)),
}


def test_frost_files_shipped() -> None:
    folder = resources.files("shiftbench").joinpath("assets", "frost")
    assert FROST_FILES == tuple(FROST_SIZES)
    assert FROST_SELECTABLE == 5
    for name in FROST_FILES:
        assert folder.joinpath(name).is_file()
    notice = folder.joinpath("NOTICE.txt").read_text(encoding="utf-8")
    assert "Apache" in notice and "frost6" in notice
    assert hashlib.sha256(folder.joinpath("frost1.png").read_bytes()).hexdigest().startswith("ff9f907860bd")


@pytest.mark.parametrize("index", range(6))
def test_frost_texture_sizes(index: int) -> None:
    native, tiny, cifar = FROST_SIZES[FROST_FILES[index]]
    for edition, (w, h) in (("224", native), ("299", native), ("64", tiny), ("32", cifar)):
        tex = frost_texture(index, edition)
        assert tex.shape == (h, w, 3) and tex.dtype == np.uint8
        assert not tex.flags.writeable


def test_frost_texture_is_rgb_of_imread() -> None:
    folder = resources.files("shiftbench").joinpath("assets", "frost")
    with resources.as_file(folder.joinpath("frost4.jpg")) as path:
        bgr = cv2.imread(str(path))
    assert np.array_equal(frost_texture(3, "224"), bgr[..., ::-1])
    small = cv2.resize(bgr, (0, 0), fx=0.3, fy=0.3)
    assert np.array_equal(frost_texture(3, "64"), small[..., ::-1])


def test_frost_texture_enlarged_for_big_images() -> None:
    tex = frost_texture(1, "224", 400, 700)  # frost2 is 315 x 560
    assert tex.shape[0] > 400 and tex.shape[1] > 700
    assert frost_texture(1, "224", 224, 224) is frost_texture(1, "224")


def test_frost_sampler_draw_order() -> None:
    spec = get_corruption("frost")
    for edition, size in (("224", 224), ("64", 64), ("32", 32)):
        ctx = SampleContext(params=spec.severity_params(edition, 2), height=size, width=size, edition=edition, severity=2)
        d = spec.sample(LegacyDraws(21), ctx)
        rs = np.random.RandomState(21)
        idx = rs.randint(5)
        tex = frost_texture(idx, edition)
        assert (int(d["index"]), int(d["top"]), int(d["left"])) == (
            idx,
            rs.randint(0, tex.shape[0] - size),
            rs.randint(0, tex.shape[1] - size),
        )


# ------------------------------------------------------------ RGB -> gray (snow)


def test_rgb_to_gray_matches_cv2() -> None:
    rng = np.random.default_rng(5)
    img = (rng.integers(0, 256, (2, 48, 64, 3)).astype(np.float32) / 255.0).astype(np.float32)
    ref = np.stack([cv2.cvtColor(a, cv2.COLOR_RGB2GRAY) for a in img])
    ours = rgb_to_gray_f32(torch.from_numpy(img).permute(0, 3, 1, 2))
    assert ours.dtype == torch.float32
    assert np.array_equal(ours.numpy(), ref)


# ------------------------------------------------------------------- draw order


def test_snow_spatter_elastic_draw_order() -> None:
    h, w = 40, 56
    for name in ("snow", "spatter", "elastic_transform"):
        spec = get_corruption(name)
        c = spec.severity_params("224", 3)
        d = spec.sample(LegacyDraws(13), SampleContext(params=c, height=h, width=w, edition="224", severity=3))
        rs = np.random.RandomState(13)
        if name == "elastic_transform":
            assert np.array_equal(d["affine"], rs.uniform(-c[2], c[2], (3, 2)))
            assert np.array_equal(d["ux"], rs.uniform(-1, 1, (h, w)))
            assert np.array_equal(d["uy"], rs.uniform(-1, 1, (h, w)))
        else:
            assert np.array_equal(d["layer"], rs.normal(size=(h, w), loc=c[0], scale=c[1]))
            if name == "snow":
                assert float(d["angle"]) == rs.uniform(-135, -45)


def test_fog_levels_equal_the_truncated_float_blend() -> None:
    """The 8-bit fog kernel (multiplications by reciprocals, exact divisions near level boundaries)
    gives the truncation of the float64 blend for every value, also on images full of exact ties:
    flat levels, a plasma of 0s and 1s, and strengths that put results on integer levels."""
    from shiftbench.corruptions._cpu.fog import fog_blend, fog_levels

    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (4, 3, 40, 56)).astype(np.uint8)
    x[1] = 255
    x[2, :, :20] = 0
    x[3] = (np.arange(56) * 4 % 256).astype(np.uint8)
    plasma = rng.random((4, 40, 56)).astype(np.float32)
    plasma[1] = 1.0
    plasma[2, :, ::2] = 0.0
    plasma[3] = np.round(plasma[3] * 4) / 4
    for c0 in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 0.25, 1.7):
        want = np.empty(x.shape, dtype=np.float64)
        fog_blend(x, plasma, c0, want)
        got = np.empty(x.shape, dtype=np.uint8)
        fog_levels(x, plasma, c0, got)
        assert np.array_equal(got, np.clip(want, 0, 255).astype(np.uint8)), c0
