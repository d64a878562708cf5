"""Stores that cannot lie: a results store or overlap-study file that is not what shiftbench wrote is refused with one
line naming the file, and commands that only read a store never change it."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from shiftbench.cli import main
from shiftbench.evaluation.errors import StoreError
from shiftbench.evaluation.store import ResultsStore

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "stores"


def _store(tmp_path: Path, name: str = "v3_all.sqlite") -> Path:
    dst = tmp_path / "s.sqlite"
    shutil.copyfile(FIXTURES / name, dst)
    with ResultsStore(dst):  # upgraded to this release's schema on disk
        pass
    return dst


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def _sql(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path)
    for st in statements:
        db.execute(st)
    db.commit()
    db.close()


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str], codes: tuple[int, ...] = (1, 2)) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc in codes and len(lines) == 1 and "Traceback" not in err, (rc, err)
    return lines[0]


TAMPERING = {
    "trigger-marks-every-record-correct": (
        "CREATE TRIGGER lie AFTER INSERT ON records BEGIN UPDATE records SET correct=1 WHERE run_id=NEW.run_id; END",
        "trigger",
    ),
    "trigger-aborts-inserts": ("CREATE TRIGGER stop BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'no'); END", "trigger"),
    "view-instead-of-table": ("ALTER TABLE runs RENAME TO runs_real; CREATE VIEW runs AS SELECT * FROM runs_real", "view"),
    "options-not-json": ("UPDATE evaluations SET options='{not json'", "not JSON"),
    "classes-not-json": ("UPDATE sources SET classes='[1,2'", "not JSON"),
    "text-in-level": ("UPDATE runs SET level='high' WHERE id=(SELECT MIN(id) FROM runs)", "not an integer"),
    "text-in-label": ("UPDATE records SET label='cat' WHERE item=(SELECT MIN(item) FROM records)", "not an integer"),
    "seed-not-a-number": ("UPDATE evaluations SET seed='abc'", "not a seed"),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_tampered_store_is_refused_by_every_command_in_one_line(tmp_path: Path, capsys, case: str) -> None:
    store = _store(tmp_path)
    sql, match = TAMPERING[case]
    db = sqlite3.connect(store)
    db.executescript(sql.replace("; CREATE", ";\nCREATE") + ";")
    db.close()
    before = _tree(tmp_path)
    with pytest.raises(StoreError, match=match):
        ResultsStore(store)
    with pytest.raises(StoreError, match=match):
        ResultsStore(store, create=False)
    line = _one_line(capsys, ["results", "--store", str(store)])
    assert "s.sqlite" in line and match in line
    assert _tree(tmp_path) == before


def test_evaluate_refuses_a_store_with_a_planted_trigger(tmp_path: Path) -> None:
    from shiftbench.evaluation import imagenet_wnids

    from ._eval_toys import evaluate_c as evaluate
    from ._eval_toys import released_tree, toy_classifier

    root = released_tree(tmp_path / "C", ["fog"], [1], list(imagenet_wnids()[:2]), n=2, size=64)
    store = tmp_path / "s.sqlite"
    ResultsStore(store).close()
    _sql(store, "CREATE TRIGGER lie AFTER INSERT ON records BEGIN UPDATE records SET correct=1; END")
    with pytest.raises(StoreError, match="trigger"):
        evaluate(toy_classifier(), released=root, corruptions="fog", severities="1", store=store)


def test_damaged_store_file_is_one_line(tmp_path: Path, capsys) -> None:
    store = _store(tmp_path)
    raw = bytearray(store.read_bytes())
    raw[100:4096] = b"\xa5" * (4096 - 100)  # the schema page overwritten
    store.write_bytes(bytes(raw))
    before = _tree(tmp_path)
    line = _one_line(capsys, ["results", "--store", str(store)])
    assert "s.sqlite" in line
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("argv", [["results"], ["results", "--runs"], ["results", "--results-format", "json"]])
def test_read_commands_change_nothing_on_disk(tmp_path: Path, capsys, argv: list[str]) -> None:
    store = _store(tmp_path)
    before = _tree(tmp_path)
    assert main([*argv, "--store", str(store)]) == 0
    capsys.readouterr()
    assert _tree(tmp_path) == before  # no -wal/-shm left, no table created, no upgrade written


def test_reading_an_older_store_upgrades_only_in_memory(tmp_path: Path, capsys) -> None:
    store = tmp_path / "s.sqlite"
    shutil.copyfile(FIXTURES / "v2_all.sqlite", store)
    before = _tree(tmp_path)
    assert main(["results", "--store", str(store), "--results-format", "json"]) == 0
    assert "imagenet_p" in capsys.readouterr().out
    assert _tree(tmp_path) == before


def test_read_commands_on_an_empty_file_create_no_tables(tmp_path: Path, capsys) -> None:
    store = tmp_path / "empty.sqlite"
    store.write_bytes(b"")
    line = _one_line(capsys, ["results", "--store", str(store)])
    assert "empty" in line and store.read_bytes() == b"" and _tree(tmp_path) == {"empty.sqlite": _tree(tmp_path)["empty.sqlite"]}


def test_read_commands_in_a_read_only_folder(tmp_path: Path, capsys) -> None:
    store = _store(tmp_path)
    folder = tmp_path
    folder.chmod(0o555)
    try:
        assert main(["results", "--store", str(store)]) == 0
    finally:
        folder.chmod(0o755)
    capsys.readouterr()


def test_results_for_an_evaluation_that_is_not_stored_is_an_error(tmp_path: Path, capsys) -> None:
    store = _store(tmp_path)
    line = _one_line(capsys, ["results", "--store", str(store), "--evaluation", "999"], codes=(2,))
    assert "999" in line


def test_overlap_study_readers_create_nothing_in_a_results_store(tmp_path: Path, capsys) -> None:
    store = _store(tmp_path)
    before = _tree(tmp_path)
    line = _one_line(capsys, ["select", "--store", str(store), "--thresholds", "0.1"])
    assert "overlap" in line
    assert _tree(tmp_path) == before
    empty = tmp_path / "zero.sqlite"
    empty.write_bytes(b"")
    _one_line(capsys, ["select", "--store", str(empty), "--thresholds", "0.1"])
    assert empty.read_bytes() == b""


@pytest.mark.parametrize("seed", [2**63 - 1, 2**63, 9223372036854775808, 2**64 - 1])
def test_seeds_up_to_2_64_minus_1_are_stored_exactly(tmp_path: Path, seed: int) -> None:
    with ResultsStore(tmp_path / "s.sqlite") as db:
        m = db.register_model("m", "m", "c", {})
        s = db.register_source("k", "s", "l", ["a"], {})
        ls = db.register_label_space("d", "model", ["a"])
        ev = db.register_evaluation(m, s, "imagenet-c", "224", seed, False, ls)
        other = db.register_evaluation(m, s, "imagenet-c", "224", seed - 1, False, ls)
        assert ev != other and db.register_evaluation(m, s, "imagenet-c", "224", seed, False, ls) == ev
    with ResultsStore(tmp_path / "s.sqlite", create=False) as db:
        assert {e.id: e.seed for e in db.evaluations()} == {ev: seed, other: seed - 1}


@pytest.mark.parametrize("seed", [2**64, -2, 1.5, True])
def test_seeds_outside_0_to_2_64_minus_1_are_refused(tmp_path: Path, seed: object) -> None:
    from shiftbench.errors import InvalidArgumentError

    with ResultsStore(tmp_path / "s.sqlite") as db:
        m = db.register_model("m", "m", "c", {})
        s = db.register_source("k", "s", "l", ["a"], {})
        ls = db.register_label_space("d", "model", ["a"])
        with pytest.raises(InvalidArgumentError, match="seed"):
            db.register_evaluation(m, s, "imagenet-c", "224", seed, False, ls)  # type: ignore[arg-type]


@pytest.mark.parametrize("bench, extra", [
    ("imagenet-c", ["--corruptions", "contrast", "--severities", "1", "--edition", "64"]),
    ("imagenet-p", ["--perturbations", "brightness", "--difficulties", "1", "--edition", "32"]),
    ("imagenet-noc", ["--corruptions", "noc_hue"]),
])  # fmt: skip
def test_evaluate_with_a_seed_beyond_2_63_is_stored_exactly(tmp_path: Path, capsys, bench: str, extra: list[str]) -> None:
    """``evaluate --seed 9223372036854775808`` (inside corrupt()'s 0..2**64-1) was an OverflowError from SQLite."""
    from shiftbench.evaluation.models import MODEL_SOURCES, register_model_source

    from ._eval_toys import image_folder, toy_classifier

    register_model_source("toyseed", lambda name, weights: toy_classifier("toyseed"))
    try:
        data = image_folder(tmp_path / "data", n_per_class=1, n_classes=2)
        store = tmp_path / "s.sqlite"
        rc = main(["evaluate", "--benchmark", bench, "--model", "toyseed:a", "--data", str(data), "--store", str(store),
                   "--seed", "9223372036854775808", "--no-progress", "--limit", "1", *extra])  # fmt: skip
        err = capsys.readouterr().err
        assert rc == 0 and "Traceback" not in err, err
        with ResultsStore(store, create=False) as db:
            assert [e.seed for e in db.evaluations()] == [9223372036854775808]
    finally:
        MODEL_SOURCES.unregister("toyseed")


@pytest.mark.parametrize(
    ("baseline", "doc", "says"),
    [
        ("abc", None, "allowed one of"),
        ("eval:abc", None, "numeric id"),
        ("eval:-1", None, "id of a stored evaluation"),
        ("base.json", '{"format": "shiftbench-baseline/1", "name": "x", "clean_error": "abc", "errors": {"fog": ["a", 0.1, 0.2, 0.3, 0.4]}}', "malformed"),
        ("base.json", '{"format": "shiftbench-baseline/1", "name": "x", "clean_error": 0.5, "errors": {"fog": [NaN, 0.1, 0.2, 0.3, 0.4]}}', "error nan"),
    ],
    ids=["name", "eval-text", "eval-negative", "json-text-errors", "json-nan"],
)
def test_results_with_a_non_numeric_baseline_is_one_line(tmp_path: Path, capsys, baseline: str, doc: str | None, says: str) -> None:
    store = _store(tmp_path)
    if doc is not None:
        (tmp_path / baseline).write_text(doc, encoding="utf-8")
        baseline = str(tmp_path / baseline)
    before = _tree(tmp_path)
    line = _one_line(capsys, ["results", "--store", str(store), "--baseline", baseline])
    assert says in line and "baseline" in line
    assert _tree(tmp_path) == before  # a read command
