"""ImageNet-P frames: fidelity against reference renderings and ImageNet-C building blocks, invariants.

Geometric perturbations are compared with renderings that follow the spec's
conventions literally: Pillow ``Image.transform(AFFINE)`` with torchvision
0.2.1's inverse matrix (built here from the formula, independently of the
package) and ``CenterCrop``; the tilt with ``cv2.remap`` on OpenCV's
fixed-point maps (1/32 pixel, as ``warpPerspective`` up to OpenCV 4.10) and,
for information, with the installed ``cv2.warpPerspective``. The other
perturbations must equal the ImageNet-C building blocks they reuse, fed with
the same draws. Run with ``-s`` to see the measured agreement.
"""

from __future__ import annotations

import math
from functools import cache

import cv2
import numpy as np
import pytest
import scipy.ndimage
import torch
from PIL import Image

from shiftbench import perturbations as P
from shiftbench import preprocess
from shiftbench.corruptions._geometry import motion_blur
from shiftbench.corruptions._registry import ApplyContext, SampleContext, get_corruption
from shiftbench.perturbations import _warp
from shiftbench.perturbations.sequences import sequence_draws_name
from shiftbench.rng.seeding import FastDraws, derive_generator
from shiftbench.sources import load_image_rgb

from .conftest import sample_paths


@cache
def _photo(i: int = 0) -> Image.Image:
    return load_image_rgb(sample_paths()[i])


@cache
def _prepared(edition: str = "224", n: int = 1) -> P.PreparedImages:
    return P.prepare([_photo(i) for i in range(n)], edition)


@cache
def _frames(name: str, edition: str = "224", difficulty: int = 1, n: int = 1) -> np.ndarray:
    return P.perturb(_prepared(edition, n), name, difficulty, seed=0).numpy()


def _agreement(ours: np.ndarray, ref: np.ndarray, label: str) -> tuple[float, int]:
    d = np.abs(ours.astype(np.int64) - ref.astype(np.int64))
    same, worst = float((d == 0).mean()), int(d.max())
    print(f"[agreement] {label}: {100 * same:.4f} % of values equal, max |diff| {worst}")
    return same, worst


# ------------------------------------------------------------------ reference renderings


def _tv021_inverse(w: int, h: int, angle: float, translate: tuple[float, float], scale: float, shear: float) -> list[float]:
    """torchvision 0.2.1's inverse affine matrix, written out from the spec's convention."""
    cx, cy = w * 0.5 + 0.5, h * 0.5 + 0.5
    a, s = math.radians(angle), math.radians(shear)
    k = (1.0 / scale) / (math.cos(a + s) * math.cos(a) + math.sin(a + s) * math.sin(a))
    m = [k * math.cos(a + s), k * math.sin(a + s), 0.0, k * -math.sin(a), k * math.cos(a), 0.0]
    m[2] += m[0] * (-cx - translate[0]) + m[1] * (-cy - translate[1]) + 0.0
    m[5] += m[3] * (-cx - translate[0]) + m[4] * (-cy - translate[1]) + 0.0
    m[2] += cx
    m[5] += cy
    return m


def _center_crop(a: np.ndarray, s: int) -> np.ndarray:
    h, w = a.shape[:2]
    top, left = int(round((h - s) / 2.0)), int(round((w - s) / 2.0))
    return a[top : top + s, left : left + s]


def _pil_affine_ref(base: Image.Image, name: str, value: float) -> np.ndarray:
    w, h = base.size
    if name == "translate":
        m, rs = _tv021_inverse(w, h, 0, (value, 0), 1, 0), Image.NEAREST
    elif name == "rotate":
        m, rs = _tv021_inverse(w, h, value, (0, 0), 1.0, 0), Image.BILINEAR
    elif name == "shear":
        m, rs = _tv021_inverse(w, h, 0, (0, 0), 1.0, value), Image.BILINEAR
    else:
        m, rs = _tv021_inverse(w, h, 0, (0, 0), value, 0), Image.BILINEAR
    return np.asarray(base.transform((w, h), Image.AFFINE, m, rs))


