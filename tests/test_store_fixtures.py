"""Stores written by earlier releases open, keep their results and are listed; toy runs store the same rows as before.

The fixtures in ``tests/fixtures/stores`` were written by
``tests/fixtures/stores/make_fixtures.py``: ``v1_imagenet_c.sqlite`` by the
last schema-1 release, ``v2_all.sqlite`` and ``v2_rows.json`` by the last
release before the benchmark registry (ImageNet-C, -P, -NOC and -D toy
evaluations in one store).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from shiftbench.cli import main
from shiftbench.evaluation.store import SCHEMA_VERSION, ResultsStore

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "stores"
sys.path.insert(0, str(FIXTURES))
import make_fixtures as MF  # noqa: E402

needs_foolbox = pytest.mark.skipif(
    importlib.util.find_spec("foolbox") is None, reason="ImageNet-NOC's default data ship in the foolbox wheel"
)


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copyfile(FIXTURES / name, dst)
    return dst


_version = MF.schema_version


def test_version_1_store_opens_keeps_its_predictions_and_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _copy("v1_imagenet_c.sqlite", tmp_path)
    assert _version(store) == 1
    with ResultsStore(store) as db:  # opened for writing: upgraded on disk
        (ev,) = db.evaluations()
        assert ev.benchmark == "imagenet-c" and ev.model == "toy"
        runs = db.runs(ev.id)
        assert {(r.corruption, r.severity) for r in runs} == {
            ("clean", 0), ("gaussian_noise", 1), ("gaussian_noise", 3), ("contrast", 1), ("contrast", 3)
        }
        assert all(r.status == "complete" and r.n_predicted == 4 for r in runs)
    assert _version(store) == SCHEMA_VERSION
    assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in doc["rows"]] == [f"toy #{ev.id}"]


def test_version_2_store_lists_every_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _copy("v2_all.sqlite", tmp_path)
    before = MF.stored_rows(store)
    assert main(["results", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    for title in (
        "by mFR: imagenet-p",
        "ImageNet-D leaderboard by mDE",
        "Leaderboard by mCE: imagenet-c",
        "Leaderboard by mCE: imagenet-noc",
    ):
        assert title in out
    assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"rows", "imagenet_p", "imagenet_d", "imagenet_noc"} <= set(doc)
    (noc,) = doc["imagenet_noc"]
    assert noc["model"] == "toy" and noc["images"] == 2 and len(noc["ce"]) == 8 and noc["mce"] is not None
    assert main(["results", "--store", str(store), "--results-format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("benchmark,") and {ln.split(",")[0] for ln in lines[1:]} == {
        "imagenet-c", "imagenet-p", "imagenet-noc", "imagenet-d:wordnet"  # the release before scored with WordNet's
    }
    assert MF.stored_rows(store) == before == json.loads((FIXTURES / "v2_rows.json").read_text())


@needs_foolbox
def test_toy_runs_store_the_same_rows_as_the_release_before(tmp_path: Path) -> None:
    """ImageNet-C, -P, -NOC and -D toy runs made now store exactly the rows the fixture recorded."""
    data = MF._folder(tmp_path / "data")
    store = tmp_path / "s.sqlite"
    MF.make_c(store, data)
    MF.make_p(store, data)
    MF.make_noc(store)
    MF.make_d(store, MF._d_tree(tmp_path / "DomainNet"))
    expected = json.loads((FIXTURES / "v2_rows.json").read_text())
    got = json.loads(json.dumps(MF.stored_rows(store)))
    for name in expected:
        assert got[name] == expected[name], name


@needs_foolbox
def test_one_store_holds_every_benchmark_whatever_writes_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ImageNet-NOC first, then ImageNet-C, -P and -D into the same file: one store, listed and exported."""
    data = MF._folder(tmp_path / "data")
    store = tmp_path / "one.sqlite"
    MF.make_noc(store)
    MF.make_c(store, data)  # schema 2 refused this file after ImageNet-NOC alone had written it
    MF.make_p(store, data)
    MF.make_d(store, MF._d_tree(tmp_path / "DomainNet"))
    db = sqlite3.connect(store)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    db.close()
    assert not {t for t in tables if t.startswith(("overlap_noc", "imagenet_d_", "p_"))}, tables
    with ResultsStore(store, create=False) as rs:
        assert [e.benchmark for e in rs.evaluations()] == ["imagenet-noc", "imagenet-c", "imagenet-p", "imagenet-d"]
    assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["rows"]) == len(doc["imagenet_p"]) == len(doc["imagenet_noc"]) == len(doc["imagenet_d"]) == 1
    assert main(["results", "--store", str(store), "--results-format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert {ln.split(",")[0] for ln in lines[1:]} == {"imagenet-c", "imagenet-p", "imagenet-noc", "imagenet-d:wordnet"}
    export = tmp_path / "runs.json"
    assert main(["results", "--store", str(store), "--export", str(export)]) == 0
    runs = json.loads(export.read_text())
    assert {r["benchmark"] for r in runs} == {"imagenet-c", "imagenet-noc", "imagenet-d"}  # videos: --table p_runs
    assert main(["results", "--store", str(store), "--export", str(export), "--table", "p_runs"]) == 0
    assert {r["benchmark"] for r in json.loads(export.read_text())} == {"imagenet-p"}
    expected = json.loads((FIXTURES / "v2_rows.json").read_text())
    assert json.loads(json.dumps(MF.stored_rows(store))) == expected
