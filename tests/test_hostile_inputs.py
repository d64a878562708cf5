"""Hostile-but-realistic inputs to the Python API: PIL modes, float grayscale, empty selections,
huge seeds, odd arrays and devices. Each either works correctly or raises a typed ShiftbenchError."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import shiftbench
from shiftbench import errors

RNG = np.random.default_rng(3)
RGB = RNG.integers(0, 256, (48, 40, 3), dtype=np.uint8)
GRAY = RNG.integers(0, 256, (48, 40), dtype=np.uint8)
ALL = shiftbench.list_corruptions("all")


# ------------------------------------------------------------------ 4: PIL modes


def test_16_bit_png_is_scaled_not_whitened() -> None:
    g16 = GRAY.astype(np.uint16) * 257
    im = Image.fromarray(g16)
    assert im.mode == "I;16"
    out = shiftbench.corrupt(im, "contrast", 1)
    assert out.mode == "I;16"
    ref = shiftbench.corrupt(GRAY.astype(np.float64) / 255.0, "contrast", 1)
    np.testing.assert_allclose(np.asarray(out, np.float64) / 65535.0, ref, atol=1.5 / 65535)


def test_mode_i_follows_16_bit_scale() -> None:
    im = Image.fromarray(GRAY.astype(np.int32) * 257).convert("I")
    out = shiftbench.corrupt(im, "brightness", 1)
    assert out.mode == "I"
    ref = shiftbench.corrupt(GRAY.astype(np.float64) / 255.0, "brightness", 1)
    np.testing.assert_allclose(np.asarray(out, np.float64) / 65535.0, ref, atol=1.5 / 65535)


def test_float_f_image_in_unit_range_is_kept() -> None:
    f = GRAY.astype(np.float32) / 255.0
    out = shiftbench.corrupt(Image.fromarray(f), "contrast", 2)
    assert out.mode == "F"
    np.testing.assert_allclose(np.asarray(out), shiftbench.corrupt(f, "contrast", 2), atol=1e-6)
    with pytest.raises(errors.ImageRangeError):
        shiftbench.corrupt(Image.fromarray(f * 300), "contrast", 2)


@pytest.mark.parametrize("mode", ["P", "CMYK", "1"])
def test_converted_modes_say_what_they_return(mode: str) -> None:
    im = Image.fromarray(RGB).convert(mode)
    out = shiftbench.corrupt(im, "contrast", 1)
    want = {"P": "RGB", "CMYK": "RGB", "1": "L"}[mode]
    assert out.mode == want and out.size == im.size
    assert np.array_equal(np.asarray(out), np.asarray(shiftbench.corrupt(im.convert(want), "contrast", 1)))


@pytest.mark.parametrize("mode", ["LAB", "YCbCr", "HSV"])
def test_colour_spaces_are_refused(mode: str) -> None:
    im = Image.fromarray(RGB).convert(mode)
    with pytest.raises(errors.ImageTypeError, match=mode):
        shiftbench.corrupt(im, "contrast", 1)


# ------------------------------------------------------------------ 5: float grayscale


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("form", ["hw", "hw1", "tensor1"])
def test_float_grayscale_works_for_every_corruption(name: str, form: str) -> None:
    f = GRAY.astype(np.float32) / 255.0
    x = {"hw": f, "hw1": f[..., None], "tensor1": torch.from_numpy(f)[None]}[form]
    y = shiftbench.corrupt(x, name, 3)
    assert tuple(y.shape) == tuple(x.shape) and y.dtype == x.dtype
    yy = np.asarray(y).reshape(f.shape)
    assert np.isfinite(yy).all() and yy.min() >= 0 and yy.max() <= 1
    # same as the 8-bit grayscale result up to 8-bit rounding of the luma
    y8 = shiftbench.corrupt(GRAY, name, 3).astype(np.float64) / 255.0
    assert np.abs(yy - y8).mean() < 0.02


# ------------------------------------------------------------------ 8: empty and unknown selections


def test_list_corruptions_edition_forms() -> None:
    assert shiftbench.list_corruptions(edition=224) == shiftbench.list_corruptions(edition="224") != []
    with pytest.raises(errors.UnknownNameError):
        shiftbench.list_corruptions(edition="99")


# ------------------------------------------------------------------ 9: seeds


@pytest.mark.parametrize("seed", [2**64, 2**64 + 1, 2**70])
def test_seeds_beyond_64_bits_are_refused(seed: int) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="seed"):
        shiftbench.corrupt(RGB, "gaussian_noise", 1, seed=seed)
    with pytest.raises(errors.InvalidArgumentError, match="seed"):
        shiftbench.Corrupt("gaussian_noise", seed=seed)


def test_largest_seed_differs_from_zero() -> None:
    a = shiftbench.corrupt(RGB, "gaussian_noise", 1, seed=2**64 - 1)
    assert not np.array_equal(a, shiftbench.corrupt(RGB, "gaussian_noise", 1, seed=0))


# ------------------------------------------------------------------ 10: typed errors


def test_negative_stride_arrays_work() -> None:
    flipped = RGB[::-1, ::-1]
    assert np.array_equal(shiftbench.corrupt(flipped, "contrast", 1), shiftbench.corrupt(flipped.copy(), "contrast", 1))


def test_meta_tensors_are_refused() -> None:
    with pytest.raises(errors.ImageTypeError, match="meta"):
        shiftbench.corrupt(torch.empty(3, 40, 40, device="meta"), "contrast", 1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_device_without_gpu_is_typed() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="device"):
        shiftbench.corrupt(RGB, "contrast", 1, device="cuda")
    with pytest.raises(errors.InvalidArgumentError, match="device"):
        shiftbench.corrupt(RGB, "contrast", 1, device="no-such-device")


@pytest.mark.parametrize("key", [True, 1.5, None, [1], -1, 2**64])
def test_bad_keys_are_typed(key: object) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="key"):
        shiftbench.corrupt(RGB, "gaussian_noise", 1, keys=[key])


# ------------------------------------------------------------------ 8/9 on the command line


@pytest.mark.parametrize(
    "extra, option",
    [
        (["--corruptions", ""], "--corruptions"),
        (["--severities", ""], "--severities"),
        (["--corruptions", "*zzz*"], "--corruptions"),
        (["--seed", str(2**64)], "--seed"),
    ],
)
def test_generate_empty_or_dropped_selections_are_errors(tmp_path, capsys, extra: list[str], option: str) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.cli import main

    src = tmp_path / "src" / "n0"
    src.mkdir(parents=True)
    Image.fromarray(RGB).save(src / "a.png")
    rc = main(["generate", "imagenet-c", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--workers", "1", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and option in err and "Traceback" not in err
    assert not list((tmp_path / "out").rglob("*.JPEG")) if (tmp_path / "out").exists() else True


def test_generate_honours_a_corruption_named_outside_the_default_namespace(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``--corruptions border`` (a candidate of the overlap study, namespace "noc") is generated, not dropped."""
    from shiftbench.cli import main

    src = tmp_path / "src" / "n0"
    src.mkdir(parents=True)
    Image.fromarray(RGB).save(src / "a.png")
    args = ["generate", "imagenet-c", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--workers", "1"]
    assert main([*args, "--corruptions", "border", "--severities", "2"]) == 0
    written = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.JPEG"))
    assert written == ["border/2/n0/a.JPEG"], written