def _tilt_refs(base: np.ndarray, deg: float) -> tuple[np.ndarray, np.ndarray]:
    """(fixed-point remap as OpenCV <= 4.10 warps, installed cv2.warpPerspective)."""
    h, w = base.shape[:2]
    m = _warp.tilt_homography(w, h, deg, deg)
    inv = np.linalg.inv(m)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    z = inv[2, 0] * xx + inv[2, 1] * yy + inv[2, 2]
    zi = np.where(z != 0, 32.0 / np.where(z != 0, z, 1.0), 0.0)
    qx = np.rint((inv[0, 0] * xx + inv[0, 1] * yy + inv[0, 2]) * zi).astype(np.int64)
    qy = np.rint((inv[1, 0] * xx + inv[1, 1] * yy + inv[1, 2]) * zi).astype(np.int64)
    xy = np.stack([qx >> 5, qy >> 5], axis=-1).astype(np.int16)
    frac = ((qy & 31) * 32 + (qx & 31)).astype(np.uint16)
    fixed = cv2.remap(base, xy, frac, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    current = cv2.warpPerspective(base, m, (w, h))
    return fixed, current


# ------------------------------------------------------------------ geometric fidelity


def test_224_crop_is_the_imagenet_c_preprocessing() -> None:
    prep = _prepared()
    assert prep.bases[0].shape[0] == 256 or prep.bases[0].shape[1] == 256
    assert np.array_equal(prep.crops[0].permute(1, 2, 0).numpy(), np.asarray(preprocess(_photo(0), "224")))


@pytest.mark.parametrize("name", ["translate", "rotate", "scale", "shear"])
def test_affine_sequences_equal_pillow_with_tv021_matrix(name: str) -> None:
    ours = _frames(name)[0].transpose(0, 2, 3, 1)
    base = Image.fromarray(_prepared().bases[0])
    key = {"translate": "shift", "rotate": "angle", "scale": "scale", "shear": "shear"}[name]
    values = P.get_perturbation(name).edition_params("224")[key]
    ref = np.stack([_center_crop(_pil_affine_ref(base, name, v), 224) for v in values])
    same, worst = _agreement(ours, ref, f"{name} (224) vs Pillow AFFINE + CenterCrop")
    assert same == 1.0 and worst == 0


def test_zoom_blur_equals_reference_recipe() -> None:
    ours = _frames("zoom_blur")[0].transpose(0, 2, 3, 1)
    base = Image.fromarray(_prepared().bases[0])
    crop = np.asarray(_prepared().crops[0].permute(1, 2, 0))
    avg = crop.astype(np.float32) / np.float32(255)
    ref = [crop]
    for i, z in enumerate(P.get_perturbation("zoom_blur").edition_params("224")["scale"], start=1):
        zi = _center_crop(_pil_affine_ref(base, "zoom", z), 224)
        avg += zi.astype(np.float32) / np.float32(255)
        ref.append(((avg / np.float32(i + 1)) * np.float32(255)).astype(np.uint8))
    same, worst = _agreement(ours, np.stack(ref), "zoom_blur (224) vs Pillow zooms + float32 running mean")
    assert same == 1.0


def test_tilt_equals_opencv_fixed_point_warp() -> None:
    ours = _frames("tilt")[0].transpose(0, 2, 3, 1)
    base = _prepared().bases[0]
    fixed, current = [], []
    for deg in P.get_perturbation("tilt").edition_params("224")["angle"]:
        f, c = _tilt_refs(base, deg)
        fixed.append(_center_crop(f, 224))
        current.append(_center_crop(c, 224))
    same, worst = _agreement(ours, np.stack(fixed), "tilt (224) vs cv2.remap on OpenCV<=4.10 fixed-point maps")
    assert same == 1.0
    same, worst = _agreement(ours, np.stack(current), f"tilt (224) vs installed cv2.warpPerspective ({cv2.__version__})")
    assert same > 0.9 and worst <= 4


def test_tilt_centre_frame_is_a_slight_zoom_out() -> None:
    frames = _frames("tilt")[0].astype(np.int64)
    crop = _prepared().crops[0].numpy().astype(np.int64)
    assert np.abs(frames[15] - crop).mean() < 3.0  # scale f / (f + 1), not the identity
    assert not np.array_equal(frames[15], crop)


def test_299_geometric_frames_use_source_and_resized_centre_crop() -> None:
    prep = _prepared("299")
    src = Image.fromarray(prep.sources[0])
    ours = P.perturb(prep, "rotate", seed=0)[0].numpy().transpose(0, 2, 3, 1)
    w, h = src.size
    th, tw = int(h * 0.875), int(w * 0.875)
    top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
    refs = []
    for v in (-15, 0, 7, 15):
        full = Image.fromarray(_pil_affine_ref(src, "rotate", v))
        refs.append(np.asarray(full.crop((left, top, left + tw, top + th)).resize((299, 299), Image.BILINEAR)))
    same, _ = _agreement(ours[[0, 15, 22, 30]], np.stack(refs), "rotate (299) vs Pillow AFFINE on the source + resized centre crop")
    assert same == 1.0
    assert np.array_equal(ours[15], np.asarray(preprocess(_photo(0), "299")))


@pytest.mark.parametrize("edition", ["64", "32"])
def test_small_editions_translate_and_tilt(edition: str) -> None:
    prep = _prepared(edition)
    s = prep.size
    base = prep.bases[0]
    tr = P.perturb(prep, "translate", seed=0)[0].numpy().transpose(0, 2, 3, 1)
    ref = np.stack([_center_crop(_pil_affine_ref(Image.fromarray(base), "translate", v), s)
                    for v in P.get_perturbation("translate").edition_params(edition)["shift"]])
    assert _agreement(tr, ref, f"translate ({edition})")[0] == 1.0
    tl = P.perturb(prep, "tilt", seed=0)[0].numpy().transpose(0, 2, 3, 1)
    ref = np.stack([_center_crop(_tilt_refs(base, a)[0], s) for a in P.get_perturbation("tilt").edition_params(edition)["angle"]])
    assert _agreement(tl, ref, f"tilt ({edition})")[0] == 1.0


@pytest.mark.parametrize("name", ["rotate", "translate", "tilt", "zoom_blur"])
def test_compiled_cpu_kernels_equal_the_torch_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    prep = _prepared("64")
    fast = P.perturb(prep, name, seed=0)
    monkeypatch.setattr(_warp, "USE_CPU_KERNELS", False)
    assert torch.equal(P.perturb(prep, name, seed=0), fast)


# ------------------------------------------------------------------ same draws, same building blocks


def _draws(name: str, level: int, key: int) -> FastDraws:
    return FastDraws(derive_generator(0, key, sequence_draws_name(name), level))


@pytest.mark.parametrize(("name", "difficulty"), [("gaussian_noise", 1), ("shot_noise", 2), ("speckle_noise", 3)])
def test_noise_frames_are_the_imagenet_c_functionals(name: str, difficulty: int) -> None:
    prep = _prepared()
    ours = _frames(name, difficulty=difficulty)[0]
    cspec = get_corruption(name)
    param = P.get_perturbation(name).edition_params("224")["sigma" if name != "shot_noise" else "photons"][difficulty - 1]
    crop = prep.crops[:1]
    levels = np.ascontiguousarray(crop[0].permute(1, 2, 0).numpy())
    src = _draws(name, difficulty, prep.keys[0])
    ctx = SampleContext(params=param, height=224, width=224, edition="224", severity=difficulty, _levels=lambda: levels)
    assert np.array_equal(ours[0], crop[0].numpy())
    for f in range(1, 31):
        d = {k: torch.from_numpy(np.asarray(v)[None]) for k, v in cspec.sample(src, ctx).items()}
        y = cspec.apply(crop.to(cspec.dtype), param, d, ApplyContext("224", difficulty))
        assert np.array_equal(ours[f], torch.floor(y[0]).to(torch.uint8).numpy())


def test_noise_frames_match_the_reference_float64_recipe() -> None:
    # shot noise in the reference: np.uint8(255 * clip(Poisson(300 x) / 300, 0, 1)) in float64
    prep = _prepared()
    ours = _frames("shot_noise")[0]
    levels = np.ascontiguousarray(prep.crops[0].permute(1, 2, 0).numpy())
    src = _draws("shot_noise", 1, prep.keys[0])
    ref = []
    for _ in range(1, 31):
        counts = src.poisson_levels(levels, 300.0).astype(np.float64)
        ref.append(np.uint8(255 * np.clip(counts / 300.0, 0, 1)).transpose(2, 0, 1))
    same, worst = _agreement(ours[1:], np.stack(ref), "shot_noise frames vs the float64 reference arithmetic")
    assert same > 0.999 and worst <= 1


def test_motion_blur_and_brightness_are_the_building_blocks() -> None:
    prep = _prepared()
    x = prep.crops.to(torch.float64)
    p = P.get_perturbation("motion_blur").edition_params("224")
    mb = _frames("motion_blur")[0]
    for f in (0, 13, 30):
        y = motion_blur(x, 10, 3, torch.tensor([float(p["angle"][f])]))
        assert np.array_equal(mb[f], y[0].to(torch.uint8).numpy())
    br = _frames("brightness")[0]
    cspec = get_corruption("brightness")
    for f in (0, 15, 30):
        delta = P.get_perturbation("brightness").edition_params("224")["delta"][f]
        y = cspec.apply(x, delta, {}, ApplyContext("224", 1))
        assert np.array_equal(br[f], torch.floor(y[0]).to(torch.uint8).numpy())
    assert np.abs(br[15].astype(int) - prep.crops[0].numpy().astype(int)).max() <= 1


def test_snow_frames_are_the_imagenet_c_snow_with_one_layer() -> None:
    prep = _prepared()
    ours = _frames("snow")[0]
    p = P.get_perturbation("snow").edition_params("224")
    layer = _draws("snow", 1, prep.keys[0]).normal(size=(224, 224), loc=0.05, scale=0.3)
    cspec = get_corruption("snow")
    c = (0.05, 0.3, 3, 0.5, 14, 4, 0.85)
    for f in (0, 30):
        d = {"layer": torch.from_numpy(np.asarray(layer)[None]), "angle": torch.tensor([float(p["angle"][f])], dtype=torch.float64)}
        y = cspec.apply(prep.crops.to(torch.float32), c, d, ApplyContext("224", 1))
        assert np.array_equal(ours[f], torch.floor(y[0]).to(torch.uint8).numpy())


@pytest.mark.slow
def test_spatter_first_frame_is_imagenet_c_spatter_and_drops_run_down() -> None:
    prep = _prepared()
    ours = _frames("spatter")[0]
    raw = _draws("spatter", 1, prep.keys[0]).normal(size=(224, 224), loc=0.65, scale=0.27)
    cspec = get_corruption("spatter")
    c = (0.65, 0.27, 3.7, 0.69, 0.6, 0)
    y = cspec.apply(prep.crops.to(torch.float32), c, {"layer": torch.from_numpy(np.asarray(raw)[None])}, ApplyContext("224", 1))
    assert np.array_equal(ours[0], torch.floor(y[0]).to(torch.uint8).numpy())
    # later frames: the reference recipe (SciPy smoothing, np.convolve per column, OpenCV water texture)
    layer = scipy.ndimage.gaussian_filter(np.asarray(raw), 3.7, mode="nearest", truncate=4.0)
    layer[layer < 0.69] = 0
    x = prep.crops[0].permute(1, 2, 0).numpy().astype(np.float32) / 255.0
    refs = []
    for _ in range(31):
        li = (layer * 255).astype(np.uint8)
        dist = 255 - cv2.Canny(li, 50, 150)
        dist = cv2.distanceTransform(dist, cv2.DIST_L2, 5)
        _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
        dist = cv2.blur(dist, (3, 3)).astype(np.uint8)
        dist = cv2.equalizeHist(dist)
        dist = cv2.filter2D(dist, cv2.CV_8U, np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]]))
        dist = cv2.blur(dist, (3, 3)).astype(np.float32)
        m = li * dist
        m = m / np.max(m) * np.float32(0.6)
        color = np.array([175, 238, 238], dtype=np.float32) / np.float32(255)
        refs.append(np.uint8(np.clip(x + m[..., None] * color, 0, 1) * 255).transpose(2, 0, 1))
        layer = np.apply_along_axis(lambda col: np.convolve(col, np.array([0.05, 0.1, 0.15, 0.7]), mode="same"), 0, layer)
    same, worst = _agreement(ours, np.stack(refs), "spatter (224) vs reference recipe (SciPy + np.convolve + OpenCV)")
    assert same > 0.999


