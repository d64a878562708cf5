"""DomainNet loader: layout, official list files, and bad input (errors or counted warnings, never a wrong label)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from shiftbench.domains import (
    DOMAINS,
    DomainNetDataset,
    DomainNetLayoutError,
    ListFileError,
    MissingDomainsError,
    MissingImageError,
    UnknownClassFoldersError,
    domainnet_classes,
)
from shiftbench.errors import DataError, InvalidArgumentError

LABEL = {c: i for i, c in enumerate(domainnet_classes())}


def _img(path: Path, value: int = 128) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((12, 16, 3), value, np.uint8)).save(path)


def _tree(root: Path, domains: tuple[str, ...] = DOMAINS, classes: tuple[str, ...] = ("bird", "dog", "anvil")) -> None:
    for d in domains:
        for c in classes:
            for k in range(2):
                _img(root / d / c / f"{d}_{LABEL[c]:03d}_{k:06d}.jpg", 40 * k)


def _snapshot(root: Path) -> list[tuple[str, bool]]:
    return sorted((str(p.relative_to(root)), p.is_symlink()) for p in root.rglob("*"))


def test_folder_layout_labels_from_folder_names_and_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "DomainNet"
    _tree(root)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = _snapshot(root)
    ds = DomainNetDataset(root)
    assert ds.domains == DOMAINS
    items = ds.items("sketch")
    assert [it.cls for it in items] == ["bird", "bird", "dog", "dog"]  # anvil is outside ImageNet-D
    assert all(it.label == LABEL[it.cls] for it in items)
    assert all(it.path.parent.parent == root / "sketch" for it in items)  # read in place
    assert ds.report.outside_imagenet_d["sketch"] == 2
    assert len(ds) == 24
    assert _snapshot(root) == before and list(work.iterdir()) == []  # no copies, no symlinks
    # missing ImageNet-D class folders are counted, not fatal
    assert "zebra" in ds.report.missing_class_folders["real"]
    assert any("no folder or no images" in w for w in ds.report.warnings())


def test_single_domain_folder_and_limit(tmp_path: Path) -> None:
    root = tmp_path / "DN"
    _tree(root, ("sketch", "real"))
    ds = DomainNetDataset(root / "sketch", limit=3)
    assert ds.domains == ("sketch",) and len(ds.items("sketch")) == 3
    with pytest.raises(InvalidArgumentError, match="domain folder"):
        DomainNetDataset(root / "sketch", domains=["real"])
    with pytest.raises(InvalidArgumentError, match="limit"):
        DomainNetDataset(root, domains=["real"], limit=0)


def test_missing_domains_is_a_typed_error_listing_them(tmp_path: Path) -> None:
    root = tmp_path / "DN"
    _tree(root, ("clipart", "real"))
    with pytest.raises(MissingDomainsError) as ei:
        DomainNetDataset(root)
    assert ei.value.missing == ["infograph", "painting", "quickdraw", "sketch"]
    assert "Present: clipart, real" in str(ei.value)
    assert isinstance(ei.value, DataError)
    assert DomainNetDataset(root, domains=["real", "clipart"]).domains == ("clipart", "real")
    with pytest.raises(DomainNetLayoutError, match="holds no domain folder"):
        DomainNetDataset(tmp_path)
    with pytest.raises(DomainNetLayoutError, match="does not exist"):
        DomainNetDataset(tmp_path / "nope")
    with pytest.raises(InvalidArgumentError, match="domains"):
        DomainNetDataset(root, domains=["photo"])


def test_unknown_class_folder_is_refused_with_suggestions(tmp_path: Path) -> None:
    root = tmp_path / "DN"
    _tree(root, ("real",))
    _img(root / "real" / "Bird" / "x.jpg")
    _img(root / "real" / "aeroplane" / "y.jpg")
    with pytest.raises(UnknownClassFoldersError) as ei:
        DomainNetDataset(root, domains=["real"])
    assert ei.value.folders == ["real/Bird", "real/aeroplane"]
    assert "bird" in ei.value.suggestions["Bird"]
    assert "never guesses a label" in str(ei.value)


def _lists(root: Path, domain: str, train: list[str], test: list[str]) -> None:
    for split, rels in (("train", train), ("test", test)):
        lines = [f"{r} {LABEL[r.split('/')[1]]}" for r in rels]
        (root / f"{domain}_{split}.txt").write_text("\n".join(lines) + "\n")


def test_list_files_splits_missing_images_and_unlisted(tmp_path: Path) -> None:
    root = tmp_path / "DN"
    _tree(root, ("real",))
    files = sorted(str(p.relative_to(root)).replace(os.sep, "/") for p in (root / "real").rglob("*.jpg"))
    birds = [f for f in files if "/bird/" in f]
    dogs = [f for f in files if "/dog/" in f]
    anvils = [f for f in files if "/anvil/" in f]
    ghost = "real/dog/real_ghost.jpg"
    _lists(root, "real", [birds[0], dogs[0], anvils[0], ghost], [birds[1], birds[1]])
    ds = DomainNetDataset(root, domains=["real"])
    assert [it.key for it in ds.items("real")] == [birds[0], birds[1], dogs[0]]
    assert ds.report.missing_listed_images["real"] == [ghost]
    assert ds.report.unlisted_images["real"] == 1  # dogs[1] is on disk but in no list
    assert ds.report.duplicate_list_lines["real"] == 1
    warnings = " ".join(ds.report.warnings())
    assert "not on disk" in warnings and "named in no list file" in warnings
    train = DomainNetDataset(root, domains=["real"], split="train")
    assert [it.key for it in train.items("real")] == [birds[0], dogs[0]]
    test = DomainNetDataset(root, domains=["real"], split="test")
    assert [it.key for it in test.items("real")] == [birds[1]]
    with pytest.raises(MissingImageError) as ei:
        DomainNetDataset(root, domains=["real"], bad_images="fail")
    assert ei.value.missing == [ghost]
    (root / "real_test.txt").unlink()
    (root / "real_train.txt").unlink()
    with pytest.raises(DomainNetLayoutError, match="real_test.txt"):
        DomainNetDataset(root, domains=["real"], split="test")


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("real/bird/a.jpg 32", "disagrees with the class folder 'bird'.*'birthday_cake'"),
        ("real/bird/a.jpg", "malformed"),
        ("clipart/bird/a.jpg 31", "is not a path <real>"),
        ("real/Bird/a.jpg 31", "not a DomainNet class"),
        ("real/bird/a.jpg 999", "outside 0..344"),
    ],
)
def test_list_file_lines_that_would_mislabel_are_errors(tmp_path: Path, line: str, match: str) -> None:
    root = tmp_path / "DN"
    _tree(root, ("real",))
    (root / "real_train.txt").write_text(line + "\n")
    with pytest.raises(ListFileError, match=match) as ei:
        DomainNetDataset(root, domains=["real"])
    assert ei.value.line == 1
    assert LABEL["bird"] == 31 and LABEL["birthday_cake"] == 32
