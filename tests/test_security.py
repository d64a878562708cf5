"""Malicious pickles and checkpoints never run code.

Every input shiftbench reads that could hold a pickle: CIFAR python batches (as a folder and as a
file given to ``generate --src``), any other file given as ``--src`` (never treated as a pickle),
the overlap harness's own checkpoints (resume) and a user-given ``finetune_from`` checkpoint.
Each test plants a pickle whose unpickling would create a marker file and checks that the marker
never appears and that the refusal is a typed error.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch

from shiftbench.cli import main
from shiftbench.errors import DataError, ShiftbenchError
from shiftbench.overlap.harness import Dataset, config_from_dict, run_study
from shiftbench.sources import load_array_source


class _RunsShell:
    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


def _evil(path: Path, marker: Path, as_torch: bool = False) -> None:
    payload = {b"data": _RunsShell(marker), b"labels": [0]}
    if as_torch:
        torch.save({"model": _RunsShell(marker), "epoch": 1}, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=2))


def _cifar_bytes() -> bytes:
    return pickle.dumps({b"data": np.zeros((2, 3 * 32 * 32), np.uint8), b"labels": [1, 2]}, protocol=2)


def test_cifar_folder_with_malicious_test_batch(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    _evil(folder / "test_batch", marker)
    with pytest.raises(DataError):
        load_array_source(folder)
    assert main(["generate", "imagenet-c", "--src", str(folder), "--out", str(tmp_path / "out"), "--corruptions", "contrast", "--severities", "1"]) == 1  # refused input data: one line, exit code 1
    assert not marker.exists()


def test_cifar_file_with_malicious_pickle(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    f = tmp_path / "test"
    _evil(f, marker)
    with pytest.raises(DataError):
        load_array_source(f)
    assert not marker.exists()


def test_genuine_cifar_batch_still_reads(tmp_path: Path) -> None:
    f = tmp_path / "test_batch"
    f.write_bytes(_cifar_bytes())
    src = load_array_source(f)
    assert src.images.shape == (2, 32, 32, 3) and list(src.labels) == [1, 2]


@pytest.mark.parametrize("name", ["images.bin", "data.pkl", "photo.jpg", "notes"])
def test_other_files_are_never_unpickled(tmp_path: Path, name: str) -> None:
    """Only the CIFAR layout's file names (test_batch, test) are read as pickles."""
    marker = tmp_path / "ran"
    f = tmp_path / name
    f.write_bytes(_cifar_bytes())  # even a well-formed CIFAR pickle: the layout was not asked for
    with pytest.raises(ShiftbenchError) as ei:
        load_array_source(f)
    assert "test_batch" in str(ei.value)
    _evil(f, marker)
    with pytest.raises(ShiftbenchError):
        load_array_source(f)
    assert not marker.exists()


def _toy() -> Dataset:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(20) % 2
    x = (torch.rand(20, 3, 32, 32, generator=g) * 255).to(torch.uint8)
    return Dataset("toy", ["a", "b"], x[:16], y[:16], x[16:], y[16:], image_size=32, channels=3)


def _doc(tmp_path: Path, **train: object) -> dict:
    return {
        "study": {"name": "sec", "output": str(tmp_path / "out"), "seed": 0},
        "data": {"dataset": "tensors", "image_size": 32},
        "model": {"arch": "small_cnn", "width": 4},
        "train": {"epochs": 1, "batch_size": 8, "lr": 0.05, "milestones": [], "hflip": False, "cpu_threads": 1, "eval_batch_size": 16, **train},
        "corruptions": {"train": ["noc_hue"]},
        "analysis": {"thresholds": [0.0, 1.0]},
    }


def test_finetune_from_malicious_checkpoint(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.pt"
    _evil(evil, marker, as_torch=True)
    cfg = config_from_dict(_doc(tmp_path, mode="finetune", finetune_epochs=1, finetune_from=str(evil)))
    with pytest.raises(DataError, match="evil.pt"):
        run_study(cfg, dataset=_toy(), heatmap=False)
    assert not marker.exists()


def test_resume_from_malicious_checkpoint_and_genuine_resume(tmp_path: Path) -> None:
    cfg = config_from_dict(_doc(tmp_path, epochs=2))
    run_study(cfg, dataset=_toy(), heatmap=False)
    ck_path = tmp_path / "out" / "checkpoints" / "standard.pt"
    ck = torch.load(ck_path, weights_only=True)  # what the harness writes loads without pickled code
    assert ck["epoch"] == 2
    # a genuine interrupted run still resumes
    ck["epoch"] = 1
    torch.save(ck, ck_path)
    db = sqlite3.connect(str(tmp_path / "out" / "overlap.sqlite"))
    with db:
        db.execute("UPDATE overlap_models SET status = 'training', epochs_done = 1 WHERE model = 'standard'")
        db.execute("DELETE FROM overlap_models WHERE model != 'standard'")
    logs: list[str] = []
    run_study(cfg, dataset=_toy(), log=logs.append, heatmap=False)
    assert any("resuming after epoch 1/2" in line for line in logs)
    # a planted checkpoint is refused, not executed
    marker = tmp_path / "ran"
    _evil(ck_path, marker, as_torch=True)
    with db:
        db.execute("UPDATE overlap_models SET status = 'training', epochs_done = 1 WHERE model = 'standard'")
    db.close()
    with pytest.raises(DataError, match="standard.pt"):
        run_study(cfg, dataset=_toy(), heatmap=False)
    assert not marker.exists()
