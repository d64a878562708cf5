"""What schema 3 of the results store costs: migrating a schema-2 store, and a toy ImageNet-C evaluation.

1. ``migration``: the schema-2 fixture (``tests/fixtures/stores/v2_all.sqlite``) grown with
   synthetic rows in every old layout (``--rows`` ImageNet-C predictions, a tenth as many
   ImageNet-D predictions and ImageNet-NOC flags, a hundredth as many ImageNet-P videos of 31
   frames), then opened with :class:`ResultsStore` (which migrates it to schema 3), timed over
   ``--repeats`` fresh copies. The row counts after the upgrade are checked against before.
2. ``evaluate``: a toy ImageNet-C evaluation (the ColourNet of ``tests/_eval_toys.py`` on
   photos of the shared sample set, four corruptions x five severities, a new store each time)
   with the code of ``--old`` (a git revision, extracted to a temporary folder) and of this
   checkout, alternated in one run in separate processes; only the ``evaluate`` call is timed.

The machine may be shared: the fastest pass and the median of each are reported, with the
load average before and after. Run::

    python perf/store_migration.py --json perf/results/store_migration.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "stores" / "v2_all.sqlite"

CHILD = r"""
import sys, time, tempfile
from pathlib import Path
sys.path.insert(0, {repo!r})
from tests._eval_toys import image_folder, toy_classifier
try:
    from shiftbench.evaluation import evaluate  # releases before shiftbench.evaluate(model, benchmark=...)
except ImportError:
    import shiftbench

    def evaluate(clf, **kw):
        return shiftbench.evaluate(clf, "imagenet-c", **kw)
with tempfile.TemporaryDirectory() as t:
    data = image_folder(Path(t) / "data", n_per_class=8, n_classes=2)
    clf = toy_classifier("toy")
    t0 = time.perf_counter()
    evaluate(clf, data=data, corruptions="gaussian_noise,contrast,brightness,jpeg_compression",
             severities="1-5", store=Path(t) / "s.sqlite", batch_size=8, baseline="none")
    print(time.perf_counter() - t0)
"""


def grow(path: Path, n: int) -> dict[str, int]:
    """Add synthetic rows to a copy of the schema-2 fixture; returns the row counts per old table."""
    db = sqlite3.connect(path)
    runs = [r[0] for r in db.execute("SELECT id FROM runs ORDER BY id")]
    db.executemany(
        "INSERT INTO predictions VALUES(?,?,?,?,?,?,?,?)",
        ((runs[i % len(runs)], f"synthetic/{i:07d}.JPEG", i % 1000, (i * 7) % 1000, 1, 2, 3, 4) for i in range(n)),
    )
    p_runs = [r[0] for r in db.execute("SELECT id FROM p_runs ORDER BY id")]
    blob = bytes(31 * 5 * 2)
    db.executemany(
        "INSERT INTO p_videos VALUES(?,?,?,?,NULL)",
        ((p_runs[i % len(p_runs)], f"synthetic/{i:06d}", i % 1000, blob) for i in range(n // 100)),
    )
    d_eval = db.execute("SELECT MIN(id) FROM imagenet_d_evaluations").fetchone()[0]
    db.executemany(
        "INSERT INTO imagenet_d_predictions VALUES(?,?,?,?,?,?,?,?,?)",
        ((d_eval, ("real", "sketch", "clipart")[i % 3], f"synthetic/{i:06d}.jpg", i % 345, i % 1000, 1, 2, 3, 4)
         for i in range(n // 10)),
    )  # fmt: skip
    noc_eval = db.execute("SELECT MIN(id) FROM overlap_noc_evals").fetchone()[0]
    db.executemany(
        "INSERT INTO overlap_noc_predictions VALUES(?,?,?,?)",
        ((noc_eval, ("clean", "noc_blur")[i % 2], f"synthetic/{i:06d}", i % 2) for i in range(n // 10)),
    )
    db.commit()
    counts = {
        t: int(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
        for t in ("predictions", "skipped", "p_videos", "imagenet_d_predictions", "imagenet_d_skipped",
                  "overlap_noc_predictions")
    }  # fmt: skip
    db.close()
    return counts


def time_migration(n: int, repeats: int) -> dict[str, Any]:
    from shiftbench.evaluation.store import ResultsStore

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base.sqlite"
        shutil.copyfile(FIXTURE, base)
        counts = grow(base, n)
        size = base.stat().st_size
        times = []
        for _ in range(repeats):
            p = Path(tmp) / "s.sqlite"
            for q in Path(tmp).glob("s.sqlite*"):
                q.unlink()
            shutil.copyfile(base, p)
            t0 = time.perf_counter()
            ResultsStore(p, create=False).close()
            times.append(time.perf_counter() - t0)
        db = sqlite3.connect(p)
        records = int(db.execute("SELECT COUNT(*) FROM records").fetchone()[0])
        db.close()
    assert records == sum(counts.values()), (records, counts)
    return {
        "old_rows": counts,
        "records_after": records,
        "store_mib": round(size / 2**20, 1),
        "seconds_min": round(min(times), 3),
        "seconds_median": round(statistics.median(times), 3),
        "repeats": repeats,
    }


def time_evaluate(old: str, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        old_src = Path(tmp) / "old"
        old_src.mkdir()
        tar = subprocess.run(["git", "-C", str(REPO), "archive", old, "src"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old_src)], input=tar, check=True)
        code = CHILD.format(repo=str(REPO))
        out: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(repeats):
            for which, src in (("old", old_src / "src"), ("new", REPO / "src")):
                env = {**os.environ, "PYTHONPATH": str(src)}
                r = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
                out[which].append(float(r.stdout.strip().splitlines()[-1]))
    return {
        "old_revision": old,
        "images_x_conditions": "16 photos x (clean + 4 corruptions x 5 severities)",
        **{f"{k}_seconds_min": round(min(v), 3) for k, v in out.items()},
        **{f"{k}_seconds_median": round(statistics.median(v), 3) for k, v in out.items()},
        "new_over_old_median": round(statistics.median(out["new"]) / statistics.median(out["old"]), 3),
        "repeats": repeats,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000, help="synthetic ImageNet-C prediction rows")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--old", default="7d52301", help="git revision of the schema-2 code for the evaluate timing")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    load_before = os.getloadavg()[0]
    res = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, shared with other jobs",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "migration": time_migration(a.rows, a.repeats),
        "evaluate": time_evaluate(a.old, a.repeats),
        "load_average_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "note": "time inside ResultsStore during the toy evaluation, by cProfile: about 0.05 s with either schema",
    }
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
