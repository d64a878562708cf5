"""Hostile and careless files for the readers: one image reader for every command, arrays checked, never cast.

Each case is a way a file read as data could be silently wrong: 16-bit and float images clipped to white or black,
CIFAR pixels wrapped to uint8, labels cut to the image count or contradicting CIFAR-100's superclass map, NaN pixels,
float labels truncated. The outcome is the right image or a typed error naming the file.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shiftbench import errors
from shiftbench.cli import main
from shiftbench.editions import preprocess
from shiftbench.io import CIFAR100_FINE_TO_COARSE, image_array, label_array, load_image_rgb
from shiftbench.sources import load_array_source

RNG = np.random.default_rng(7)
GRAY = RNG.integers(0, 256, (48, 40), dtype=np.uint8)


def _three_depths(folder: Path) -> dict[str, Path]:
    """The same gray picture as an 8-bit PNG, a 16-bit PNG and a float TIFF (values in [0, 1])."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"8-bit": folder / "g8.png", "16-bit": folder / "g16.png", "float": folder / "gf.tif"}
    Image.fromarray(GRAY).save(files["8-bit"])
    Image.fromarray(GRAY.astype(np.uint16) * 257).save(files["16-bit"])
    Image.fromarray(GRAY.astype(np.float32) / 255).save(files["float"])
    return files


def test_16_bit_and_float_files_read_as_the_same_8_bit_picture(tmp_path: Path) -> None:
    files = _three_depths(tmp_path)
    with Image.open(files["16-bit"]) as i16, Image.open(files["float"]) as ifl:
        assert i16.mode.startswith("I") and ifl.mode == "F"
    arrays = {k: np.asarray(load_image_rgb(p)) for k, p in files.items()}
    for k, a in arrays.items():
        assert a.dtype == np.uint8 and a.shape == (48, 40, 3), k
        assert np.array_equal(a[..., 0], GRAY), k


@pytest.mark.parametrize(
    ("make", "match"),
    [
        pytest.param(lambda: Image.fromarray(GRAY.astype(np.float32)), r"values in \[0, 255\]", id="float-0-255"),
        pytest.param(lambda: Image.fromarray(np.full((40, 40), np.nan, np.float32)), "NaN", id="float-nan"),
        pytest.param(lambda: Image.fromarray(np.full((40, 40), 70000, np.int32)), "0..65535", id="int32-large"),
        pytest.param(lambda: Image.fromarray(np.full((40, 40), -5, np.int32)), "0..65535", id="int32-negative"),
        pytest.param(lambda: Image.new("RGB", (40, 40)).convert("LAB"), "'LAB'", id="lab"),
    ],
)
def test_images_that_cannot_be_read_exactly_are_refused_naming_the_file(tmp_path: Path, make, match: str) -> None:
    f = tmp_path / "odd.tif"
    make().save(f)
    with pytest.raises(errors.ImageFileError, match=match) as info:
        load_image_rgb(f)
    assert "odd.tif" in str(info.value)
    assert isinstance(info.value, ValueError)  # counted with the unreadable images where those are skipped


def test_generate_gives_the_same_corruption_for_8_bit_16_bit_and_float_sources(tmp_path: Path) -> None:
    files = _three_depths(tmp_path / "pictures")
    means = {}
    for k, f in files.items():
        src = tmp_path / k / "src" / "n01440764"
        src.mkdir(parents=True)
        with Image.open(f) as big:
            big.resize((80, 96), Image.NEAREST).save(src / f"x{f.suffix}")
        out = tmp_path / k / "out"
        rc = main(["generate", "imagenet-c", "--src", str(src.parent), "--out", str(out), "--corruptions", "contrast",
                   "--severities", "1", "--workers", "1", "--edition", "64"])  # fmt: skip
        assert rc == 0, k
        (written,) = [p for p in out.rglob("*") if p.is_file() and p.parent.name == "n01440764"]
        means[k] = float(np.asarray(load_image_rgb(written)).mean())
    assert means["8-bit"] == means["16-bit"] == means["float"], means


