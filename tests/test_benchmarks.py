"""The benchmark registry and the one command-line pattern: contracts generated from the registry, a toy
benchmark added from this module through the public API and run end to end, hostile inputs."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import torch

from shiftbench.benchmarks import get_benchmark, list_benchmarks, register_benchmark
from shiftbench.cli import main
from shiftbench.errors import InvalidArgumentError, UnknownNameError
from shiftbench.evaluation.protocol import BENCHMARK_OPTIONS, Benchmark, Progress, Report, Section
from shiftbench.evaluation.store import ResultsStore, StoreError, records_to_csv

from ._eval_toys import toy_classifier

FLAGS = {"release": ["--release"], "clean": ["--no-clean"]}
VALUES = {"seed": "3", "severities": "2", "difficulties": "2", "edition": "64", "baseline": "none",
          "ray_cpus_per_worker": "2", "ray_gpus_per_worker": "1"}


def _given(option: str) -> list[str]:
    return FLAGS.get(option) or ["--" + option.replace("_", "-"), VALUES.get(option, "x")]


# -- a toy benchmark: two held-out "splits" of random images, scored by top-1 error per split -----


class HeldOut(Benchmark):
    name = "toy-held-out"
    title = "Toy held-out splits"
    measures = "Top-1 error per held-out split."
    options = ("seed",)
    conditions = "held-out split: a, b"
    sources = ("random images drawn from --seed",)
    records = "per image: label and top-5 classes"

    def evaluate(self, settings: dict[str, Any], progress: Progress | None) -> Report:
        clf = toy_classifier("toy-net", n_classes=10)
        g = torch.Generator().manual_seed(int(settings.get("seed", 0)))
        with ResultsStore(settings["store"]) as db:
            mid = db.register_model(clf.name, "toy-net", "0" * 64, {})
            sid = db.register_source("random", f"toy-{settings.get('seed', 0)}", "memory", clf.classes, {})
            lid = db.register_label_space("toy10", "model", clf.classes)
            eid = db.register_evaluation(mid, sid, self.name, "-", int(settings.get("seed", 0)), False, lid)
            n = int(settings.get("limit") or 6)
            if progress is not None:
                progress.start(2 * n, "splits")
            for split in ("a", "b"):
                rid = db.register_run(eid, sid, split, 0, n, {})
                x = torch.rand(n, 3, 8, 8, generator=g) * (0.5 if split == "a" else 1.0)
                with torch.no_grad():
                    top = clf.logits(x).topk(5, dim=1).indices.tolist()
                db.write_batch(rid, [f"{split}{i}" for i in range(n)], [i % 10 for i in range(n)], top)
                db.finish_run(rid)
                if progress is not None:
                    progress.advance(n, split)
            if progress is not None:
                progress.stop()
            errs = {r.corruption: r.top1_error for r in db.runs(eid)}
        rec = [{"split": k, "error": v} for k, v in errs.items()]
        return Report(lambda: json.dumps({"errors": errs}) + "\n", lambda: records_to_csv(rec),
                      lambda c: c.print(f"toy errors {errs}"))

    def stored(self, store: Path, *, model: str | None, baseline: str, evaluation: int | None) -> Section | None:
        with ResultsStore(store, create=False) as db:
            recs = [
                {"evaluation": e.id, "model": e.model, **{f"error_{r.corruption}": r.top1_error for r in db.runs(e.id)}}
                for e in db.evaluations(model)
                if e.benchmark == self.name
            ]
        if not recs:
            return None
        return Section("toy_held_out", recs, lambda: records_to_csv(recs), lambda c: c.print(f"Toy held-out: {recs}"))


@pytest.fixture
def toy_registered() -> Any:
    register_benchmark(HeldOut, replace=True)
    yield get_benchmark("toy-held-out")
    from shiftbench import benchmarks

    benchmarks._BENCHMARKS.pop("toy-held-out", None)  # the registry's own test may reach inside


def test_toy_benchmark_end_to_end_through_the_command_line(
    toy_registered: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "s.sqlite")
    assert "toy-held-out" in list_benchmarks()
    args = ["evaluate", "--benchmark", "toy-held-out", "--store", store, "--no-progress", "--limit", "4"]
    assert main([*args, "--results-format", "json"]) == 0
    errs = json.loads(capsys.readouterr().out)["errors"]
    assert set(errs) == {"a", "b"} and all(0.0 <= v <= 1.0 for v in errs.values())
    # the same numbers straight from the store, by plain SQL
    db = sqlite3.connect(store)
    for split, err in errs.items():
        n, wrong = db.execute(
            "SELECT COUNT(*), SUM(p.top1 != p.label) FROM records p JOIN runs r ON r.id=p.run_id "
            "WHERE r.condition=? AND p.skipped IS NULL", (split,)
        ).fetchone()
        assert n == 4 and wrong / n == pytest.approx(err)
    db.close()
    # options it does not accept are refused by the one mechanism
    assert main([*args, "--severities", "3"]) == 2
    assert "--severities does not apply to toy-held-out: it accepts --seed" in capsys.readouterr().err
    # results lists it next to the built-in benchmarks, in every format
    assert main(["results", "--store", store, "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["toy_held_out"][0]["error_a"] == pytest.approx(errs["a"])
    assert doc["rows"] == []  # the toy's evaluation is not an ImageNet-C one
    assert main(["results", "--store", store]) == 0
    assert "Toy held-out" in capsys.readouterr().out
    assert main(["list", "benchmarks", "--results-format", "json"]) == 0
    assert "toy-held-out" in [d["name"] for d in json.loads(capsys.readouterr().out)]


def test_entry_points_are_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    from shiftbench import benchmarks

    class EP:
        name = "toy-ep"

        def load(self) -> Any:
            return type("ToyEP", (HeldOut,), {"name": "toy-ep"})

    seen: list[str] = []

    def eps(group: str) -> list[EP]:
        seen.append(group)
        return [EP()]

    monkeypatch.setattr(benchmarks, "_entry_points_loaded", False)
    monkeypatch.setattr(benchmarks.importlib.metadata, "entry_points", eps)
    try:
        assert "toy-ep" in list_benchmarks() and seen == ["shiftbench.benchmarks"]
    finally:
        benchmarks._BENCHMARKS.pop("toy-ep", None)


def test_register_benchmark_refuses_bad_declarations() -> None:
    with pytest.raises(InvalidArgumentError, match="options"):
        register_benchmark(type("Bad", (HeldOut,), {"name": "bad-opts", "options": ("colour",)}))
    with pytest.raises(InvalidArgumentError, match="name"):
        register_benchmark(type("Bad", (HeldOut,), {"name": "Has Space"}))
    with pytest.raises(InvalidArgumentError):
        register_benchmark(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="replace=True"):
        register_benchmark(type("Other", (HeldOut,), {"name": "imagenet-c"}))
    with pytest.raises(UnknownNameError, match="imagenet-d"):
        get_benchmark("imagenet_d2")


# -- contracts generated from the registry ----------------------------------------------------------


@pytest.mark.parametrize("name", list_benchmarks())
def test_every_benchmark_declares_itself(name: str) -> None:
    b = get_benchmark(name)
    d = b.describe()
    assert d["name"] == name and all(d[k] for k in ("title", "measures", "conditions", "sources", "records"))
    assert set(b.options) <= set(BENCHMARK_OPTIONS)


@pytest.mark.parametrize(
    ("name", "option"),
    [(n, o) for n in list_benchmarks() for o in BENCHMARK_OPTIONS
     if not get_benchmark(n).accepts(o)],
)
def test_inapplicable_options_are_refused_in_one_line_before_any_work(
    name: str, option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    rc = main(["evaluate", "--benchmark", name, "--store", str(store), *_given(option)])
    err = capsys.readouterr().err
    assert rc == 2, err
    flag = _given(option)[0].replace("--no-", "--")
    assert err.startswith(f"Error: {flag} does not apply to {name}: ") and err.count("\n") == 1, err
    assert not store.exists()


# -- hostile input: fail before the work, one line, exit code 2 ---------------------------------------


def test_results_file_in_a_missing_folder_fails_before_the_evaluation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    rc = main(["evaluate", "--store", str(store), "--results-file", str(tmp_path / "no" / "r.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "--results-file" in err and "does not exist" in err and "Traceback" not in err
    assert not store.exists()
    rc = main(["evaluate", "--store", str(store), "--results-file", str(tmp_path)])
    assert rc == 2 and "is a directory" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_store_and_results_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert main(["evaluate", "--store", str(ro / "sub" / "s.sqlite")]) == 2
        assert "--store" in capsys.readouterr().err
        assert main(["evaluate", "--store", str(tmp_path / "s.sqlite"), "--results-file", str(ro / "r.json")]) == 2
        assert "--results-file" in capsys.readouterr().err
    finally:
        ro.chmod(0o700)


def test_store_is_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--store", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_locked_store_waits_with_a_message_then_fails_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.sqlite"
    ResultsStore(path).close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the store
    monkeypatch.setenv("SHIFTBENCH_LOCK_WAIT", "0.5")
    try:
        with ResultsStore(path) as db, pytest.raises(StoreError, match="locked by another writer"):
            db.register_label_space("x", "model", ["a"])
        assert "waiting up to" in capsys.readouterr().err
    finally:
        other.execute("ROLLBACK")
        other.close()
    with ResultsStore(path) as db:  # free again
        assert db.register_label_space("x", "model", ["a"]) == 1


def test_store_holding_only_an_empty_meta_table_is_completed(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.commit()
    db.close()
    with ResultsStore(path) as store:
        assert store.evaluations() == []


def test_store_holding_a_meta_table_without_version_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES('owner', 'someone else')")
    db.commit()
    db.close()
    assert main(["results", "--store", str(path)]) == 1  # a store that cannot be used: data, exit code 1
    err = capsys.readouterr().err
    assert "no schema version" in err and "Traceback" not in err
