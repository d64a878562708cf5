"""The output-format table of shiftbench.outputs, checked against Pillow: every (extension, mode) it allows
round-trips exactly (JPEG: as Pillow's JPEG at quality 95), every pair it refuses would lose the mode or values."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from shiftbench import errors
from shiftbench.outputs import IMAGE_FORMATS, check_output_image, corrupted_mode, save_image_atomic

RNG = np.random.default_rng(11)
SIZE = (23, 17)  # W x H
OUT_MODES = sorted({m for m in (corrupted_mode(x) for x in ("L", "LA", "RGB", "RGBA", "F", "I", "I;16", "I;16B", "I;16L", "I;16N", "P", "CMYK", "1")) if m})


def _image(mode: str) -> Image.Image:
    w, h = SIZE
    if mode == "F":
        return Image.fromarray(RNG.random((h, w)).astype(np.float32))
    if mode == "I":
        return Image.fromarray(RNG.integers(0, 65536, (h, w)).astype(np.int32))
    if mode.startswith("I;16"):
        dt = {"I;16": "<u2", "I;16L": "<u2", "I;16B": ">u2", "I;16N": "=u2"}[mode]
        return Image.frombytes(mode, SIZE, RNG.integers(0, 65536, (h, w)).astype(dt).tobytes())
    bands = len(mode)
    return Image.fromarray(RNG.integers(0, 256, (h, w, bands), dtype=np.uint8).squeeze(), mode=mode)


def _family(mode: str) -> str:
    return "I;16" if mode.startswith("I;16") else mode


def _values(im: Image.Image) -> np.ndarray:
    return np.asarray(im).astype(np.float64)


def test_every_mode_corrupt_returns_is_covered() -> None:
    assert set(OUT_MODES) >= {"L", "LA", "RGB", "RGBA", "F", "I", "I;16"}
    assert corrupted_mode("HSV") is None and corrupted_mode("P") == "RGB"


@pytest.mark.parametrize("ext", sorted(IMAGE_FORMATS))
@pytest.mark.parametrize("mode", OUT_MODES)
def test_format_table_matches_pillow(tmp_path, ext: str, mode: str) -> None:  # type: ignore[no-untyped-def]
    fmt = IMAGE_FORMATS[ext]
    im = _image(mode)
    out = tmp_path / f"x{ext}"
    if mode in fmt.modes:
        assert check_output_image(out, "OUT_IMAGE", mode) is fmt
        save_image_atomic(im, out, fmt, "OUT_IMAGE")
        with Image.open(out) as got:
            got.load()
            assert _family(got.mode) == _family(mode) and got.size == im.size
            if fmt.lossy:
                buf = io.BytesIO()
                im.save(buf, format=fmt.pil_format, **fmt.save_kwargs)
                assert np.array_equal(_values(got), _values(Image.open(buf)))
            else:
                assert np.array_equal(_values(got), _values(im))
        assert [p.name for p in tmp_path.iterdir()] == [out.name]
        return
    with pytest.raises(errors.InvalidArgumentError, match="OUT_IMAGE"):
        check_output_image(out, "OUT_IMAGE", mode)
    buf = io.BytesIO()
    try:
        im.save(buf, format=fmt.pil_format, **fmt.save_kwargs)
    except (OSError, ValueError, KeyError, TypeError):
        return  # Pillow cannot write it at all
    buf.seek(0)
    got = Image.open(buf)
    got.load()
    lost = _family(got.mode) != _family(mode) or not np.array_equal(_values(got), _values(im))
    assert lost, f"{ext} keeps mode {mode!r} exactly: allow it in IMAGE_FORMATS"


def test_extensions_are_case_insensitive(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert check_output_image(tmp_path / "a.PNG", "OUT_IMAGE", "RGBA") is IMAGE_FORMATS[".png"]
    assert check_output_image(tmp_path / "a.JPEG", "OUT_IMAGE", "RGB") is IMAGE_FORMATS[".jpeg"]


def test_new_files_follow_the_umask(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os

    old = os.umask(0o022)
    try:
        save_image_atomic(_image("RGB"), tmp_path / "a.png", IMAGE_FORMATS[".png"], "OUT_IMAGE")
    finally:
        os.umask(old)
    assert (tmp_path / "a.png").stat().st_mode & 0o777 == 0o644
