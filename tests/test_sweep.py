"""``shiftbench sweep``: two toy models x two benchmarks end to end, resume without work, refusals before work."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from shiftbench.benchmarks import get_benchmark
from shiftbench.cli import main
from shiftbench.cli.evaluate import evaluate_cmd
from shiftbench.cli.sweep import evaluate_params, headline_of, sweep
from shiftbench.errors import InvalidArgumentError
from shiftbench.evaluation.models import MODEL_SOURCES, register_model_source
from shiftbench.evaluation.store import ResultsStore, marker_key

from ._eval_toys import image_folder, toy_classifier

LOADS: list[str] = []


@pytest.fixture()
def toys() -> Iterator[None]:
    def load(name: str, weights: str | None):  # type: ignore[no-untyped-def]
        LOADS.append(name)
        return toy_classifier(f"toysweep:{name}", seed={"a": 0, "b": 1}[name])

    register_model_source("toysweep", load)
    LOADS.clear()
    try:
        yield
    finally:
        MODEL_SOURCES.unregister("toysweep")


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    return image_folder(tmp_path / "data", n_per_class=2, n_classes=2)


def _args(store: Path, data: Path, *extra: str) -> list[str]:
    return ["sweep", "--model", "toysweep:a", "--model", "toysweep:b", "--benchmark", "imagenet-c",
            "--benchmark", "imagenet-p", "--data", str(data), "--store", str(store), "--edition", "64",
            "--limit", "1", "--batch-size", "8", "--no-progress", *extra]


def _predictions(store: Path) -> tuple[int, int]:
    db = sqlite3.connect(store)
    try:
        # still images (ImageNet-C) and videos (ImageNet-P) share the records table; a video's run has frames > 1
        count = "SELECT COUNT(*) FROM records JOIN runs ON runs.id = records.run_id WHERE runs.frames {}"
        return (db.execute(count.format("= 1")).fetchone()[0], db.execute(count.format("> 1")).fetchone()[0])
    finally:
        db.close()


def test_two_models_two_benchmarks_then_a_rerun_does_no_work(
    toys: None, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    assert main([*_args(store, data), "--results-format", "json"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert [(c["model"], c["benchmark"]) for c in doc["cells"]] == [
        ("toysweep:a", "imagenet-c"), ("toysweep:a", "imagenet-p"), ("toysweep:b", "imagenet-c"), ("toysweep:b", "imagenet-p")]
    assert not any(c["skipped"] for c in doc["cells"])
    assert out.err.count("evaluated (#") == 4
    assert doc["columns"] == ["imagenet-c clean_error", "imagenet-c mce", "imagenet-c relative_mce",
                              "imagenet-p mfr", "imagenet-p mt5d", "imagenet-p mean_fp"]
    # every cell equals what `shiftbench results` reports for its evaluation
    assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    by_eval = {("imagenet-c", r["evaluation"]): r for r in stored["rows"] if not r.get("reference")}
    by_eval |= {("imagenet-p", r["evaluation"]): r for r in stored["imagenet_p"]}
    for c in doc["cells"]:
        assert len(c["evaluations"]) == 1
        rec = by_eval[(c["benchmark"], c["evaluations"][0])]
        assert rec["model"] == c["model"]
        for k, v in c["headline"].items():
            assert v == rec[k]
    assert doc["cells"][0]["headline"]["clean_error"] is not None and doc["cells"][1]["headline"]["mean_fp"] is not None
    # the two toy models differ, so the table is no copy of one row
    assert doc["cells"][0]["headline"] != doc["cells"][2]["headline"] or doc["cells"][1]["headline"] != doc["cells"][3]["headline"]
    before = _predictions(store)
    assert before[0] > 0 and before[1] > 0
    # resume: the same command again loads no model, writes no prediction, prints the same numbers
    LOADS.clear()
    assert main([*_args(store, data), "--results-format", "json"]) == 0
    again = capsys.readouterr()
    doc2 = json.loads(again.out)
    assert LOADS == [] and _predictions(store) == before
    assert all(c["skipped"] for c in doc2["cells"]) and again.err.count("finished before, skipped") == 4
    assert [c["headline"] for c in doc2["cells"]] == [c["headline"] for c in doc["cells"]]
    assert main([*_args(store, data), "--results-format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["skipped"] for r in rows] == ["True"] * 4 and [r["model"] for r in rows][::2] == ["toysweep:a", "toysweep:b"]
    # the table format: one line per model
    assert main([*_args(store, data)]) == 0
    table = capsys.readouterr().out
    assert doc["cells"][0]["partial"] == [] and doc["cells"][1]["partial"] == []  # every corruption and perturbation
    assert "toysweep:a" in table and "toysweep:b" in table and "Finished before, not evaluated again" in table


def test_option_a_benchmark_does_not_accept_is_refused_before_any_work(
    toys: None, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    # --severities applies to imagenet-c, not to imagenet-p: the evaluate rule, before anything is evaluated
    assert main([*_args(store, data, "--severities", "3")]) == 2
    assert "--severities does not apply to imagenet-p: it accepts" in capsys.readouterr().err
    assert not store.exists() and LOADS == []
    assert main(["sweep", "--benchmark", "imagenet-c", "--store", str(store)]) == 2  # --model is required
    assert main(["sweep", "--model", "toysweep:a", "--benchmark", "no-such-bench", "--store", str(store)]) == 2
    assert "no-such-bench" in capsys.readouterr().err and not store.exists()


def test_sweep_takes_every_evaluate_option() -> None:
    # an option added to evaluate (e.g. a common --ray) is a sweep option too, with the same name and default
    from shiftbench.cli.sweep import sweep_cmd

    ours = {p.name: p for p in sweep_cmd.params}
    for p in evaluate_cmd.params:
        assert p.name in ours
        if p.name not in ("model", "benchmark", "weights", "model_args"):  # those are per model in a sweep
            assert ours[p.name] is p
    assert {p.name for p in evaluate_params("model")} == {p.name for p in evaluate_cmd.params} - {"model"}


def test_a_partial_mce_is_flagged(toys: None, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sweep", "--model", "toysweep:a", "--benchmark", "imagenet-c", "--data", str(data), "--store",
            str(tmp_path / "s.sqlite"), "--corruptions", "contrast", "--severities", "2", "--limit", "1", "--no-progress"]
    assert main([*args, "--results-format", "json"]) == 0
    cell = json.loads(capsys.readouterr().out)["cells"][0]
    assert cell["partial"] == ["mce", "relative_mce"] and cell["headline"]["mce"] is not None
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"{100 * cell['headline']['mce']:.2f}*" in out and "not comparable" in out  # the table in %
    assert "(%)" in out


def test_headline_is_the_mean_over_a_benchmarks_records() -> None:
    bench = get_benchmark("icons-50-style")
    recs = [{"heldout_accuracy": 0.5, "seen_accuracy": 0.9, "gap": 0.4}, {"heldout_accuracy": 0.7, "seen_accuracy": None}]
    h = headline_of(bench, recs)
    assert h["heldout_accuracy"] == pytest.approx(0.6) and h["seen_accuracy"] == 0.9 and h["gap"] == pytest.approx(0.4)


def test_sweep_function_forwards_options_unchanged(toys: None, data: Path, tmp_path: Path) -> None:
    seen: list[dict] = []  # type: ignore[type-arg]

    from dataclasses import dataclass

    from shiftbench.evaluation.protocol import Settings, option

    @dataclass(frozen=True)
    class SpySettings(Settings):
        seed: int = option(0, minimum=0, help="A seed.")

    class Spy:
        name, headline, items, Settings = "spy", ("x",), ("images", "img"), SpySettings

        def accepts(self, k: str) -> bool:
            return k != "severities"

        def evaluate(self, settings, progress):  # type: ignore[no-untyped-def]
            seen.append(dict(settings))
            from shiftbench.evaluation.protocol import Report

            text = getattr(self, "evaluate_json", json.dumps({"evaluation": 7}))
            return Report(lambda: text, lambda: "", lambda c: None)

        def stored(self, store, *, model, baseline, evaluation):  # type: ignore[no-untyped-def]
            from shiftbench.evaluation.protocol import Section

            return Section("spy", [{"evaluation": 7, "model": "m", "x": 0.25}], lambda: "", lambda c: None)

        refusals: dict = {}  # type: ignore[type-arg]
        options = ("seed",)

    from shiftbench.evaluation.protocol import Benchmark

    Benchmark.register(Spy)  # a virtual subclass is enough for the loop
    opts = {"store": str(tmp_path / "s.sqlite"), "data": str(data), "seed": 3, "ray": "auto", "severities": "1"}
    r = sweep(["m"], [Spy()], opts)  # type: ignore[list-item]
    # the benchmark's Settings built as evaluate builds them: the options given, the others from their defaults
    assert seen == [{"store": opts["store"], "data": str(data), "seed": 3, "ray": "auto", "model": "m", "limit": None,
                     "bad_images": "skip"}]
    assert r.cells[0].headline == {"x": 0.25} and r.cells[0].evaluations == [7]
    # the same options again: skipped; another seed: a new pair; batch size and device do not decide results
    assert sweep(["m"], [Spy()], opts | {"batch_size": 99, "device": "cpu"}).cells[0].skipped  # type: ignore[list-item]
    assert len(seen) == 1
    assert not sweep(["m"], [Spy()], opts | {"seed": 4}).cells[0].skipped and len(seen) == 2  # type: ignore[list-item]
    assert not sweep(["m"], [Spy()], opts | {"rerun": True}).cells[0].skipped and len(seen) == 3  # type: ignore[list-item]
    # a report naming no evaluation stored nothing: no marker, tried again next time
    Spy.evaluate_json = json.dumps({"errors": {}})  # type: ignore[attr-defined]
    assert sweep(["m"], [Spy()], opts | {"seed": 5}).cells[0].evaluations == []  # type: ignore[list-item]
    assert not sweep(["m"], [Spy()], opts | {"seed": 5}).cells[0].skipped and len(seen) == 5  # type: ignore[list-item]
    # a bad value of a benchmark's option is refused before any work
    with pytest.raises(InvalidArgumentError, match="seed"):
        sweep(["m"], [Spy()], opts | {"seed": -1})  # type: ignore[list-item]
    assert len(seen) == 5
    # a marker written before the Settings were built (keyed by the options given, not None) still counts, and is
    # moved to the key of the whole Settings
    Spy.evaluate_json = json.dumps({"evaluation": 7})  # type: ignore[attr-defined]
    old = marker_key("sweep", {"benchmark": "spy", "model": "m", "settings": {"data": str(data), "seed": 8,
                                                                             "ray": "auto"}})
    with ResultsStore(opts["store"]) as db:
        db.set_marker(old, json.dumps({"benchmark": "spy", "model": "m", "weights": None, "evaluations": [7]}))
    assert sweep(["m"], [Spy()], opts | {"seed": 8, "limit": None}).cells[0].skipped and len(seen) == 5  # type: ignore[list-item]
    with ResultsStore(opts["store"]) as db:
        assert db.marker(old) is None
    assert sweep(["m"], [Spy()], opts | {"seed": 8}).cells[0].skipped and len(seen) == 5  # type: ignore[list-item]


def test_a_failing_model_does_not_stop_the_sweep(
    toys: None, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shiftbench.evaluation.errors import WeightsUnavailableError

    def offline(name: str, weights: str | None):  # type: ignore[no-untyped-def]
        LOADS.append(name)
        raise WeightsUnavailableError(f"toyoffline:{name}", "http://127.0.0.1:9/c.pth", "/cache/c.pth", "connection refused")

    register_model_source("toyoffline", offline)
    try:
        args = ["sweep", "--model", "toyoffline:c", "--model", "toysweep:a", "--benchmark", "imagenet-c",
                "--data", str(data), "--store", str(tmp_path / "s.sqlite"), "--corruptions", "contrast",
                "--severities", "1", "--limit", "1", "--no-progress"]
        assert main([*args, "--results-format", "json"]) == 1
        out = capsys.readouterr()
        doc = json.loads(out.out)
        bad, good = doc["cells"]
        assert bad["model"] == "toyoffline:c" and "http://127.0.0.1:9/c.pth" in bad["error"] and bad["evaluations"] == []
        assert good["model"] == "toysweep:a" and good["error"] is None and good["headline"]["clean_error"] is not None
        err_lines = [ln for ln in out.err.splitlines() if ln.strip()]
        assert "Traceback" not in out.err
        assert err_lines[-1] == "Error: 1 of 2 pair(s) failed: toyoffline:c x imagenet-c (the reasons are above; " \
            "the table shows the others)"
        # the table: the finished model's numbers (from the store now), the failed pair marked, its reason
        assert main(args) == 1
        out = capsys.readouterr()
        assert "toysweep:a" in out.out and "failed" in out.out and "Failed: toyoffline:c x imagenet-c" in out.out
        # a model that cannot be loaded is not tried on its other benchmarks
        LOADS.clear()
        assert main(["sweep", "--model", "toyoffline:c", "--benchmark", "imagenet-c", "--benchmark", "imagenet-noc",
                     "--data", str(data), "--store", str(tmp_path / "s.sqlite"), "--no-progress"]) == 1
        out = capsys.readouterr()
        assert LOADS == ["c"] and "toyoffline:c x imagenet-noc: FAILED" in out.err
    finally:
        MODEL_SOURCES.unregister("toyoffline")


MODELS_PY = '''
import torch


def tiny(width=4):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, width, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                              torch.nn.Linear(width, 1000))
    return net
'''


def test_a_sweep_file_gives_each_model_its_own_weights_and_arguments(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    (tmp_path / "sweep_models.py").write_text(MODELS_PY, encoding="utf-8")
    ns: dict = {}  # type: ignore[type-arg]
    exec(MODELS_PY, ns)  # noqa: S102 - the test's own factory
    for i, name in enumerate(("a.pth", "b.pth")):
        state = {k: v + i for k, v in ns["tiny"](width=3).state_dict().items()}
        torch.save(state, tmp_path / name)
    (tmp_path / "sweep.toml").write_text(f'''
benchmarks = ["imagenet-c"]

[options]
data = "{data}"
corruptions = "contrast"
severities = "1"
limit = 1
progress = false

[[models]]
model = "{tmp_path / 'sweep_models.py'}:tiny"
weights = "a.pth"
args = {{width = 3}}

[[models]]
model = "{tmp_path / 'sweep_models.py'}:tiny"
weights = "b.pth"
args = "width=3"

[[models]]
model = "{tmp_path / 'sweep_models.py'}:tiny"
label = "random, width 5"
args = {{width = 5}}
''', encoding="utf-8")
    store = tmp_path / "s.sqlite"
    assert main(["sweep", "--sweep-file", str(tmp_path / "sweep.toml"), "--store", str(store),
                 "--results-format", "json"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    spec = f"{tmp_path / 'sweep_models.py'}:tiny?width=3"
    assert [c["model"] for c in doc["cells"]] == [f"{spec} [a.pth]", f"{spec} [b.pth]", "random, width 5"]
    assert len({c["evaluations"][0] for c in doc["cells"]}) == 3
    db = sqlite3.connect(store)
    try:
        checksums = {r[0] for r in db.execute("SELECT checksum FROM models")}
    finally:
        db.close()
    assert len(checksums) == 3  # three sets of weights, three models in the store
    # the command line pairs --weights with --model in order; a count that fits neither rule is refused
    assert main(["sweep", "--model", "m1", "--model", "m2", "--weights", "a", "--weights", "b", "--weights", "c",
                 "--benchmark", "imagenet-c", "--store", str(store)]) == 2
    assert "--weights" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text('benchmarks = ["imagenet-c"]\nmodel = "x"\n', encoding="utf-8")
    assert main(["sweep", "--sweep-file", str(tmp_path / "bad.toml"), "--store", str(store)]) == 2
    assert "Unknown key(s): model" in capsys.readouterr().err
