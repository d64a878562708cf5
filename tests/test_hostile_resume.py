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


# -- evaluate: the evaluation's identity holds the weights' checksum and the data's digest -----------------------

MODELS_PY = '''
import torch


def tiny():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(4, 1000))
'''


def _weights(models: Path, path: Path, shift: float) -> Path:
    import torch

    ns: dict = {}  # type: ignore[type-arg]
    exec(models.read_text(), ns)  # noqa: S102 - the test's own factory
    torch.save({k: v + shift for k, v in ns["tiny"]().state_dict().items()}, path)
    return path


def _stored(store: Path) -> tuple[list[int], int, list[str]]:
    """Evaluation ids, records, and the models' checksums (in evaluation order)."""
    import sqlite3

    db = sqlite3.connect(store)
    try:
        ids = [r[0] for r in db.execute("SELECT id FROM evaluations ORDER BY id")]
        n = db.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        sums = [r[0] for r in db.execute("SELECT m.checksum FROM evaluations e JOIN models m ON m.id = e.model_id "
                                          "ORDER BY e.id")]  # fmt: skip
        return ids, n, sums
    finally:
        db.close()


def _evaluate(capsys, *args: str) -> dict:  # type: ignore[type-arg]
    rc = main(["evaluate", "--no-progress", "--results-format", "json", "--corruptions", "contrast", "--severities",
               "1", *args])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


@pytest.fixture()
def tiny_model(tmp_path: Path) -> tuple[str, Path]:
    models = tmp_path / "models.py"
    models.write_text(MODELS_PY, encoding="utf-8")
    return f"{models}:tiny", _weights(models, tmp_path / "w.pth", 0.0)


def _evaluate_case(tiny_model: tuple[str, Path], tmp_path: Path) -> tuple[Path, Path, tuple[str, ...]]:
    """Two one-image classes, a store, and the `evaluate` arguments of the tiny model on them (ImageNet-C, 64 px)."""
    model, w = tiny_model
    data = image_folder(tmp_path / "data", n_per_class=1, n_classes=2)
    store = tmp_path / "s.sqlite"
    return data, store, ("--model", model, "--weights", str(w), "--data", str(data), "--store", str(store), "--edition", "64")


def test_evaluate_after_the_weights_file_was_overwritten_makes_a_new_evaluation(
    tiny_model: tuple[str, Path], tmp_path: Path, capsys
) -> None:
    model, w = tiny_model
    _, store, args = _evaluate_case(tiny_model, tmp_path)
    _evaluate(capsys, *args)
    ids, n, sums = _stored(store)
    assert len(ids) == 1 and n == 4  # clean + contrast/1, two images each
    _evaluate(capsys, *args)
    assert _stored(store) == (ids, n, sums)  # unchanged: resumed, nothing predicted again
    _weights(Path(model.split(":")[0]), w, 0.5)  # other weights under the same name
    _evaluate(capsys, *args)
    ids2, n2, sums2 = _stored(store)
    assert len(ids2) == 2 and n2 == 2 * n and sums2[0] == sums[0] and sums2[1] != sums[0]  # evaluated again
    _evaluate(capsys, *args)
    assert _stored(store) == (ids2, n2, sums2)


def test_evaluate_after_images_were_added_makes_a_new_evaluation(
    tiny_model: tuple[str, Path], tmp_path: Path, capsys
) -> None:
    data, store, args = _evaluate_case(tiny_model, tmp_path)
    _evaluate(capsys, *args)
    first = sorted(data.rglob("*.JPEG"))[0]
    shutil.copyfile(first, first.with_name("added_" + first.name))
    _evaluate(capsys, *args)
    ids, n, _ = _stored(store)
    assert len(ids) == 2 and n == 4 + 6  # the new evaluation has the three images
    from shiftbench.evaluation.store import ResultsStore

    with ResultsStore(store, create=False) as db:
        assert {r.n_expected for r in db.runs(ids[1])} == {3}


def test_evaluate_on_a_released_tree_after_images_were_added_or_rewritten(
    tiny_model: tuple[str, Path], tmp_path: Path, capsys
) -> None:
    import os

    from ._eval_toys import released_tree

    model, w = tiny_model
    classes = sorted(p.name for p in image_folder(tmp_path / "clean", n_per_class=1, n_classes=2).iterdir())
    root = released_tree(tmp_path / "released", ["contrast", "fog"], [1], classes, n=2, size=64)
    store = tmp_path / "s.sqlite"
    args = ("--model", model, "--weights", str(w), "--released", str(root), "--store", str(store), "--no-clean")
    _evaluate(capsys, *args)
    # another corruption of the same data later: the same evaluation (its digest covers the whole tree)
    main(["evaluate", "--no-progress", "--corruptions", "fog", "--severities", "1", *args])
    capsys.readouterr()
    ids, n, _ = _stored(store)
    assert len(ids) == 1 and n == 8
    f = sorted((root / "contrast" / "1" / classes[0]).iterdir())[0]
    shutil.copyfile(f, f.with_name("added_" + f.name))  # one image more: new numbers, no "data changed" error
    _evaluate(capsys, *args)
    ids, n, _ = _stored(store)
    assert len(ids) == 2 and n == 8 + 5
    st = f.stat()
    f.write_bytes(sorted((root / "fog" / "1" / classes[0]).iterdir())[0].read_bytes())  # rewritten in place
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    _evaluate(capsys, *args)
    assert len(_stored(store)[0]) == 3
    _evaluate(capsys, *args)
    assert len(_stored(store)[0]) == 3  # unchanged since: resumed


def test_sweep_rerun_after_the_weights_were_overwritten_evaluates_again(
    tiny_model: tuple[str, Path], tmp_path: Path, capsys
) -> None:
    model, w = tiny_model
    data = image_folder(tmp_path / "data", n_per_class=1, n_classes=2)
    (tmp_path / "sweep.toml").write_text(f'''
benchmarks = ["imagenet-c"]

[options]
data = "{data}"
corruptions = "contrast"
severities = "1"
edition = "64"
progress = false

[[models]]
model = "{model}"
weights = "w.pth"
''', encoding="utf-8")
    store = tmp_path / "s.sqlite"

    def cells() -> list[dict]:  # type: ignore[type-arg]
        rc = main(["sweep", "--sweep-file", str(tmp_path / "sweep.toml"), "--store", str(store), "--results-format",
                   "json"])  # fmt: skip
        out = capsys.readouterr()
        assert rc == 0, out.err
        return json.loads(out.out)["cells"]

    first = cells()
    assert not first[0]["skipped"] and cells()[0]["skipped"]  # nothing changed: no work
    _weights(Path(model.split(":")[0]), w, 0.5)
    again = cells()
    assert not again[0]["skipped"] and again[0]["evaluations"] != first[0]["evaluations"]
    assert len(set(_stored(store)[2])) == 2
