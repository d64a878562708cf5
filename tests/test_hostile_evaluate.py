"""Hostile inputs to ``evaluate --released``: a first image that cannot be opened, labels that would unpickle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shiftbench.cli import main
from shiftbench.errors import DataError
from shiftbench.evaluation import imagenet_wnids
from shiftbench.evaluation.data import open_released

from ._eval_toys import evaluate_c as evaluate
from ._eval_toys import released_tree, toy_classifier

WNIDS = imagenet_wnids()


def test_released_tree_whose_first_image_is_truncated_is_read_and_the_file_counted(tmp_path: Path) -> None:
    classes = list(WNIDS[:2])
    root = released_tree(tmp_path / "C", ["fog"], [1], classes, n=2, size=64)
    first = sorted((root / "fog" / "1" / classes[0]).iterdir())[0]
    first.write_bytes(first.read_bytes()[:10])  # not even a JPEG header: edition detection must pass over it
    src = open_released(root, ["fog"], [1])
    assert src.edition == "64"
    r = evaluate(toy_classifier(), released=root, corruptions="fog", severities="1", store=tmp_path / "s.sqlite")
    (run,) = r.runs
    assert run.status == "complete" and run.n_predicted == 3 and run.n_skipped == 1


def test_released_tree_without_a_readable_image_is_one_clear_error(tmp_path: Path) -> None:
    classes = list(WNIDS[:1])
    root = released_tree(tmp_path / "C", ["fog"], [1], classes, n=2, size=64)
    for f in (root / "fog" / "1" / classes[0]).iterdir():
        f.write_bytes(b"\xff\xd8broken")
    with pytest.raises(DataError, match="none of its 2 images can be read"):
        open_released(root, ["fog"], [1])


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param(np.array([1, "a", None] * 5, dtype=object), id="object-dtype"),
        pytest.param(np.linspace(0, 1, 15), id="float"),
    ],
)
def test_cifar_labels_that_are_not_plain_integers_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], labels: np.ndarray
) -> None:
    np.save(tmp_path / "labels.npy", labels, allow_pickle=True)
    np.save(tmp_path / "fog.npy", np.zeros((15, 32, 32, 3), np.uint8))
    with pytest.raises(DataError, match="labels.npy"):
        open_released(tmp_path, ["fog"], [1])
    rc = main(["evaluate", "--released", str(tmp_path), "--corruptions", "fog", "--severities", "1",
               "--store", str(tmp_path / "s.sqlite"), "--no-progress"])  # fmt: skip
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1 and len(lines) == 1 and "labels.npy" in lines[0] and "Traceback" not in err, err
