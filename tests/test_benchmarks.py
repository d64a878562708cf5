"""The benchmark registry and the one command-line pattern: contracts generated from the registry, the toy
benchmark of docs/adding-a-benchmark.md run end to end (command line, shiftbench.evaluate, results, report),
hostile inputs."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from shiftbench.benchmarks import get_benchmark, list_benchmarks, register_benchmark
from shiftbench.cli import main
from shiftbench.cli.evaluate import declared_options
from shiftbench.errors import InvalidArgumentError, UnknownNameError
from shiftbench.evaluation.protocol import Benchmark, Settings
from shiftbench.evaluation.store import ResultsStore, StoreError

REPO = Path(__file__).resolve().parents[1]
FLAGS = {"release": ["--release"], "clean": ["--no-clean"]}
VALUES = {"seed": "3", "severities": "2", "difficulties": "2", "edition": "64", "baseline": "none", "top": "3",
          "contrast": "0.5", "seen_test_share": "0.1"}


def _given(option: str) -> list[str]:
    return FLAGS.get(option) or ["--" + option.replace("_", "-"), VALUES.get(option, "x")]


def doc_example() -> dict[str, Any]:
    """The complete benchmark of docs/adding-a-benchmark.md (its first Python block), run as written."""
    text = (REPO / "docs" / "adding-a-benchmark.md").read_text(encoding="utf-8")
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 32, "the doc's complete example grew past ~30 lines"
    assert "._" not in code and "import _" not in code, "the doc's example uses private names"
    import sys
    import types

    mod = types.ModuleType("toy_benchmark_doc")
    sys.modules[mod.__name__] = mod  # dataclasses read their module's namespace
    exec(compile(code, "docs/adding-a-benchmark.md", "exec"), mod.__dict__)  # noqa: S102 - the repository's own doc
    return mod.__dict__


# -- the documented toy benchmark, end to end ---------------------------------------------------------


@pytest.fixture
def toy_registered() -> Any:
    ns = doc_example()
    yield get_benchmark("toy-held-out"), ns
    from shiftbench.benchmarks import BENCHMARKS

    BENCHMARKS.unregister("toy-held-out")


def test_toy_benchmark_end_to_end_through_the_command_line_and_python(
    toy_registered: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shiftbench

    store = str(tmp_path / "s.sqlite")
    assert "toy-held-out" in list_benchmarks()
    args = ["evaluate", "--benchmark", "toy-held-out", "--store", store, "--no-progress", "--limit", "4"]
    assert main([*args, "--results-format", "json"]) == 0
    errs = json.loads(capsys.readouterr().out)
    assert set(errs) >= {"error_a", "error_b"} and all(0.0 <= errs[k] <= 1.0 for k in ("error_a", "error_b"))
    # the same numbers straight from the store, by plain SQL
    db = sqlite3.connect(store)
    for split in ("a", "b"):
        n, wrong = db.execute(
            "SELECT COUNT(*), SUM(p.top1 != p.label) FROM records p JOIN runs r ON r.id=p.run_id "
            "WHERE r.condition=? AND p.skipped IS NULL", (split,)
        ).fetchone()
        assert n == 4 and wrong / n == pytest.approx(errs[f"error_{split}"])
    db.close()
    # Python's one call gives the CLI's summary (resumed from the same store: nothing predicted again)
    r = shiftbench.evaluate("efficientnet-lite0", benchmark="toy-held-out", store=store, limit=4)
    assert r.headline() == {"error_a": errs["error_a"], "error_b": errs["error_b"]}
    assert r.to_dict() == errs and json.loads(r.to_json()) == errs
    assert list(r.records.columns)[:2] == ["error_a", "error_b"] and len(r.records) == 1
    assert any("already complete" in line for line in r.status)
    # its own option is accepted, validated, and refused for the others
    assert main([*args, "--contrast", "0.1"]) == 0
    assert main([*args, "--contrast", "-1"]) == 2 and "contrast" in capsys.readouterr().err
    assert main(["evaluate", "--benchmark", "imagenet-c", "--contrast", "0.1", "--store", store]) == 2
    assert "--contrast does not apply to imagenet-c" in capsys.readouterr().err
    # options it does not accept are refused by the one mechanism
    assert main([*args, "--severities", "3"]) == 2
    assert "--severities does not apply to toy-held-out: it accepts --seed, --contrast" in capsys.readouterr().err
    # results lists it next to the built-in benchmarks, in every format; report draws it
    assert main(["results", "--store", store, "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["toy_held_out"][0]["error_a"] == pytest.approx(errs["error_a"])
    assert doc["rows"] == []  # the toy's evaluation is not an ImageNet-C one
    assert main(["results", "--store", store]) == 0
    assert "Toy held-out" in capsys.readouterr().out
    assert main(["results", "--store", store, "--runs", "--results-format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert {(r["benchmark"], r["condition"], r["status"]) for r in runs} == {
        ("toy-held-out", "a", "complete"), ("toy-held-out", "b", "complete")}
    assert main(["report", "--store", store, "--out", str(tmp_path / "r.html"), "--no-gallery"]) == 0
    assert "Toy held-out" in (tmp_path / "r.html").read_text(encoding="utf-8")
    assert main(["list", "benchmarks", "--results-format", "json"]) == 0
    assert "toy-held-out" in [d["name"] for d in json.loads(capsys.readouterr().out)]


def test_evaluate_help_for_one_benchmark_lists_its_options_only(
    toy_registered: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", "--benchmark", "toy-held-out", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--contrast" in out and "--seed" in out and "--severities" not in out and "--perturbations" not in out
    assert "--store" in out and "--batch-size" in out
    assert main(["evaluate", "--benchmark", "imagenet-p", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--perturbations" in out and "--contrast" not in out and "--severities" not in out
    assert main(["evaluate", "--help"]) == 0  # every declared option, with the benchmarks declaring it
    out = capsys.readouterr().out
    assert "--contrast" in out and "--perturbations" in out and "--severities" in out


def test_entry_points_are_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from shiftbench.benchmarks import BENCHMARKS

    ns = doc_example()
    BENCHMARKS.unregister("toy-held-out")

    class EP:
        name = "toy-ep"
        value = "toy:ToyEP"

        def load(self) -> Any:
            return type("ToyEP", (ns["ToyHeldOut"],), {"name": "toy-ep"})

    seen: list[str] = []

    def eps(group: str) -> list[EP]:
        seen.append(group)
        return [EP()]

    monkeypatch.setattr(BENCHMARKS, "_loaded", False)
    monkeypatch.setattr(importlib.metadata, "entry_points", eps)
    try:
        assert "toy-ep" in list_benchmarks() and seen == ["shiftbench.benchmarks"]
    finally:
        BENCHMARKS.unregister("toy-ep")


def test_register_benchmark_refuses_bad_declarations() -> None:
    ns = doc_example()
    toy = ns["ToyHeldOut"]
    try:
        with pytest.raises(InvalidArgumentError, match="Settings"):
            register_benchmark(type("Bad", (toy,), {"name": "bad-opts", "Settings": dict}))
        with pytest.raises(InvalidArgumentError, match="name"):
            register_benchmark(type("Bad", (toy,), {"name": "Has Space"}))
        with pytest.raises(InvalidArgumentError):
            register_benchmark(object())  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="replace=True"):
            register_benchmark(type("Other", (toy,), {"name": "imagenet-c"}))
        with pytest.raises(UnknownNameError, match="imagenet-d"):
            get_benchmark("imagenet_d2")
    finally:
        from shiftbench.benchmarks import BENCHMARKS

        BENCHMARKS.unregister("toy-held-out")


def test_settings_check_their_fields_and_refuse_undeclared_options() -> None:
    s = get_benchmark("imagenet-c").settings(severities="1,3", seed=2)
    assert (s.severities, s.seed, s.baseline, s.clean) == ("1,3", 2, "alexnet", True)
    with pytest.raises(InvalidArgumentError, match="seed"):
        get_benchmark("imagenet-c").settings(seed=-1)
    with pytest.raises(InvalidArgumentError, match="seed"):
        get_benchmark("imagenet-c").settings(seed=True)
    with pytest.raises(InvalidArgumentError, match="bad_images"):
        get_benchmark("imagenet-c").settings(bad_images="ignore")
    with pytest.raises(InvalidArgumentError, match="perturbations") as e:
        get_benchmark("imagenet-c").settings(perturbations="rotate")
    assert "an option of imagenet-c" in str(e.value)


# -- contracts generated from the registry ----------------------------------------------------------


@pytest.mark.parametrize("name", list_benchmarks())
def test_every_benchmark_declares_itself(name: str) -> None:
    b = get_benchmark(name)
    d = b.describe()
    assert d["name"] == name and all(d[k] for k in ("title", "measures", "conditions", "sources", "records"))
    assert issubclass(b.Settings, Settings) and isinstance(b, Benchmark)
    for spec in b.Settings.specs():  # every option has help and a default of its declared type
        assert spec.help, (name, spec.name)
        assert spec.check(spec.default) == spec.default, (name, spec.name)


@pytest.mark.parametrize(
    ("name", "option"),
    [(n, o) for n in list_benchmarks() for o in declared_options() if not get_benchmark(n).accepts(o)],
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
