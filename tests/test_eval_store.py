"""The results store: resume after SIGKILL, schema versions, exports, stored baselines."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from shiftbench.errors import MissingDependencyError
from shiftbench.evaluation.errors import StoreError, StoreSchemaError
from shiftbench.evaluation.store import SCHEMA_VERSION, ResultsStore
from tests._eval_toys import evaluate_c as evaluate

from ._eval_toys import toy_classifier

REPO = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from tests._eval_toys import toy_classifier
    from tests._eval_toys import evaluate_c as evaluate

    class Slow:
        # The toy model plus a short pause per batch, so that a kill can land anywhere in the run.
        def __init__(self, clf):
            self.clf = clf
        def __call__(self, x):
            time.sleep(0.05)
            return self.clf.forward(x)

    class Lines:
        def start(self, total, description):
            print("start", total, flush=True)
        def advance(self, n, description):
            print("batch", n, flush=True)
        def stop(self):
            pass

    clf = toy_classifier("toy-resume")
    clf.forward = Slow(clf.forward)
    clf.checksum = "fixed-for-the-test"
    r = evaluate(clf, corruptions="gaussian_noise,contrast,jpeg_compression", severities="1-5", limit=6,
                 batch_size=2, store=sys.argv[1], progress=Lines())
    print("done", r.summary.mce, r.summary.relative_mce, flush=True)
    """
)


def _child(script: Path, store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )


def _rows(store: Path) -> dict[tuple[str, int], set[tuple]]:  # type: ignore[type-arg]
    db = sqlite3.connect(store)
    out: dict[tuple[str, int], set[tuple]] = {}  # type: ignore[type-arg]
    for rid, corr, sev in db.execute("SELECT id, condition, level FROM runs"):
        rows = db.execute(
            "SELECT item, label, top1, top2, top3, top4, top5 FROM records WHERE run_id=? AND skipped IS NULL", (rid,)
        ).fetchall()
        out[(corr, sev)] = set(rows)
        assert len(rows) == len(set(r[0] for r in rows))
    db.close()
    return out


