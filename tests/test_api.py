"""Public API: input types, seeding, replay, release mode, errors, CLI."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import shiftbench
from shiftbench import errors
from shiftbench.cli import main

from .conftest import photos, sample_paths


def test_list_corruptions_wildcards_and_groups() -> None:
    assert shiftbench.list_corruptions("*noise") == ["gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise"]
    assert shiftbench.list_corruptions("noise", group="benchmark") == ["gaussian_noise", "shot_noise", "impulse_noise"]
    assert shiftbench.list_corruptions(["contrast", "*noise"], group="extra") == ["speckle_noise"]
    assert len(shiftbench.list_corruptions("all")) == 19


def test_unknown_corruption_suggests_close_names() -> None:
    with pytest.raises(errors.UnknownCorruptionError) as ei:
        shiftbench.corrupt(photos("224", 1)[0], "gausian_noise", 1)
    e = ei.value
    assert e.argument == "corruption" and e.value == "gausian_noise"
    assert "gaussian_noise" in e.suggestions and "gaussian_noise" in str(e)
    assert isinstance(e, KeyError) and isinstance(e, ValueError)


@pytest.mark.parametrize("bad", [0, 6, -1, 2.0, "3", True, None])
def test_bad_severity(bad: object) -> None:
    with pytest.raises(errors.InvalidSeverityError) as ei:
        shiftbench.corrupt(photos("224", 1)[0], "contrast", bad)  # type: ignore[arg-type]
    assert "1..5" in str(ei.value) and ei.value.argument == "severity"


def test_bad_images() -> None:
    with pytest.raises(errors.ImageShapeError, match="at least 32"):
        shiftbench.corrupt(np.zeros((31, 64, 3), np.uint8), "contrast", 1)
    with pytest.raises(errors.ImageShapeError, match="channels"):
        shiftbench.corrupt(torch.zeros(5, 64, 64, dtype=torch.uint8), "contrast", 1)
    with pytest.raises(errors.ImageRangeError, match=r"\[0, 1\]"):
        shiftbench.corrupt(torch.full((3, 64, 64), 2.0), "contrast", 1)
    with pytest.raises(errors.ImageRangeError):
        shiftbench.corrupt(torch.full((3, 64, 64), float("nan")), "contrast", 1)
    with pytest.raises(errors.ImageTypeError, match="int32"):
        shiftbench.corrupt(np.zeros((64, 64, 3), np.int32), "contrast", 1)
    with pytest.raises(errors.ImageTypeError):
        shiftbench.corrupt([[1, 2], [3, 4]], "contrast", 1)
    with pytest.raises(errors.InvalidArgumentError, match="seed"):
        shiftbench.corrupt(photos("224", 1)[0], "contrast", 1, seed=-1)
    with pytest.raises(errors.UnknownNameError, match="edition"):
        shiftbench.corrupt(photos("224", 1)[0], "contrast", 1, edition="128")
    with pytest.raises(errors.InvalidArgumentError, match="keys"):
        shiftbench.corrupt(photos("224", 2), "gaussian_noise", 1, keys=["a"])


def test_output_types_follow_input(photo_224: np.ndarray) -> None:
    pil = Image.fromarray(photo_224)
    assert isinstance(shiftbench.corrupt(pil, "gaussian_noise", 2), Image.Image)
    out_np = shiftbench.corrupt(photo_224, "gaussian_noise", 2)
    assert isinstance(out_np, np.ndarray) and out_np.dtype == np.uint8 and out_np.shape == photo_224.shape
    assert np.array_equal(np.asarray(shiftbench.corrupt(pil, "gaussian_noise", 2)), out_np)
    t = torch.from_numpy(photo_224).permute(2, 0, 1)
    out_t = shiftbench.corrupt(t, "gaussian_noise", 2)
    assert torch.equal(out_t.permute(1, 2, 0), torch.from_numpy(out_np))
    f64 = shiftbench.corrupt(photo_224.astype(np.float64) / 255, "gaussian_noise", 2)
    assert f64.dtype == np.float64 and f64.min() >= 0 and f64.max() <= 1


def test_gray_and_rgba(photo_224: np.ndarray) -> None:
    rgba = np.concatenate([photo_224, np.full(photo_224.shape[:2] + (1,), 77, np.uint8)], axis=-1)
    out = shiftbench.corrupt(Image.fromarray(rgba), "contrast", 3)
    assert out.mode == "RGBA" and np.all(np.asarray(out)[..., 3] == 77)
    gray = Image.fromarray(photo_224).convert("L")
    og = shiftbench.corrupt(gray, "gaussian_noise", 3)
    assert og.mode == "L" and og.size == gray.size
    g2 = shiftbench.corrupt(np.asarray(gray), "gaussian_noise", 3)
    assert g2.shape == np.asarray(gray).shape and np.array_equal(g2, np.asarray(og))
    # a gray image through a colour-neutral corruption stays its own gray values
    oc = np.asarray(shiftbench.corrupt(gray, "contrast", 1)).astype(int)
    rgb_equiv = shiftbench.corrupt(np.stack([np.asarray(gray)] * 3, -1), "contrast", 1)
    assert np.abs(oc - rgb_equiv[..., 0].astype(int)).max() <= 1


@pytest.mark.parametrize("shape", [(32, 32), (48, 80), (120, 37), (300, 200)])
@pytest.mark.parametrize("name", shiftbench.list_corruptions())
def test_any_size(name: str, shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(0)
    big = photos("299", 1)[0]
    img = np.ascontiguousarray(big[: shape[0], : shape[1]]) if shape[0] <= 299 and shape[1] <= 299 else rng.integers(0, 256, shape + (3,), dtype=np.uint8)
    out = shiftbench.corrupt(img, name, 3, seed=0)
    assert out.shape == img.shape and out.dtype == np.uint8


def test_seeding_is_per_image_content_and_keys() -> None:
    imgs = photos("224", 3)
    a = shiftbench.corrupt(imgs, "gaussian_noise", 3, seed=5)
    b = shiftbench.corrupt(imgs[::-1].copy(), "gaussian_noise", 3, seed=5)
    assert np.array_equal(a, b[::-1])  # order / batch composition does not matter
    f = shiftbench.corrupt(imgs.astype(np.float32) / 255, "gaussian_noise", 3, seed=5)
    assert np.abs(np.floor(f.astype(np.float64) * 255 + 1e-3) - a).max() <= 1  # uint8 and float share draws
    k1 = shiftbench.corrupt(imgs, "gaussian_noise", 3, seed=5, keys=["x", "y", "z"])
    k2 = shiftbench.corrupt(imgs[:1], "gaussian_noise", 3, seed=5, keys=["x"])
    assert np.array_equal(k1[:1], k2) and not np.array_equal(k1, a)
    assert not np.array_equal(a, shiftbench.corrupt(imgs, "gaussian_noise", 3, seed=6))


def test_sample_draws_replay(photo_224: np.ndarray) -> None:
    d = shiftbench.sample_draws(photo_224, "gaussian_noise", 4, seed=9)
    assert d["z"].shape == (224, 224, 3)
    assert np.array_equal(shiftbench.corrupt(photo_224, "gaussian_noise", 4, draws=[d]), shiftbench.corrupt(photo_224, "gaussian_noise", 4, seed=9))
    assert shiftbench.sample_draws(photo_224, "contrast", 4) == {}


def test_release_mode_is_jpeg85_of_truncation(photo_224: np.ndarray) -> None:
    plain = shiftbench.corrupt(photo_224, "contrast", 2)
    rel = shiftbench.corrupt(photo_224, "contrast", 2, release=True)
    buf = io.BytesIO()
    Image.fromarray(plain).save(buf, format="JPEG", quality=85, optimize=True)
    assert np.array_equal(rel, np.asarray(Image.open(buf)))
    relf = shiftbench.corrupt(photo_224.astype(np.float32) / 255, "contrast", 2, release=True)
    assert np.array_equal(np.round(relf * 255).astype(np.uint8), rel)


def test_transform_class_matches_function(photo_224: np.ndarray) -> None:
    t = shiftbench.Corrupt("shot_noise", severity=2, seed=1)
    pil = Image.fromarray(photo_224)
    assert np.array_equal(np.asarray(t(pil)), shiftbench.corrupt(photo_224, "shot_noise", 2, seed=1))
    assert "shot_noise" in repr(t)
    with pytest.raises(errors.InvalidSeverityError):
        shiftbench.Corrupt("shot_noise", severity=9)


def test_editions_and_preprocessing() -> None:
    assert shiftbench.edition_for_size(224, 224).name == "224"
    assert shiftbench.edition_for_size(32, 32).name == "32"
    assert shiftbench.edition_for_size(60, 70).name == "64"
    assert shiftbench.edition_for_size(500, 375).name == "299"
    from shiftbench.sources import load_image_rgb

    src = load_image_rgb(sample_paths()[0])
    assert shiftbench.preprocess(src, "224").size == (224, 224)
    assert shiftbench.preprocess(src, "299").size == (299, 299)
    assert shiftbench.preprocess(src, "64").size == (64, 64)
    assert shiftbench.preprocess(src, "32").size == (32, 32)
    # Resize(256) keeps the aspect ratio: the short side becomes 256 before the 224 crop
    w, h = 500, 375
    im = Image.new("RGB", (w, h))
    arr = np.zeros((h, w, 3), np.uint8)
    arr[:, w // 2 :] = 255
    im = Image.fromarray(arr)
    out = np.asarray(shiftbench.preprocess(im, "224"))
    assert out[:, :100].max() == 0 and out[:, 124:].min() == 255


def test_cli_corrupt_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = sample_paths()[0]
    out = tmp_path / "o.png"
    assert main(["corrupt", str(src), str(out), "--corruption", "contrast", "--severity", "2", "--preprocess"]) == 0
    with Image.open(out) as im:
        assert im.size == (224, 224)
    assert main(["corrupt", str(src), str(out), "--corruption", "contrst"]) != 0
    assert "Did you mean 'contrast'" in capsys.readouterr().err
    assert main(["corrupt", str(tmp_path / "missing.jpg"), str(out), "-c", "contrast"]) != 0
    assert main(["list", "corruptions", "*blur*"]) == 0
    assert "motion_blur" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["shot_noise", "impulse_noise", "glass_blur", "snow", "elastic_transform", "frost"])
def test_threaded_draws_equal_serial_draws(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Accelerator batches sample their draws in a thread pool; the pixels must not change."""
    import shiftbench.api as api

    x = torch.from_numpy(photos("64", 4)).permute(0, 3, 1, 2).contiguous()
    xf = x.to(torch.float32) / 255.0
    serial = [shiftbench.corrupt(x, name, 3, seed=5), shiftbench.corrupt(xf, name, 3, seed=5)]
    monkeypatch.setattr(api, "_threaded_draws", lambda b: True)
    threaded = [shiftbench.corrupt(x, name, 3, seed=5), shiftbench.corrupt(xf, name, 3, seed=5)]
    assert torch.equal(serial[0], threaded[0])
    assert torch.equal(serial[1], threaded[1])