def test_preprocess_of_a_16_bit_image_is_not_white(tmp_path: Path) -> None:
    im = Image.fromarray(GRAY.astype(np.uint16) * 257)
    a = np.asarray(preprocess(im, "32"))
    b = np.asarray(preprocess(Image.fromarray(GRAY), "32"))
    assert np.array_equal(a, b)


def test_style_folder_reads_a_16_bit_style_as_its_8_bit_twin(tmp_path: Path) -> None:
    from shiftbench.style.source import StyleSource

    files = _three_depths(tmp_path / "styles")
    src = StyleSource(tmp_path / "styles")
    by_name = dict(zip(src.names(), range(len(src))))
    t8 = src.resized(by_name["g8.png"], 32)
    t16 = src.resized(by_name["g16.png"], 32)
    tf = src.resized(by_name["gf.tif"], 32)
    assert files and np.array_equal(t8.numpy(), t16.numpy()) and np.array_equal(t8.numpy(), tf.numpy())


def test_report_gallery_reads_a_16_bit_photo(tmp_path: Path) -> None:
    from shiftbench.report.gallery import gallery

    files = _three_depths(tmp_path)
    a = gallery(files["8-bit"], ["contrast"], thumb=32)
    b = gallery(files["16-bit"], ["contrast"], thumb=32)
    assert len(a) > 1 and [g.uri for g in a] == [g.uri for g in b]


# ---------------------------------------------------------------------------------------------- arrays


def _cifar(path: Path, **entries: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({k.encode(): v for k, v in entries.items()}, protocol=2))
    return path


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 1) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == code and len(lines) == 1 and "Traceback" not in err, (rc, err)
    return lines[0]


def test_cifar_batch_with_float_pixels_out_of_range_is_refused(tmp_path: Path, capsys) -> None:
    data = np.linspace(0.7, 399.7, 4 * 3072).reshape(4, 3072)
    f = _cifar(tmp_path / "c" / "test_batch", data=data, labels=[1, 2, 3, 4])
    with pytest.raises(errors.ImageFileError, match=r"values in \[0.7, 399.7\]"):
        load_array_source(f)
    line = _one_line(capsys, ["generate", "imagenet-c", "--src", str(f), "--out", str(tmp_path / "o"), "--edition", "32",
                              "--corruptions", "contrast", "--severities", "1"])  # fmt: skip
    assert "test_batch" in line and not (tmp_path / "o").exists()


def test_cifar_batch_with_more_labels_than_images_is_refused(tmp_path: Path) -> None:
    f = _cifar(tmp_path / "test_batch", data=np.zeros((120, 3072), np.uint8), labels=list(range(150)))
    with pytest.raises(errors.ImageFileError, match="150 labels for 120 images"):
        load_array_source(f)


def test_cifar_100_labels_that_contradict_the_superclass_map_are_refused(tmp_path: Path) -> None:
    fine = np.arange(10)
    coarse = np.asarray(CIFAR100_FINE_TO_COARSE)[fine]
    ok = _cifar(tmp_path / "a" / "test", data=np.zeros((10, 3072), np.uint8), fine_labels=fine.tolist(),
                coarse_labels=coarse.tolist())  # fmt: skip
    assert load_array_source(ok).labels.tolist() == fine.tolist()
    coarse[3] = (coarse[3] + 1) % 20
    bad = _cifar(tmp_path / "b" / "test", data=np.zeros((10, 3072), np.uint8), fine_labels=fine.tolist(),
                 coarse_labels=coarse.tolist())  # fmt: skip
    with pytest.raises(errors.ImageFileError, match="image 3, fine label 3"):
        load_array_source(bad)


