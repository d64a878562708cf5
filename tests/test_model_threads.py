"""``--threads``: the model's CPU threads, ``auto`` the CPUs other tasks leave free; progress lines in logs every 10 % or 30 s."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from shiftbench.cli import main
from shiftbench.errors import InvalidArgumentError
from shiftbench.evaluation import threads
from shiftbench.evaluation.threads import model_threads, resolve_model_threads
from shiftbench.progress import LineProgress

from ._eval_toys import image_folder


def test_auto_takes_the_cpus_other_tasks_leave_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` follows the engine's rule (shiftbench.cpus.free_cpus, tested in test_threads.py)."""
    import shiftbench.cpus

    assert threads.free_cpus is shiftbench.cpus.free_cpus
    assert 1 <= resolve_model_threads("auto") <= len(__import__("os").sched_getaffinity(0))
    monkeypatch.setattr(threads, "free_cpus", lambda: 3)
    assert resolve_model_threads("auto") == resolve_model_threads(None) == 3


def test_threads_values() -> None:
    assert resolve_model_threads(3) == 3 and resolve_model_threads("2") == 2
    assert resolve_model_threads("auto") == resolve_model_threads(None) >= 1
    for bad in (0, -1, "many", 1.5):
        with pytest.raises(InvalidArgumentError) as e:
            resolve_model_threads(bad)
        assert e.value.argument == "--threads"
    before = torch.get_num_threads()
    with model_threads(1) as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_evaluate_threads_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = image_folder(tmp_path / "data", n_per_class=1, n_classes=1)
    args = ["evaluate", "--data", str(data), "--corruptions", "contrast", "--severities", "1", "--limit", "1",
            "--store", str(tmp_path / "s.sqlite"), "--model", "efficientnet-lite0"]
    before = torch.get_num_threads()
    assert main([*args, "--threads", "0"]) == 2
    assert "--threads='0' is not valid" in capsys.readouterr().err
    assert main([*args, "--threads", "1"]) == 0
    err = capsys.readouterr().err
    assert "evaluating" in err  # not a terminal: plain progress lines
    assert torch.get_num_threads() == before  # the process's setting comes back


def test_progress_lines_every_ten_percent_or_thirty_seconds(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    clock = {"t": 0.0}
    monkeypatch.setattr("shiftbench.progress.time.monotonic", lambda: clock["t"])
    p = LineProgress("images", "img")
    p.start(1000, "clean")
    p.advance(10, "clean")  # 1 %, 0 s: nothing
    clock["t"] = 31.0
    p.advance(10, "clean")  # 2 %, 31 s: a line (30 s passed)
    p.advance(10, "clean")  # 3 %, no time passed: nothing
    p.advance(70, "clean")  # 10 %: a line
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert lines[0] == "evaluating 1000 images ..."
    assert [ln.split(" (")[0].strip() for ln in lines[1:]] == ["20/1000 images", "100/1000 images"]


def test_generate_threads_and_progress_lines_in_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = image_folder(tmp_path / "src", n_per_class=1, n_classes=2)
    args = ["generate", "imagenet-c", "--src", str(src), "--out", str(tmp_path / "out"), "--corruptions", "contrast",
            "--severities", "1,2"]
    assert main([*args, "--threads", "zero"]) == 2
    assert "--threads='zero' is not valid" in capsys.readouterr().err
    assert main([*args, "--threads", "1"]) == 0
    out = capsys.readouterr()
    assert "4 files written" in out.out
    lines = [ln for ln in out.err.splitlines() if ln.startswith("generating: ")]
    assert lines and lines[-1].startswith("generating: 4/4 corrupted images (100 %)")  # not a terminal: plain lines
