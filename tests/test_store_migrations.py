"""Schema migrations of the results store: numbered steps, applied in order, each all or nothing.

The fixtures of ``tests/fixtures/stores`` were written by the releases named in
``make_fixtures.py``; ``v3_all.sqlite`` by this release. A schema-2 store (one
table layout per benchmark) upgraded to schema 3 (evaluations, runs, records)
keeps every row and lists the same results as a store written by this release.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from shiftbench.cli import main
from shiftbench.evaluation import store as S
from shiftbench.evaluation.errors import StoreSchemaError
from shiftbench.evaluation.store import SCHEMA_VERSION, ResultsStore

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "stores"
sys.path.insert(0, str(FIXTURES))
import make_fixtures as MF  # noqa: E402

V2_ROWS = json.loads((FIXTURES / "v2_rows.json").read_text())
OLD_TABLES = {"p_runs", "p_videos", "predictions", "skipped", "imagenet_d_evaluations", "imagenet_d_predictions",
              "imagenet_d_skipped", "overlap_noc_evals", "overlap_noc_predictions"}


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copyfile(FIXTURES / name, dst)
    return dst


def _tables(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        db.close()


_version = MF.schema_version


def _listing(store: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    """``shiftbench results`` as JSON without what names the file or the run (ids, labels, data paths)."""
    assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("evaluation", "label", "data", "store")}
        if isinstance(x, str) and x.startswith("Store: "):
            return "Store: <path>"
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return strip(doc)


def test_every_version_has_its_numbered_migration() -> None:
    assert SCHEMA_VERSION == 4
    assert sorted(S.MIGRATIONS) == list(range(1, SCHEMA_VERSION))


def test_version_2_store_moves_every_benchmark_into_one_layout(tmp_path: Path) -> None:
    store = _copy("v2_all.sqlite", tmp_path)
    assert _version(store) == 2 and OLD_TABLES - {"predictions", "skipped"} <= _tables(store)
    before = store.read_bytes()
    with ResultsStore(store, create=False) as db:  # opened for reading: upgraded in memory, the file unchanged
        assert [e.benchmark for e in db.evaluations()] == ["imagenet-c", "imagenet-p", "imagenet-d", "imagenet-noc"]
    assert store.read_bytes() == before and _version(store) == 2
    with ResultsStore(store) as db:
        evs = db.evaluations()
        assert [e.benchmark for e in evs] == ["imagenet-c", "imagenet-p", "imagenet-d", "imagenet-noc"]
        runs = {e.benchmark: db.runs(e.id) for e in evs}
        assert {r.frames for r in runs["imagenet-p"]} == {31} and {r.frames for r in runs["imagenet-c"]} == {1}
        assert all(r.status == "complete" and r.n_skipped == 0 for rs in runs.values() for r in rs)
        # ImageNet-D's rows: one run per domain, the mapping in the options
        assert sorted(r.condition for r in runs["imagenet-d"]) == sorted({row[0] for row in V2_ROWS["imagenet-d"]})
        assert set(evs[2].options) == {"mapping_digest", "label_classes"}
        # schema 2 did not judge ImageNet-D's top-1 (the mapping does, on reading): no top-1 error is made up
        assert all(r.n_unjudged == r.n_predicted and r.top1_error is None for r in runs["imagenet-d"])
        assert not any(r.n_unjudged for b in ("imagenet-c", "imagenet-p", "imagenet-noc") for r in runs[b])
        # ImageNet-NOC's rows: one run per condition with its right/wrong flags
        noc = {r.condition: (r.n_predicted, r.n_wrong) for r in runs["imagenet-noc"]}
        want: dict[str, list[int]] = {}
        for _bench, _seed, cond, _key, correct in V2_ROWS["imagenet-noc"]:
            want.setdefault(cond, []).append(correct)
        assert noc == {c: (len(v), v.count(0)) for c, v in want.items()}
        assert evs[3].options["benchmark"] == "imagenet-noc"
    assert _version(store) == SCHEMA_VERSION
    assert not (OLD_TABLES & _tables(store))
    assert MF.stored_rows(store) == V2_ROWS
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


def test_upgraded_store_lists_what_this_release_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The v2 fixture upgraded and the v3 fixture written by this release list the same results."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    v2 = _listing(shutil.copyfile(FIXTURES / "v2_all.sqlite", tmp_path / "a" / "s.sqlite"), capsys)
    v3 = _listing(shutil.copyfile(FIXTURES / "v3_all.sqlite", tmp_path / "b" / "s.sqlite"), capsys)
    assert set(v2) == set(v3) >= {"rows", "imagenet_p", "imagenet_d", "imagenet_noc"}
    for key in v3:
        assert v2[key] == v3[key], key


def test_version_3_fixture_opens_and_keeps_the_rows(tmp_path: Path) -> None:
    store = _copy("v3_all.sqlite", tmp_path)
    assert _version(store) == 3 and not (OLD_TABLES & _tables(store))
    with ResultsStore(store) as db:
        assert sorted(e.benchmark for e in db.evaluations()) == ["imagenet-c", "imagenet-d", "imagenet-noc",
                                                                 "imagenet-p"]
    assert MF.stored_rows(store) == V2_ROWS


def test_a_failed_migration_leaves_the_file_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _copy("v2_all.sqlite", tmp_path)
    before = (_tables(store), MF.stored_rows(store))
    real = S.MIGRATIONS[2]

    def fails_at_the_end(db: sqlite3.Connection) -> None:
        real(db)  # every table moved and dropped ...
        raise OSError("disk full")  # ... then the step fails: nothing of it may stay

    monkeypatch.setitem(S.MIGRATIONS, 2, fails_at_the_end)
    with pytest.raises(OSError, match="disk full"):
        ResultsStore(store)
    assert _version(store) == 2 and (_tables(store), MF.stored_rows(store)) == before
    monkeypatch.setitem(S.MIGRATIONS, 2, real)
    with ResultsStore(store) as db:  # and the real step still upgrades it
        assert len(db.evaluations()) == 4
    assert MF.stored_rows(store) == V2_ROWS


def test_version_1_store_goes_through_both_steps(tmp_path: Path) -> None:
    store = _copy("v1_imagenet_c.sqlite", tmp_path)
    with ResultsStore(store) as db:
        (ev,) = db.evaluations()
        assert ev.options == {} and len(db.runs(ev.id)) == 5 and db.p_runs(ev.id) == []
    assert _version(store) == SCHEMA_VERSION and not (OLD_TABLES & _tables(store))


def test_store_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    store = _copy("v3_all.sqlite", tmp_path)
    db = sqlite3.connect(store)
    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(StoreSchemaError):
        ResultsStore(store, create=False)
    assert _version(store) == SCHEMA_VERSION + 1


def test_a_file_imagenet_noc_wrote_alone_becomes_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Schema-2 ImageNet-NOC wrote only its ``overlap_`` tables (no store tables): opening imports them."""
    old = _copy("v2_all.sqlite", tmp_path)
    alone = tmp_path / "noc.sqlite"
    db = sqlite3.connect(alone)
    db.execute("ATTACH ? AS old", (str(old),))
    for t in ("overlap_noc_evals", "overlap_noc_predictions"):
        db.execute(f"CREATE TABLE {t} AS SELECT * FROM old.{t}")
    db.commit()
    db.close()
    with ResultsStore(alone) as rs:
        (ev,) = rs.evaluations()
        assert ev.benchmark == "imagenet-noc" and len(rs.runs(ev.id)) == 9
    assert MF.stored_rows(alone)["imagenet-noc"] == V2_ROWS["imagenet-noc"]
    assert main(["results", "--store", str(alone), "--results-format", "json"]) == 0
    (noc,) = json.loads(capsys.readouterr().out)["imagenet_noc"]
    assert noc["images"] == 2 and noc["mce"] is not None


