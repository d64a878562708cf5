"""Hostile-but-realistic inputs to the Python API: PIL modes, float grayscale, empty selections,
huge seeds, odd arrays and devices. Each either works correctly or raises a typed ShiftbenchError."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from PIL import Image

import shiftbench
from shiftbench import errors

from .conftest import unwritable_folder

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


# ------------------------------------------------------------------ 7: output paths and formats on the command line


def _one_line_error(err: str) -> str:
    # progress lines ("generating: 0/2 corrupted images ...", printed when stderr is not a terminal) are not errors
    lines = [ln for ln in err.splitlines() if ln.strip() and not re.match(r"^[a-z][\w -]*: \d+/\d+ ", ln)]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def no_corrupting(monkeypatch):  # type: ignore[no-untyped-def]
    """Fail the test if any corruption work starts (the output checks come first)."""

    def boom(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("corruption started before the output was checked")

    monkeypatch.setattr(shiftbench, "corrupt", boom)
    import shiftbench.generate as gen

    monkeypatch.setattr(gen, "corrupt", boom)


def _snapshot(root) -> set:  # type: ignore[no-untyped-def]
    return {p for p in root.rglob("*")}


@pytest.mark.parametrize(
    "name, needle",
    [
        ("out.xyz", "'.xyz'"),
        ("out", "no extension"),
        ("out.gif", "'.gif'"),
        ("out.", "no extension"),
    ],
)
def test_corrupt_refuses_unknown_output_extension(tmp_path, capsys, no_corrupting, name: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.cli import main

    Image.fromarray(RGB).save(tmp_path / "in.png")
    before = _snapshot(tmp_path)
    rc = main(["corrupt", str(tmp_path / "in.png"), str(tmp_path / name), "-c", "fog"])
    line = _one_line_error(capsys.readouterr().err)
    assert rc == 2 and "OUT_IMAGE" in line and needle in line and ".png" in line and ".jpg" in line, line
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "mode, ext",
    [("RGBA", ".jpg"), ("RGBA", ".JPEG"), ("LA", ".jpg"), ("RGBA", ".bmp"), ("LA", ".bmp"), ("I;16", ".jpg"), ("F", ".png"), ("L", ".webp")],
)
def test_corrupt_refuses_outputs_that_would_lose_channels_or_depth(tmp_path, capsys, no_corrupting, mode: str, ext: str) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.cli import main

    rgba = RNG.integers(0, 256, (48, 40, 4), dtype=np.uint8)
    im = {
        "RGBA": Image.fromarray(rgba),
        "LA": Image.fromarray(rgba).convert("LA"),
        "I;16": Image.fromarray(GRAY.astype(np.uint16) * 257),
        "F": Image.fromarray(GRAY.astype(np.float32) / 255.0),
        "L": Image.fromarray(GRAY),
    }[mode]
    src = tmp_path / "in.tif"
    im.save(src)
    before = _snapshot(tmp_path)
    rc = main(["corrupt", str(src), str(tmp_path / f"out{ext}"), "-c", "contrast"])
    line = _one_line_error(capsys.readouterr().err)
    assert rc == 2 and "OUT_IMAGE" in line and repr(mode) in line, line
    assert (".png" in line) or (".tif" in line), line  # suggests a format that keeps the image
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "mode, ext",
    [("RGB", ".jpg"), ("RGB", ".png"), ("RGB", ".bmp"), ("RGB", ".webp"), ("RGBA", ".png"), ("RGBA", ".tiff"),
     ("RGBA", ".webp"), ("LA", ".png"), ("L", ".jpeg"), ("I;16", ".png"), ("F", ".tif")],
)
def test_corrupt_writes_every_allowed_combination(tmp_path, capsys, mode: str, ext: str) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.cli import main

    rgba = RNG.integers(0, 256, (48, 40, 4), dtype=np.uint8)
    im = {
        "RGB": Image.fromarray(RGB),
        "RGBA": Image.fromarray(rgba),
        "LA": Image.fromarray(rgba).convert("LA"),
        "L": Image.fromarray(GRAY),
        "I;16": Image.fromarray(GRAY.astype(np.uint16) * 257),
        "F": Image.fromarray(GRAY.astype(np.float32) / 255.0),
    }[mode]
    src = tmp_path / "in.tif"
    im.save(src)
    out = tmp_path / f"out{ext}"
    assert main(["corrupt", str(src), str(out), "-c", "contrast", "-s", "2"]) == 0, capsys.readouterr().err
    with Image.open(out) as got:
        got.load()
        assert got.mode == mode
        want = np.asarray(shiftbench.corrupt(im, "contrast", 2))
        if ext.lower() in (".jpg", ".jpeg"):  # the corrupted image stored as JPEG quality 95
            import io

            buf = io.BytesIO()
            Image.fromarray(want).save(buf, format="JPEG", quality=95)
            assert np.array_equal(np.asarray(got), np.asarray(Image.open(buf)))
        else:
            assert np.array_equal(np.asarray(got), want)  # lossless formats keep every value
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in.tif", out.name])  # no temporary file left


def test_corrupt_output_paths_that_cannot_be_written(tmp_path, capsys, no_corrupting) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.cli import main

    Image.fromarray(RGB).save(tmp_path / "in.png")
    (tmp_path / "afile").write_bytes(b"x")
    ro = unwritable_folder(tmp_path)
    cases = [
        (tmp_path / "afile" / "out.png", "afile"),  # parent is a file
        (tmp_path / "afile" / "deeper" / "out.png", "afile"),  # an ancestor is a file
        (ro / "out.png", str(ro)),  # read-only folder
        (ro / "new" / "out.png", str(ro)),  # missing parent inside a read-only folder
    ]
    before = _snapshot(tmp_path)
    for out, needle in cases:
        rc = main(["corrupt", str(tmp_path / "in.png"), str(out), "-c", "fog"])
        line = _one_line_error(capsys.readouterr().err)
        assert rc == 2 and "OUT_IMAGE" in line and needle in line, (out, line)
        assert not out.exists()
    assert _snapshot(tmp_path) == before


def test_corrupt_creates_missing_parent_folders(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.cli import main

    Image.fromarray(RGB).save(tmp_path / "in.png")
    out = tmp_path / "a" / "b" / "out.png"
    assert main(["corrupt", str(tmp_path / "in.png"), str(out), "-c", "contrast"]) == 0
    assert np.array_equal(np.asarray(Image.open(out)), shiftbench.corrupt(RGB, "contrast", 3))


def test_corrupt_failed_write_leaves_nothing(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A write that fails halfway (disk full) leaves neither a truncated file nor a temporary one."""
    from shiftbench.cli import main

    Image.fromarray(RGB).save(tmp_path / "in.png")
    real_save = Image.Image.save

    def half_save(self, fp, *a, **k):  # type: ignore[no-untyped-def]
        real_save(self, fp, *a, **k)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Image.Image, "save", half_save)
    out = tmp_path / "new" / "out.png"
    rc = main(["corrupt", str(tmp_path / "in.png"), str(out), "-c", "contrast"])
    line = _one_line_error(capsys.readouterr().err)
    assert rc == 1 and "No space left" in line and "OUT_IMAGE" in line
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["in.png"]