def test_gaussian_blur_matches_scipy() -> None:
    ours = _frames("gaussian_blur")[0].transpose(0, 2, 3, 1)
    x = _prepared().crops[0].permute(1, 2, 0).numpy() / 255.0
    sig = P.get_perturbation("gaussian_blur").edition_params("224")["sigma"]
    ref = np.stack([np.uint8(255 * scipy.ndimage.gaussian_filter(x, (s, s, 0), mode="nearest", truncate=6.0)) for s in sig])
    same, worst = _agreement(ours, ref, "gaussian_blur (224) vs scipy.ndimage.gaussian_filter (truncate 6)")
    assert same > 0.9999 and worst <= 1


# ------------------------------------------------------------------ invariants


@pytest.mark.slow
def test_every_perturbation_every_small_edition_shape_and_dtype() -> None:
    for edition in ("32", "64"):
        prep = _prepared(edition)
        for name in P.list_perturbations():
            y = P.perturb(prep, name, seed=0)
            t = P.get_perturbation(name).frames(edition)
            assert y.shape == (1, t, 3, prep.size, prep.size) and y.dtype == torch.uint8, (edition, name)


def test_noise_frame_zero_clean_and_difficulty_stronger() -> None:
    crop = _prepared().crops[0].numpy().astype(np.int64)
    dev = []
    for d in (1, 2, 3):
        y = _frames("gaussian_noise", difficulty=d)[0].astype(np.int64)
        assert np.array_equal(y[0], crop)
        dev.append(np.abs(y[1:] - crop).mean())
    assert dev[0] < dev[1] < dev[2]