def test_counts_of_a_run_without_records_are_zero(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "s.sqlite") as db:
        ev = db.register_evaluation(db.register_model("m", "m", "c", {}), db.register_source("k", "s", "l", ["a"], {}),
                                    "imagenet-c", "224", 0, False, db.register_label_space("d", "model", ["a"]))
        rid = db.register_run(ev, 1, "clean", 0, 2, {})
        (run,) = db.runs(ev)
        assert (run.n_predicted, run.n_wrong, run.n_skipped, run.top1_error) == (0, 0, 0, None)
        assert not db.finish_run(rid)
        db.write_batch(rid, ["x"], [0], [[0]], [("y", "unreadable")])
        (run,) = db.runs(ev)
        assert (run.n_predicted, run.n_wrong, run.n_skipped, run.top1_error) == (1, 0, 1, 0.0)
        assert db.finish_run(rid) and db.runs(ev)[0].status == "complete"


def test_exports_name_each_label_in_its_own_class_list(tmp_path: Path) -> None:
    """ImageNet-D labels are DomainNet classes (the data's), its predictions ImageNet classes (the label space)."""
    store = _copy("v3_all.sqlite", tmp_path)
    with ResultsStore(store, create=False) as db:
        rows = db.rows("predictions")
        (d,) = db.evaluations_of(["imagenet-d"])
        space = db.label_space_classes(d.id)
    d_rows = [r for r in rows if r["benchmark"] == "imagenet-d"]
    assert len(d_rows) == len(V2_ROWS["imagenet-d"])
    domainnet = {row[1]: row[1].split("/")[1] for row in V2_ROWS["imagenet-d"]}  # <domain>/<class>/<file>
    for r in d_rows:
        assert r["label_class"] == domainnet[r["image"]]
        assert r["top5_classes"].split() == [space[int(v)] for v in r["top5"].split()]
    c_rows = [r for r in rows if r["benchmark"] == "imagenet-c"]
    assert c_rows and all(r["label_class"] == space[r["label"]] for r in c_rows)  # the same 1000 ImageNet classes