def test_generate_out_that_cannot_be_written(tmp_path, capsys, no_corrupting) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.cli import main

    src = tmp_path / "src" / "n0"
    src.mkdir(parents=True)
    Image.fromarray(RGB).save(src / "a.png")
    (tmp_path / "afile").write_bytes(b"x")
    ro = unwritable_folder(tmp_path)
    cases = [
        (tmp_path / "afile", "afile"),  # --out is a file
        (tmp_path / "afile" / "out", "afile"),  # its parent is a file
        (tmp_path / "afile" / "a" / "b", "afile"),
        (ro / "out", str(ro)),  # inside a read-only folder
        (ro / "new" / "out", str(ro)),
    ]
    before = _snapshot(tmp_path)
    for out, needle in cases:
        rc = main(["generate", "imagenet-c", "--src", str(tmp_path / "src"), "--out", str(out), "--workers", "1", "--corruptions", "contrast", "--severities", "1"])
        line = _one_line_error(capsys.readouterr().err)
        assert rc == 2 and "--out" in line and needle in line, (out, line)
    assert _snapshot(tmp_path) == before


def test_generate_read_only_out_folder(tmp_path, capsys, no_corrupting) -> None:  # type: ignore[no-untyped-def]
    """An existing --out folder that cannot be written is refused before any work."""
    from shiftbench.cli import main

    src = tmp_path / "src" / "n0"
    src.mkdir(parents=True)
    Image.fromarray(RGB).save(src / "a.png")
    ro = unwritable_folder(tmp_path)
    rc = main(["generate", "imagenet-c", "--src", str(tmp_path / "src"), "--out", str(ro), "--workers", "1", "--corruptions", "contrast"])
    line = _one_line_error(capsys.readouterr().err)
    assert rc == 2 and "--out" in line and str(ro) in line