def test_temporal_difficulty_is_a_stride_not_new_frames() -> None:
    prep = _prepared("32")
    assert torch.equal(P.perturb(prep, "snow", 1, seed=3), P.perturb(prep, "snow", 3, seed=3))
    assert not torch.equal(P.perturb(prep, "gaussian_noise", 1, seed=3), P.perturb(prep, "gaussian_noise", 2, seed=3))


def test_clean_centre_frames() -> None:
    crop = _prepared().crops[0].numpy()
    assert np.array_equal(_frames("translate")[0, 20], crop)
    assert np.array_equal(_frames("rotate")[0, 15], crop)
    assert np.array_equal(_frames("scale")[0, 24], crop)
    assert np.array_equal(_frames("zoom_blur")[0, 0], crop)


def test_seeding_chunking_and_batching_invariance() -> None:
    prep2 = _prepared("32", 2)
    for name in ("shot_noise", "zoom_blur"):
        full = P.perturb(prep2, name, seed=5)
        chunks = torch.cat([c for _, c in P.perturb_chunks(prep2, name, seed=5, chunk_frames=4)], dim=1)
        assert torch.equal(full, chunks), name
        assert torch.equal(full[1:], P.perturb(prep2.subset(1, 2), name, seed=5)), name
    assert not torch.equal(P.perturb(prep2, "shot_noise", seed=5), P.perturb(prep2, "shot_noise", seed=6))
    keyed = P.prepare([_photo(0)], "32", keys=["a"])
    other = P.prepare([_photo(0)], "32", keys=["b"])
    assert not torch.equal(P.perturb(keyed, "speckle_noise"), P.perturb(other, "speckle_noise"))