def test_cifar_100_reader_checks_the_superclass_map(tmp_path: Path) -> None:
    from shiftbench.structural import read_cifar100

    fine = np.arange(10)
    coarse = np.asarray(CIFAR100_FINE_TO_COARSE)[fine]
    coarse[0] = (coarse[0] + 1) % 20
    _cifar(tmp_path / "cifar-100-python" / "test", data=np.zeros((10, 3072), np.uint8), fine_labels=fine.tolist(),
           coarse_labels=coarse.tolist())  # fmt: skip
    with pytest.raises(errors.ImageFileError, match="contradicts CIFAR-100's fixed superclass map"):
        read_cifar100(tmp_path, "test")


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        pytest.param({"data": np.zeros((4, 3000), np.uint8), "labels": [0] * 4}, "N x 3072", id="N-x-3000"),
        pytest.param({"data": np.zeros((4, 3072), np.uint8), "labels": ["a"] * 4}, "integers", id="string-labels"),
        pytest.param({"data": np.zeros((4, 3072), np.uint8), "labels": [0.5] * 4}, "integers", id="float-labels"),
        pytest.param({"data": np.full((4, 3072), -3, np.int16), "labels": [0] * 4}, "values in -3..-3", id="negative"),
    ],
)
def test_cifar_batches_with_odd_entries_are_refused(tmp_path: Path, entries: dict, match: str) -> None:
    f = _cifar(tmp_path / "test_batch", **entries)
    with pytest.raises(errors.ImageFileError, match=match):
        load_array_source(f)


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda p: np.save(p, np.array([object()] * 4, dtype=object), allow_pickle=True), id="object-npy"),
        pytest.param(lambda p: p.write_bytes(b"\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (5, 32, 32, 3), }"), id="truncated-npy"),
        pytest.param(lambda p: p.write_bytes(b"not a zip"), id="not-a-zip-npz"),
        pytest.param(lambda p: np.savez(p, images=np.zeros((2, 32, 32, 3), np.uint8), labels=np.array(["a", "b"])), id="string-labels-npz"),
        pytest.param(lambda p: np.savez(p, images=np.full((2, 32, 32, 3), np.nan)), id="nan-npz"),
        pytest.param(lambda p: np.savez(p, images=np.zeros((2, 32, 32, 3), bool)), id="bool-npz"),
    ],
)  # fmt: skip
def test_array_files_that_are_not_plain_images_are_one_line(tmp_path: Path, capsys, request, write) -> None:
    f = tmp_path / ("a.npz" if "npz" in request.node.callspec.id else "a.npy")
    write(f)
    with pytest.raises(errors.DataError):
        load_array_source(f)
    _one_line(capsys, ["generate", "imagenet-c", "--src", str(f), "--out", str(tmp_path / "o"), "--edition", "32",
                       "--corruptions", "contrast", "--severities", "1"])  # fmt: skip
    assert not (tmp_path / "o").exists()


def test_image_array_converts_exactly_or_refuses() -> None:
    levels = RNG.integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)
    assert np.array_equal(image_array(levels.astype(np.float64) / 255, "x"), levels)
    assert np.array_equal(image_array(levels.astype(np.float32), "x"), levels)
    assert np.array_equal(image_array(levels.astype(np.uint16) * 257, "x"), levels)
    assert np.array_equal(image_array(levels.astype(np.int64), "x"), levels)
    for bad in (levels.astype(np.float32) + 0.5, levels.astype(np.int32) + 256, np.full((1, 8, 8, 3), np.inf)):
        with pytest.raises(errors.ImageFileError):
            image_array(bad, "x")


@pytest.mark.parametrize(
    ("labels", "match"),
    [
        pytest.param(np.array([0.0, 1.0]), "dtype float64", id="float"),
        pytest.param([True, False], "integers", id="bool"),
        pytest.param(np.array([1, 2, 3]), "3 labels for 2 images", id="count"),
        pytest.param(np.array([[1, 2]]), "shape", id="2-d"),
        pytest.param(np.array([-1, 0]), "-1..0", id="negative"),
    ],
)
def test_label_array_refuses(labels: object, match: str) -> None:
    with pytest.raises(errors.ImageFileError, match=match):
        label_array(labels, 2, "x")


def _icons(path: Path, image: np.ndarray, classes: object) -> Path:
    n = len(image)
    d = {"image": image, "class": classes, "style": ["apple"] * n, "subtype": ["x"] * n, "rendition": ["r"] * n}
    np.save(path, np.array(d, dtype=object), allow_pickle=True)
    return path


