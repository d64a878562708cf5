"""The ImageNet-C editions' squashes are Pillow <= 12's BILINEAR resize whatever Pillow is installed.

The reference bytes are Pillow 12.3.0's (SHA-256 of its output on the shared photos, tests/fixtures/pillow12_resize.json,
with what Pillow 13.0.0 wrote differently): a landscape, two portrait and a small photo. The authors' 2018 run had a
Pillow of that generation; Pillow 13 runs the two passes in another order and moves the 299 squash of the portraits
and the 64 squash of the small photo by one level at some pixels.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from shiftbench.editions import bilinear_resize, preprocess, resize_image

from .conftest import SAMPLE_DIR

REF = json.loads((Path(__file__).with_name("fixtures") / "pillow12_resize.json").read_text(encoding="utf-8"))
PILLOW_MAJOR = int(version("pillow").split(".")[0])


def _sha(img: Image.Image) -> str:
    return hashlib.sha256(img.tobytes()).hexdigest()


def _photo(name: str) -> Image.Image:
    p = SAMPLE_DIR / f"{name}.JPEG"
    if not p.is_file():
        pytest.skip("shared sample photos absent")
    return Image.open(p).convert("RGB")


@pytest.mark.parametrize("name", sorted(REF["photos"]))
def test_squashes_are_pillow_12s_bytes(name: str) -> None:
    ref = REF["photos"][name]
    img = _photo(name)
    assert list(img.size) == ref["size"]
    for edition in ("299", "64", "32"):
        out = preprocess(img, edition)
        assert out.size == (int(edition), int(edition)) and out.mode == "RGB"
        assert _sha(out) == ref[edition], (name, edition)
        if PILLOW_MAJOR <= 12:  # the installed Pillow is the reference itself
            w, h = img.size
            ch, cw = int(0.875 * h), int(0.875 * w)
            top, left = int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0))
            src = img.crop((left, top, left + cw, top + ch)) if edition == "299" else img
            assert out.tobytes() == src.resize((int(edition),) * 2, Image.BILINEAR).tobytes()


def test_the_reference_covers_portrait_and_landscape_and_pillow_13s_difference() -> None:
    shapes = {n: ("portrait" if r["size"][1] > r["size"][0] else "landscape") for n, r in REF["photos"].items()}
    assert {"portrait", "landscape"} <= set(shapes.values())
    assert REF["pillow"].startswith("12.")
    differs = {n for n, r in REF["photos"].items() if "299" in r["differs_under_pillow_13"]}
    assert differs and all(shapes[n] == "portrait" for n in differs)  # what the emulation protects against
    if PILLOW_MAJOR >= 13:  # the installed Pillow alone would give other bytes
        name = sorted(differs)[0]
        img = _photo(name)
        w, h = img.size
        ch, cw = int(0.875 * h), int(0.875 * w)
        top, left = int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0))
        pil = img.crop((left, top, left + cw, top + ch)).resize((299, 299), Image.BILINEAR)
        ours = np.asarray(preprocess(img, "299"), dtype=np.int16)
        diff = np.abs(np.asarray(pil, dtype=np.int16) - ours)
        assert 0 < (diff > 0).mean() < 0.5 and diff.max() == 1


def test_224_resize_is_the_installed_pillows_and_equals_pillow_12_on_the_shared_photos() -> None:
    for name, ref in REF["photos"].items():
        img = _photo(name)
        w, h = img.size
        nw, nh = (256, int(256 * h / w)) if w <= h else (int(256 * w / h), 256)
        assert _sha(img.resize((nw, nh), Image.BILINEAR)) == ref["resize256"], name
        assert _sha(resize_image(img, nw, nh)) == ref["resize256"], name


def test_bilinear_resize_keeps_an_unchanged_axis_and_accepts_batches() -> None:
    x = torch.randint(0, 256, (2, 3, 40, 30), dtype=torch.uint8)
    y = bilinear_resize(x, 40, 17)
    assert y.shape == (2, 3, 40, 17) and y.dtype == torch.float64
    assert torch.equal(bilinear_resize(x, 40, 30), x.to(torch.float64))  # no pass: the input
    one = bilinear_resize(x[1], 40, 17)
    assert torch.equal(one, y[1])


def test_supported_pillow_range_is_declared() -> None:
    from packaging.requirements import Requirement

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    import re

    req = Requirement(re.search(r'^\s*"(pillow[^"]*)"', text, re.M)[1])  # type: ignore[index]
    assert version("pillow") in req.specifier  # the installed Pillow is one the project supports
    assert "12.3.0" in req.specifier and "14.0.0" not in req.specifier