def test_input_forms_agree() -> None:
    img = _photo(0)
    arr = np.asarray(img)
    a = P.perturb(img, "rotate", edition="32")
    b = P.perturb(arr, "rotate", edition="32")
    c = P.perturb(torch.from_numpy(arr.copy()).permute(2, 0, 1), "rotate", edition="32")
    d = P.perturb([sample_paths()[0]], "rotate", edition="32")
    assert torch.equal(a, b) and torch.equal(a, c) and torch.equal(a, d)
    crop = np.asarray(preprocess(img, "224"))
    e = P.perturb(crop, "rotate", preprocessed=True)
    assert e.shape == (1, 31, 3, 224, 224) and np.array_equal(e[0, 15].permute(1, 2, 0).numpy(), crop)


def test_bad_inputs() -> None:
    from shiftbench.errors import ImageShapeError, ImageTypeError, InvalidArgumentError

    with pytest.raises(P.UnknownPerturbationError):
        P.perturb(_photo(0), "rotation", edition="32")
    with pytest.raises(ImageShapeError, match="preprocessed"):
        P.perturb(np.zeros((40, 40, 3), np.uint8), "rotate", edition="32", preprocessed=True)
    with pytest.raises(ImageTypeError):
        P.perturb(42, "rotate")
    with pytest.raises(InvalidArgumentError, match="seed"):
        P.perturb(_photo(0), "rotate", edition="32", seed=-1)
    with pytest.raises(InvalidArgumentError, match="keys"):
        P.prepare([_photo(0)], "32", keys=["a", "b"])
    with pytest.raises(InvalidArgumentError, match="chunk_frames"):
        next(P.perturb_chunks(_photo(0), "rotate", edition="32", chunk_frames=0))


@pytest.mark.gpu
def test_cuda_frames_equal_cpu_frames() -> None:
    prep = _prepared("64")
    for name in P.list_perturbations():
        assert torch.equal(P.perturb(prep, name, seed=0, device="cuda").cpu(), P.perturb(prep, name, seed=0)), name
