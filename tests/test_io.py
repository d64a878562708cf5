"""One image-folder rule (shiftbench.io) for every reader: generate --src, evaluate --data, ImageNet-P, ImageNet-D."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shiftbench.cli import main
from shiftbench.domains.imagenet_val import is_imagenet_folder
from shiftbench.errors import DataError
from shiftbench.evaluation.data import CLEAN, ImageFolderSource
from shiftbench.io import DECODE_ERRORS, IMAGE_EXTENSIONS, load_image_rgb, scan_image_folder

from ._eval_toys import SAMPLE_DIR, truncated_jpeg

PHOTOS = sorted(SAMPLE_DIR.glob("*.JPEG"))


def _class_tree(root: Path) -> Path:
    for p in PHOTOS[:2] + PHOTOS[10:12]:
        d = root / p.name.split("_")[0]
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(p, d / p.name)
    (root / ".hidden_dir").mkdir()
    shutil.copy(PHOTOS[20], root / ".hidden_dir" / PHOTOS[20].name)
    (root / PHOTOS[0].name.split("_")[0] / ".DS_Store").write_bytes(b"\0\0")
    shutil.copy(PHOTOS[0], root / PHOTOS[0].name.split("_")[0] / f"._{PHOTOS[0].name}")  # AppleDouble
    (root / "notes.txt").write_text("not an image")
    return root


def _flat(root: Path) -> Path:
    root.mkdir(parents=True)
    for p in PHOTOS[:2] + PHOTOS[10:12]:
        shutil.copy(p, root / p.name)
    (root / ".DS_Store").write_bytes(b"\0\0")
    return root


LAYOUTS = {"class sub-folders": _class_tree, "flat wnid files": _flat}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_both_layouts_list_the_same_images_and_classes_for_every_reader(tmp_path: Path, layout: str) -> None:
    root = LAYOUTS[layout](tmp_path / "data")
    records, classes = scan_image_folder(root)
    wnids = sorted({p.name.split("_")[0] for p in PHOTOS[:2] + PHOTOS[10:12]})
    assert classes == wnids and len(records) == 4
    assert sorted(r.path.name for r in records) == sorted(p.name for p in PHOTOS[:2] + PHOTOS[10:12])
    assert all(r.class_name == classes[r.label] and r.relpath == f"{r.class_name}/{r.path.name}" for r in records)
    keys = [r.key for r in records]
    assert keys == ([r.relpath for r in records] if layout == "class sub-folders" else [r.path.name for r in records])
    # evaluate --data (ImageNet-C, ImageNet-P from photographs, ImageNet-NOC) reads the same list
    src = ImageFolderSource(root)
    assert list(src.classes) == classes
    assert [(it.key, it.label, it.path) for it in src.items(CLEAN)] == [(r.key, r.label, r.path) for r in records]
    # ImageNet-D's validation row recognises it as an ImageNet folder
    assert is_imagenet_folder(root)
    # generate --src writes each image to <corruption>/<severity>/<class>/<file>
    out = tmp_path / "out"
    rc = main(["generate", "imagenet-c", "--src", str(root), "--out", str(out), "--corruptions", "contrast",
               "--severities", "1", "--workers", "1"])
    assert rc == 0
    written = sorted(p.relative_to(out / "contrast" / "1").as_posix() for p in out.rglob("*.JPEG"))
    assert written == sorted(r.relpath for r in records)


def _mixed(root: Path) -> None:
    _class_tree(root)
    shutil.copy(PHOTOS[30], root / PHOTOS[30].name)


def _loose_unnamed(root: Path) -> None:
    root.mkdir()
    shutil.copy(PHOTOS[0], root / "photo.jpg")
    shutil.copy(PHOTOS[1], root / PHOTOS[1].name)


def _only_hidden(root: Path) -> None:
    root.mkdir()
    shutil.copy(PHOTOS[0], root / f".{PHOTOS[0].name}")
    (root / "empty_class").mkdir()


REFUSED = {
    "class folders and loose images": (_mixed, "both class sub-folders"),
    "loose images not named by wnid": (_loose_unnamed, "no class sub-folders.*'photo.jpg'"),
    "only hidden files": (_only_hidden, "contains no images"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_ambiguous_or_empty_folders_are_refused_the_same_way_by_every_reader(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make, msg = REFUSED[case]
    root = tmp_path / "data"
    make(root)
    with pytest.raises(DataError, match=msg):
        scan_image_folder(root)
    with pytest.raises(DataError, match=f"--data .*{msg}"):
        ImageFolderSource(root)
    assert not is_imagenet_folder(root)
    rc = main(["generate", "imagenet-c", "--src", str(root), "--out", str(tmp_path / "out"), "--corruptions",
               "contrast", "--severities", "1", "--workers", "1"])
    assert rc != 0 and "--src" in capsys.readouterr().err


def test_missing_folder_names_the_argument(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"^--src '.*nope' does not exist: expected .*class sub-folders"):
        scan_image_folder(tmp_path / "nope", arg="--src")
    (tmp_path / "f.jpg").write_bytes(b"x")
    with pytest.raises(DataError, match="is not a folder"):
        scan_image_folder(tmp_path / "f.jpg")


def test_load_image_rgb_converts_and_fails_on_truncated_files(tmp_path: Path) -> None:
    Image.fromarray(np.full((5, 7), 200, np.uint8), "L").save(tmp_path / "g.png")
    im = load_image_rgb(tmp_path / "g.png")
    assert im.mode == "RGB" and im.size == (7, 5) and np.asarray(im)[0, 0].tolist() == [200, 200, 200]
    truncated_jpeg(tmp_path / "t.jpg")
    with pytest.raises(DECODE_ERRORS):
        load_image_rgb(tmp_path / "t.jpg")
    assert all(e == e.lower() and e.startswith(".") for e in IMAGE_EXTENSIONS)