def test_resume_after_sigkill_at_a_random_point(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    rnd = random.Random()
    seed = rnd.randrange(1 << 30)
    rnd.seed(seed)
    n_conditions, n_images, batch = 16, 6, 2
    n_batches = n_conditions * (n_images // batch)

    killed = tmp_path / "killed.sqlite"
    kill_after = rnd.randrange(1, n_batches - 8)
    with _child(script, killed) as proc:
        assert proc.stdout is not None
        seen = 0
        for line in proc.stdout:
            if line.startswith("batch"):
                seen += 1
                if seen >= kill_after:
                    break
        time.sleep(rnd.uniform(0.0, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"seed {seed}"

    partial = _rows(killed)
    stored = sum(len(v) for v in partial.values())
    assert 0 < stored < n_conditions * n_images, f"seed {seed}: kill after {kill_after} batches stored {stored}"
    with ResultsStore(killed) as db:
        assert all(r.status != "complete" or r.n_predicted == n_images for e in db.evaluations() for r in db.runs(e.id))

    resumed = subprocess.run([sys.executable, str(script), str(killed)], capture_output=True, text=True, cwd=REPO)
    assert resumed.returncode == 0, resumed.stderr
    fresh = tmp_path / "fresh.sqlite"
    straight = subprocess.run([sys.executable, str(script), str(fresh)], capture_output=True, text=True, cwd=REPO)
    assert straight.returncode == 0, straight.stderr

    a, b = _rows(killed), _rows(fresh)
    assert len(a) == n_conditions
    assert all(len(v) == n_images for v in a.values()), f"seed {seed}"
    assert a == b, f"seed {seed}"
    done_a = [ln for ln in resumed.stdout.splitlines() if ln.startswith("done")]
    done_b = [ln for ln in straight.stdout.splitlines() if ln.startswith("done")]
    assert done_a == done_b and done_a
    with ResultsStore(killed) as db:
        runs = [r for e in db.evaluations() for r in db.runs(e.id)]
        assert len(runs) == n_conditions and all(r.status == "complete" for r in runs)
        assert sum(r.n_predicted for r in runs) == n_conditions * n_images


def test_ctrl_c_keeps_stored_batches_and_the_rerun_completes(tmp_path: Path) -> None:
    class Interrupt:
        def __init__(self) -> None:
            self.n = 0

        def start(self, total: int, description: str) -> None:
            pass

        def advance(self, n: int, description: str) -> None:
            self.n += 1
            if self.n == 3:
                raise KeyboardInterrupt

        def stop(self) -> None:
            pass

    store = tmp_path / "s.sqlite"
    clf = toy_classifier()
    kw = dict(corruptions="contrast", severities="1,2", limit=4, batch_size=2, store=store)
    with pytest.raises(KeyboardInterrupt):
        evaluate(clf, progress=Interrupt(), **kw)  # type: ignore[arg-type]
    with ResultsStore(store) as db:
        runs = db.runs(db.evaluations()[0].id)
        assert sum(r.n_predicted for r in runs) == 6  # three stored batches of two
        assert not any(r.status == "complete" and r.n_predicted < 4 for r in runs)
    r = evaluate(clf, **kw)  # type: ignore[arg-type]
    assert r.new_predictions == 12 - 6
    assert all(run.status == "complete" and run.n_predicted == 4 for run in r.runs)


def test_store_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "s.sqlite"
    ResultsStore(p).close()
    db = sqlite3.connect(p)
    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(StoreSchemaError, match=rf"schema version {SCHEMA_VERSION + 1}.*up to {SCHEMA_VERSION}") as e:
        ResultsStore(p)
    assert e.value.found == SCHEMA_VERSION + 1 and str(p) in str(e.value)


def test_files_that_are_not_stores_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE x(a)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="not a shiftbench results store"):
        ResultsStore(other)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a usable SQLite results store"):
        ResultsStore(junk)
    with pytest.raises(StoreError, match="does not exist"):
        ResultsStore(tmp_path / "missing.sqlite", create=False)


def test_rows_are_unique_per_run_and_image(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "s.sqlite") as db:
        m = db.register_model("m", "m-id", "c", {})
        s = db.register_source("imagefolder", "src", "/x", ["a", "b"], {})
        ls = db.register_label_space("d", "model", ["a", "b"])
        e = db.register_evaluation(m, s, "imagenet-c", "224", 0, False, ls)
        assert db.register_evaluation(m, s, "imagenet-c", "224", 0, False, ls) == e
        r = db.register_run(e, s, "fog", 1, 2, {})
        db.write_batch(r, ["x", "y"], [0, 1], [[0, 1], [0, 1]])
        db.write_batch(r, ["x", "y"], [0, 1], [[1, 0], [1, 0]])  # a resumed batch: ignored, not duplicated
        assert db.done_keys(r) == {"x", "y"}
        assert db.finish_run(r)
        (info,) = db.runs(e)
        assert (info.n_predicted, info.n_wrong, info.status) == (2, 1, "complete")
        with pytest.raises(StoreError, match="expects 2 images"):
            db.register_run(e, s, "fog", 1, 3, {})
        other = db.register_source("imagefolder", "src2", "/y", ["a", "b"], {})
        with pytest.raises(StoreError, match=r"other data \(/x\)"):
            db.register_run(e, other, "fog", 1, 2, {})


def test_export_and_stored_baseline(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    kw = dict(corruptions="contrast,jpeg_compression", severities="1-5", limit=4, batch_size=4, store=store)
    evaluate(toy_classifier("toy-a", seed=1), **kw)  # type: ignore[arg-type]
    r = evaluate(toy_classifier("toy-b", seed=2), baseline="toy-a", **kw)  # type: ignore[arg-type]
    assert r.summary.baseline == "toy-a" and "evaluation 1" in (r.summary.baseline_source or "")
    self_ref = evaluate(toy_classifier("toy-a", seed=1), baseline="toy-a", **kw)  # type: ignore[arg-type]
    assert self_ref.new_predictions == 0
    assert all(s.ce == pytest.approx(1.0) for s in self_ref.summary.scores if s.ce is not None)

    with ResultsStore(store) as db:
        n = db.export(tmp_path / "runs.csv", table="runs")
        assert n == 2 * 11
        header = (tmp_path / "runs.csv").read_text().splitlines()[0].split(",")
        for col in (
            "model",
            "model_checksum",
            "data",
            "corruption",
            "severity",
            "seed",
            "edition",
            "release",
            "versions",
        ):
            assert col in header
        n = db.export(tmp_path / "preds.json", table="predictions", evaluation_id=1)
        recs = json.loads((tmp_path / "preds.json").read_text())
        assert n == len(recs) == 11 * 4
        assert {"image", "label", "label_class", "top1", "top5", "top5_classes"} <= set(recs[0])
        assert len(recs[0]["top5"].split()) == 5
        try:
            import pandas  # noqa: F401
        except ImportError:
            with pytest.raises(MissingDependencyError, match="pandas"):
                db.to_pandas()
        else:
            assert len(db.to_pandas("runs")) == 22


def test_markers_are_stored_replaced_and_removed_beside_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    with ResultsStore(path) as db:
        assert db.marker("sweep:abc") is None
        db.set_marker("sweep:abc", '{"evaluations": [1]}')
        db.set_marker("sweep:abc", '{"evaluations": [2]}')  # replaced, not duplicated
        db.set_marker("other", "x")
    with ResultsStore(path, create=False, readonly=False) as db:  # persisted, and the store still opens
        assert db.marker("sweep:abc") == '{"evaluations": [2]}' and db.marker("other") == "x"
        db.set_marker("other", None)
        assert db.marker("other") is None
    con = sqlite3.connect(path)
    keys = sorted(r[0] for r in con.execute("SELECT key FROM meta"))
    con.close()
    assert "marker:sweep:abc" in keys and "schema_version" in keys and "marker:other" not in keys
