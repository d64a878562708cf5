"""Overlap-study configs checked against their typed schema: wrong types, out-of-range values and names that would
leave the study folder are refused with an error naming the key (never truncated, coerced or used as a path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shiftbench.cli import main
from shiftbench.errors import InvalidArgumentError
from shiftbench.overlap.harness import config_from_dict


def _doc(tmp_path: Path) -> dict:
    return {
        "study": {"name": "ci", "output": str(tmp_path / "out"), "seed": 0},
        "data": {"dataset": "tensors", "image_size": 32, "limit_train": 400, "limit_test": 100},
        "model": {"arch": "small_cnn", "width": 8},
        "train": {"epochs": 3, "batch_size": 32, "lr": 0.1, "milestones": [2], "hflip": False, "cpu_threads": 1},
        "corruptions": {"train": ["noc_rotation", "noc_obstruction"]},
        "analysis": {"thresholds": [0.0, 0.5, 1.0]},
    }


CASES = [
    ("train", "momentum", -5, "train.momentum"),
    ("train", "momentum", "0.9", "train.momentum"),
    ("data", "limit_train", 0, "data.limit_train"),
    ("model", "width", 0, "model.width"),
    ("study", "seed", "abc", "study.seed"),
    ("study", "seed", 2**70, "study.seed"),
    ("study", "seed", 1.5, "study.seed"),
    ("study", "seed", True, "study.seed"),
    ("train", "milestones", "abc", "train.milestones"),
    ("train", "milestones", [0], "train.milestones"),
    ("data", "image_size", 10**6, "data.image_size"),
    ("data", "image_size", 31.5, "data.image_size"),
    ("train", "hflip", "false", "train.hflip"),
    ("train", "lr", 0, "train.lr"),
    ("train", "lr", float("nan"), "train.lr"),
    ("train", "gamma", 2.0, "train.gamma"),
    ("train", "weight_decay", -1e-4, "train.weight_decay"),
    ("train", "epochs", 2.5, "train.epochs"),
    ("train", "num_workers", -1, "train.num_workers"),
    ("study", "name", "../../ESCAPED", "study.name"),
    ("study", "name", 7, "study.name"),
]


@pytest.mark.parametrize(("section", "key", "value", "named"), CASES, ids=[f"{c[1]}={c[2]!r}" for c in CASES])
def test_config_values_of_the_wrong_type_or_range_are_refused(tmp_path: Path, section: str, key: str, value: object,
                                                              named: str) -> None:  # fmt: skip
    doc = _doc(tmp_path)
    doc[section][key] = value
    with pytest.raises(InvalidArgumentError, match=named.replace(".", r"\.")):
        config_from_dict(doc)


@pytest.mark.parametrize("name", ["../../ESCAPED", "a/b", ".hidden", "-x", "", "x" * 101])
def test_mixture_names_that_are_not_one_path_component_are_refused(tmp_path: Path, name: str) -> None:
    doc = _doc(tmp_path)
    doc["mixtures"] = {name: ["noc_rotation"]}
    doc["corruptions"]["test"] = ["noc_rotation", "noc_obstruction"]
    with pytest.raises(InvalidArgumentError, match="mixtures"):
        config_from_dict(doc)
    assert not (tmp_path / "ESCAPED").exists() and not (tmp_path.parent / "ESCAPED").exists()


def test_valid_config_still_loads(tmp_path: Path) -> None:
    cfg = config_from_dict(_doc(tmp_path))
    assert cfg.seed == 0 and cfg.train.hflip is False and cfg.model.width == 8
    doc = _doc(tmp_path)
    doc["study"]["seed"] = 2**64 - 1
    assert config_from_dict(doc).seed == 2**64 - 1


def test_cli_reports_a_bad_config_value_in_one_line(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[study]\nname = "ci"\nseed = 1.5\n[data]\ndataset = "tensors"\n[corruptions]\ntrain = ["noc_hue"]\n')
    rc = main(["overlap", "run", "--config", str(cfg)])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "study.seed" in lines[0] and "Traceback" not in err, err
