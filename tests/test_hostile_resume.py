"""Resume by content: a sweep rerun after the data or the weights changed evaluates again instead of reporting the
old numbers as "finished before"."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from shiftbench.cli import main
from shiftbench.evaluation.models import MODEL_SOURCES, register_model_source
from shiftbench.evaluation.store import content_identity, marker_key

from ._eval_toys import image_folder, toy_classifier


@pytest.fixture()
def toys() -> Iterator[None]:
    register_model_source("toyresume", lambda name, weights: toy_classifier(f"toyresume:{name}"))
    try:
        yield
    finally:
        MODEL_SOURCES.unregister("toyresume")


def _sweep(store: Path, data: Path, capsys, *extra: str) -> list[bool]:
    rc = main(["sweep", "--model", "toyresume:a", "--benchmark", "imagenet-c", "--data", str(data), "--store",
               str(store), "--edition", "64", "--corruptions", "contrast", "--severities", "1", "--no-progress",
               "--results-format", "json", *extra])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 0, out.err
    return [bool(c["skipped"]) for c in json.loads(out.out)["cells"]]


def test_sweep_rerun_after_images_were_added_evaluates_again(toys, tmp_path: Path, capsys) -> None:
    data = image_folder(tmp_path / "data", n_per_class=1, n_classes=2)
    store = tmp_path / "s.sqlite"
    assert _sweep(store, data, capsys) == [False]
    assert _sweep(store, data, capsys) == [True]  # nothing changed: no work
    first = sorted((data).rglob("*.JPEG"))[0]
    shutil.copyfile(first, first.with_name("added_" + first.name))
    assert _sweep(store, data, capsys) == [False]  # one image more: a new evaluation


def test_marker_changes_when_a_file_is_overwritten_with_other_content(tmp_path: Path) -> None:
    w = tmp_path / "w.pth"
    w.write_bytes(b"weights one")
    k1 = marker_key("sweep", {"model": "m", "settings": {"weights": str(w)}})
    assert k1 == marker_key("sweep", {"model": "m", "settings": {"weights": str(w)}})
    w.write_bytes(b"weights two")
    import os

    os.utime(w, ns=(1, 1))  # whatever the clock: size and content differ
    assert marker_key("sweep", {"model": "m", "settings": {"weights": str(w)}}) != k1
    assert content_identity(str(tmp_path / "missing")) is None and content_identity(5) is None
    assert str(content_identity(tmp_path)).startswith("tree:")