def test_generate_missing_src_leaves_no_out_folder(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.cli import main

    rc = main(["generate", "imagenet-c", "--src", str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    line = _one_line_error(capsys.readouterr().err)
    assert rc == 1 and "--src" in line  # input data missing: a data error
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:7", "meta", "tpu", "", "cpu:x"])
def test_generate_bad_device_is_one_line_before_any_work(tmp_path, capsys, no_corrupting, device: str) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.cli import main

    src = tmp_path / "src" / "n0"
    src.mkdir(parents=True)
    Image.fromarray(RGB).save(src / "a.png")
    rc = main(["generate", "imagenet-c", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--workers", "1", "--device", device])
    line = _one_line_error(capsys.readouterr().err)
    assert rc == 2 and "--device" in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv, rc_want, needle",
    [
        (["list", "corruptions", "--edition", "99"], 2, "edition"),
        (["corrupt", "{img}", "{tmp}/o.png", "-c", "fgo"], 2, "Did you mean"),
        (["corrupt", "{img}", "{tmp}/o.png", "-c", "fog", "-s", "9"], 2, "severity"),
        (["corrupt", "{img}", "{tmp}/o.png", "-c", "fog", "--edition", "99"], 2, "edition"),
        (["corrupt", "{img}", "{tmp}/o.png", "-c", "fog", "--seed", "-1"], 2, "seed"),
        (["corrupt", "{tmp}/missing.png", "{tmp}/o.png", "-c", "fog"], 1, "IN_IMAGE"),
        (["corrupt", "{tmp}/bad.png", "{tmp}/o.png", "-c", "fog"], 1, "IN_IMAGE"),
        (["corrupt", "{tiny}", "{tmp}/o.png", "-c", "fog"], 2, "image"),
        (["generate", "imagenet-c", "--src", "{src}", "--out", "{tmp}/g", "--edition", "99"], 2, "edition"),
        (["generate", "imagenet-c", "--src", "{src}", "--out", "{tmp}/g", "--corruptions", "fgo"], 2, "Did you mean"),
        (["generate", "imagenet-c", "--src", "{src}", "--out", "{tmp}/g", "--workers", "-1"], 2, "--workers"),
        (["generate", "imagenet-c", "--src", "{src}", "--out", "{tmp}/g", "--batch-size", "0"], 2, "--batch-size"),
        (["generate", "imagenet-c", "--src", "{src}", "--out", "{tmp}/g", "--severities", "x"], 2, "--severities"),
        (["generate", "imagenet-c", "--src", "{tmp}/bad.png", "--out", "{tmp}/g"], 1, "--src"),
        (["generate", "imagenet-c", "--src", "{tmp}/empty", "--out", "{tmp}/g"], 1, "--src"),
    ],
)
def test_every_user_error_is_one_line(tmp_path, capsys, argv: list[str], rc_want: int, needle: str) -> None:  # type: ignore[no-untyped-def]
    """Typed errors of list/corrupt/generate: one line, no traceback; 2 for a bad argument, 1 for bad input data."""
    from shiftbench.cli import main

    Image.fromarray(RGB).save(tmp_path / "in.png")
    Image.fromarray(RGB[:4, :4]).save(tmp_path / "tiny.png")
    (tmp_path / "bad.png").write_bytes(b"not an image")
    (tmp_path / "empty").mkdir()
    src = tmp_path / "src" / "n0"
    src.mkdir(parents=True)
    Image.fromarray(RGB).save(src / "a.png")
    subs = {"{img}": str(tmp_path / "in.png"), "{tiny}": str(tmp_path / "tiny.png"), "{src}": str(tmp_path / "src"), "{tmp}": str(tmp_path)}
    args = []
    for a in argv:
        for k, v in subs.items():
            a = a.replace(k, v)
        args.append(a)
    rc = main(args)
    line = _one_line_error(capsys.readouterr().err)
    assert rc == rc_want and needle in line, (rc, line)
    assert not (tmp_path / "o.png").exists() and not (tmp_path / "g").exists()


@pytest.mark.parametrize(
    "err",
    [
        errors.InvalidArgumentError("--out", "/x", "a folder"),
        errors.UnknownCorruptionError("corruption", "fgo", ["fog"], ["fog"]),
        errors.ImageTypeError("image", "PIL mode 'HSV'", "RGB"),
        errors.DataError("--src '/x' does not exist"),
        errors.MissingDependencyError("ray", "parallel runs", "ray"),
        errors.MissingWeightsError("--weights", "/w.pth", "download it"),
        errors.WeightsFormatError("--weights", "/w.pth", "not a state_dict"),
    ],
)
def test_typed_errors_cross_process_boundaries(err: errors.ShiftbenchError) -> None:
    """generate's worker processes hand errors back pickled: they must arrive whole, same type and message."""
    import pickle

    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
    for attr in ("argument", "value", "allowed", "choices", "package", "path"):
        assert getattr(back, attr, None) == getattr(err, attr, None)


def test_corrupt_output_that_is_a_folder_is_one_line(tmp_path, capsys, no_corrupting) -> None:  # type: ignore[no-untyped-def]
    from shiftbench.cli import main

    Image.fromarray(RGB).save(tmp_path / "in.png")
    (tmp_path / "d.png").mkdir()
    rc = main(["corrupt", str(tmp_path / "in.png"), str(tmp_path / "d.png"), "-c", "fog"])
    line = _one_line_error(capsys.readouterr().err)
    assert rc == 2 and "OUT_IMAGE" in line and "folder" in line


def test_generate_disk_full_is_one_line_and_resumable(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import os

    import shiftbench.generate as gen
    from shiftbench.cli import main

    src = tmp_path / "src" / "n0"
    src.mkdir(parents=True)
    Image.fromarray(RGB).save(src / "a.png")
    argv = ["generate", "imagenet-c", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--workers", "1",
            "--corruptions", "contrast", "--severities", "1,2", "--edition", "64"]
    calls = {"n": 0}
    real_fsync = os.fsync

    def full_after_one(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(gen.os, "fsync", full_after_one)
    rc = main(argv)
    line = _one_line_error(capsys.readouterr().err)
    assert rc == 1 and "--out" in line and "No space left" in line
    assert not list((tmp_path / "out").rglob("*.tmp"))
    monkeypatch.setattr(gen.os, "fsync", real_fsync)
    assert main(argv) == 0
    assert len(list((tmp_path / "out").rglob("*.JPEG"))) == 2


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