def test_draw_pool_size_and_fork_safety(monkeypatch: pytest.MonkeyPatch) -> None:
    import shiftbench.api as api

    monkeypatch.setattr(api, "_POOL", None)
    monkeypatch.setenv("SHIFTBENCH_DRAW_THREADS", "3")
    pool = api._draw_pool()
    assert pool._max_workers == 3 and api._draw_pool() is pool
    # a pool inherited through fork (another pid) is replaced, not used
    monkeypatch.setattr(api, "_POOL", (-1, pool))
    assert api._draw_pool() is not pool
    monkeypatch.setenv("SHIFTBENCH_DRAW_THREADS", "zero")  # not a positive integer: the default
    monkeypatch.setattr(api, "_POOL", None)
    assert api._draw_pool()._max_workers == min(16, os.cpu_count() or 1)


@pytest.mark.parametrize("name", ["pixelate", "jpeg_compression", "gaussian_noise", "defocus_blur"])
def test_chunking_never_changes_the_result(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """corrupt() splits a CPU batch into chunks of the corruption's ``chunk_values`` (image-by-image
    kernels take larger ones); one image per chunk gives the same pixels as the whole batch."""
    import dataclasses

    from shiftbench.api import _CHUNK_VALUES, _chunk_size
    from shiftbench.corruptions import _registry
    from shiftbench.corruptions._images import to_batch

    from .conftest import photos

    x = torch.from_numpy(photos("224", 5)).permute(0, 3, 1, 2).contiguous()
    spec = shiftbench.get_corruption(name)
    assert spec.chunk_values == _registry.IMAGE_BY_IMAGE > _CHUNK_VALUES
    b = to_batch(x, "images", None)
    assert _chunk_size(b, spec) == _registry.IMAGE_BY_IMAGE // (3 * 224 * 224) > 5  # the whole batch in one call
    assert _chunk_size(b, shiftbench.get_corruption("brightness")) == _CHUNK_VALUES // (3 * 224 * 224)
    whole = shiftbench.corrupt(x, name, 4, seed=2)
    _registry.CORRUPTIONS.register(name, dataclasses.replace(spec, chunk_values=3 * 224 * 224), replace=True)
    try:
        assert _chunk_size(b, shiftbench.get_corruption(name)) == 1
        assert torch.equal(shiftbench.corrupt(x, name, 4, seed=2), whole)
    finally:
        _registry.CORRUPTIONS.register(name, spec, replace=True)