@pytest.mark.parametrize(
    ("image", "classes", "match"),
    [
        pytest.param(np.full((3, 3, 8, 8), np.nan), [0, 1, 2], "NaN", id="nan-pixels"),
        pytest.param(np.full((3, 3, 8, 8), np.inf), [0, 1, 2], "NaN or infinite", id="inf-pixels"),
        pytest.param(np.zeros((3, 3, 8, 8), np.uint8), [0.5, 1.0, 2.0], "integers", id="float-labels"),
        pytest.param(np.zeros((3, 3, 8, 8), np.uint8), [0, 1], "2 labels for 3 images", id="short-labels"),
    ],
)
def test_icons_50_npy_with_odd_pixels_or_labels_is_refused(tmp_path: Path, image, classes, match: str) -> None:
    from shiftbench.structural import read_icons50

    f = _icons(tmp_path / "Icons-50.npy", image, classes)
    with pytest.raises(errors.ImageFileError, match=match) as info:
        read_icons50(f)
    assert "Icons-50.npy" in str(info.value)


def test_generate_checksums_verify_with_sha256sum_for_odd_file_names(tmp_path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("sha256sum") is None:
        pytest.skip("no sha256sum here")
    src = tmp_path / "src" / "n01440764"
    src.mkdir(parents=True)
    rgb = RNG.integers(0, 256, (40, 40, 3), dtype=np.uint8)
    for name in ("a b.png", "new\nline.png", "back\\slash.png", "plain.png"):
        Image.fromarray(rgb).save(src / name, format="PNG")
    out = tmp_path / "out"
    rc = main(["generate", "imagenet-c", "--src", str(src.parent), "--out", str(out), "--corruptions", "contrast",
               "--severities", "1", "--workers", "1", "--edition", "64"])  # fmt: skip
    assert rc == 0
    r = subprocess.run(["sha256sum", "-c", "--quiet", "checksums.sha256"], cwd=out, capture_output=True, timeout=60,
                       check=False)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert len((out / "checksums.sha256").read_bytes().splitlines()) == 4


def test_tiny_imagenet_training_layout_keeps_every_class(tmp_path: Path) -> None:
    from shiftbench.io import scan_image_folder

    rgb = RNG.integers(0, 256, (40, 40, 3), dtype=np.uint8)
    for c in ("n01443537", "n01629819"):
        (tmp_path / c / "images").mkdir(parents=True)
        Image.fromarray(rgb).save(tmp_path / c / "images" / f"{c}_0.JPEG")
        (tmp_path / c / f"{c}_boxes.txt").write_text("x")
    records, classes = scan_image_folder(tmp_path)
    assert classes == ["n01443537", "n01629819"] and [r.key for r in records] == [
        "n01443537/n01443537_0.JPEG", "n01629819/n01629819_0.JPEG"]


def test_class_folder_with_images_only_deeper_is_refused(tmp_path: Path) -> None:
    from shiftbench.errors import DataError
    from shiftbench.io import scan_image_folder

    rgb = RNG.integers(0, 256, (40, 40, 3), dtype=np.uint8)
    (tmp_path / "a").mkdir()
    Image.fromarray(rgb).save(tmp_path / "a" / "x.png")
    (tmp_path / "b" / "deep" / "er").mkdir(parents=True)
    Image.fromarray(rgb).save(tmp_path / "b" / "deep" / "er" / "y.png")
    with pytest.raises(DataError, match="'b' holds no image itself"):
        scan_image_folder(tmp_path)


def test_imagenet_d_list_file_with_invalid_utf8_is_a_list_file_error(tmp_path: Path) -> None:
    from shiftbench.domains import DomainNetDataset, ListFileError

    from .test_domains_data import _tree

    root = tmp_path / "DN"
    _tree(root, ("real",))
    (root / "real_train.txt").write_bytes(b"real/bird/a.jpg 31\nreal/bird/\xff\xfe.jpg 31\n")
    with pytest.raises(ListFileError, match="not valid UTF-8") as info:
        DomainNetDataset(root, domains=["real"])
    assert info.value.line == 2


# -- 16-bit colour files: Pillow keeps each value's high byte; the reader scales the exact values ----------------


def _png16(path: Path, values: np.ndarray) -> Path:
    """A 16-bit PNG written byte by byte (zlib and struct only, independent of the reader's decoders): H x W x C
    uint16, C = 2 (grey + alpha), 3 (RGB) or 4 (RGBA)."""
    import struct
    import zlib

    h, w, c = values.shape
    colour = {2: 4, 3: 2, 4: 6}[c]
    rows = b"".join(b"\x00" + values[y].astype(">u2").tobytes() for y in range(h))  # filter 0 (None) per row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, colour, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))  # fmt: skip
    return path


def _expected(values: np.ndarray) -> np.ndarray:
    """8-bit levels of 16-bit values: value / 65535 * 255, rounded (half to even, as corrupt() rounds floats)."""
    return np.round(values.astype(np.float32) / np.float32(65535.0) * np.float32(255.0)).astype(np.uint8)


WIDE = RNG.integers(0, 65536, (37, 41, 4), dtype=np.uint16)
WIDE[0, :4, :3] = [[1257, 1257, 1257], [32767, 128, 65535], [0, 384, 65408], [191, 192, 193]]  # high byte != level


@pytest.mark.parametrize("channels", [3, 4, 2], ids=["RGB", "RGBA", "grey+alpha"])
def test_16_bit_colour_png_is_read_at_its_exact_values(tmp_path: Path, channels: int) -> None:
    values = WIDE[:, :, :channels]
    f = _png16(tmp_path / "wide.png", values)
    with Image.open(f) as im:
        im.load()
        truncated = np.asarray(im.convert("RGB"))
    got = np.asarray(load_image_rgb(f))
    rgb = values[:, :, :3] if channels >= 3 else np.repeat(values[:, :, :1], 3, axis=2)
    assert got.dtype == np.uint8 and got.shape == (37, 41, 3)
    assert np.array_equal(got, _expected(rgb))
    assert got[0, 0, 0] == 5 and not np.array_equal(truncated, got)  # 1257: level 5, high byte 4


def test_16_bit_rgb_tiff_and_the_corrupt_command_read_the_exact_values(tmp_path: Path) -> None:
    import cv2

    rgb = WIDE[:, :, :3]
    f = tmp_path / "wide.tif"
    assert cv2.imwrite(str(f), np.ascontiguousarray(rgb[:, :, ::-1]))
    assert np.array_equal(np.asarray(load_image_rgb(f)), _expected(rgb))
    _png16(tmp_path / "wide.png", rgb)
    Image.fromarray(_expected(rgb)).save(tmp_path / "eight.png")
    outs = []
    for name in ("wide.png", "eight.png"):  # the 16-bit photo corrupts as its exact 8-bit twin
        assert main(["corrupt", str(tmp_path / name), str(tmp_path / f"out-{name}"), "--corruption", "contrast",
                     "--severity", "2"]) == 0  # fmt: skip
        outs.append(np.asarray(Image.open(tmp_path / f"out-{name}")))
    assert np.array_equal(outs[0], outs[1])


def test_imagenet_d_reads_a_16_bit_colour_png_as_its_8_bit_twin(tmp_path: Path) -> None:
    """ImageNet-D predicted every 16-bit PNG as one class: its images now reach the model as their 8-bit twins."""
    from shiftbench.domains import DomainNetDataset
    from shiftbench.domains.evaluate import DomainSource
    from shiftbench.domains.mapping import domainnet_classes

    from ._eval_toys import SAMPLE_DIR

    photos = sorted(SAMPLE_DIR.glob("*.JPEG"))[:2]
    batches = {}
    for depth in (8, 16):
        root = tmp_path / f"d{depth}"
        for cls, photo in zip(("bird", "dog"), photos, strict=True):
            (root / "real" / cls).mkdir(parents=True)
            rgb = np.asarray(Image.open(photo).convert("RGB"))
            f = root / "real" / cls / "a.png"
            _png16(f, rgb.astype(np.uint16) * 257) if depth == 16 else Image.fromarray(rgb).save(f)
        data = DomainNetDataset(root, domains=["real"], split="all", mapping="wordnet")
        src = DomainSource(data, {c: i for i, c in enumerate(domainnet_classes())}, "fail")
        (wb,) = list(src.batches({("real", 0): {it.key for it in src.items(("real", 0))}}, batch_size=8, seed=0,
                                 release=False))  # fmt: skip
        batches[depth] = wb.images.numpy()
    assert batches[8].shape[0] == 2 and np.array_equal(batches[8], batches[16])
