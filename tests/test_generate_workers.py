"""``generate``'s worker default: as many worker processes as ``--threads`` gives (``auto``: the cores the one-minute
machine's other tasks leave free, shiftbench.cpus.free_cpus), for ImageNet-C and ImageNet-P alike; chosen from perf/generate_workers.py's measurements
(perf/results/generate_workers--2cpu--cpu.json: on a loaded machine one worker per core was slower than one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shiftbench.cli import main

RESULT = Path(__file__).resolve().parents[1] / "perf" / "results" / "generate_workers--2cpu--cpu.json"


@pytest.mark.parametrize(("command", "module", "function"), [
    ("imagenet-c", "shiftbench.generate", "generate"),
    ("imagenet-p", "shiftbench.perturbations.generate", "generate_imagenet_p"),
])
def test_workers_default_follows_threads(command: str, module: str, function: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    import shiftbench.evaluation.threads as threads

    seen: list[int] = []

    class Stop(Exception):
        pass

    def fake(config: Any, *a: Any, **k: Any) -> Any:
        seen.append(config.workers)
        raise Stop

    monkeypatch.setattr(importlib.import_module(module), function, fake)
    monkeypatch.setattr(threads, "free_cpus", lambda: 1)  # a busy machine
    base = ["generate", command, "--src", str(tmp_path), "--out", str(tmp_path / "out")]
    for extra, want in (([], 1), (["--threads", "3"], 3), (["--workers", "2"], 2), (["--workers", "2", "--threads", "1"], 2)):
        with pytest.raises(Stop):
            main([*base, *extra])
        assert seen[-1] == want, (command, extra)
    assert main([*base, "--threads", "zero"]) == 2


def test_the_measurement_behind_the_default() -> None:
    doc = json.loads(RESULT.read_text(encoding="utf-8"))
    assert doc["metadata"]["machine"]["cores"] and doc["metadata"]["when"]
    runs = {(r["condition"], r["command"], r["workers"]): r for r in doc["runs"]}
    for condition in ("as-is", "busy"):
        for command in ("imagenet-c", "imagenet-p"):
            assert {1, 2, 0} <= {w for (c, m, w) in runs if (c, m) == (condition, command)}
    # one per core (the former ImageNet-P default) was slower than one worker on the loaded machine
    p_one, p_two = runs[("as-is", "imagenet-p", 1)], runs[("as-is", "imagenet-p", 2)]
    assert p_one["load_before"][0] > doc["metadata"]["cpus"] and p_two["seconds"] > p_one["seconds"]
