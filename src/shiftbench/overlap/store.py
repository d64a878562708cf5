"""SQLite tables of the overlap study (all prefixed ``overlap_``).

They can live in their own file (the default of a study: ``<output>/overlap.sqlite``)
or next to the evaluation tables in the results store: every table is created with
``CREATE TABLE IF NOT EXISTS`` and none of the evaluation's tables is touched. They are
a training study's bookkeeping (and saved benchmarks); ImageNet-NOC's evaluations are
stored by :class:`shiftbench.evaluation.store.ResultsStore` like every benchmark's.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from .scores import AccuracyMatrix

__all__ = ["OverlapStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS overlap_studies (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS overlap_models (
    study_id INTEGER NOT NULL REFERENCES overlap_studies(id),
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    epochs_done INTEGER NOT NULL DEFAULT 0,
    epochs INTEGER NOT NULL,
    checkpoint TEXT,
    seconds REAL NOT NULL DEFAULT 0,
    train_loss REAL,
    train_accuracy REAL,
    updated REAL NOT NULL,
    PRIMARY KEY (study_id, model)
);
CREATE TABLE IF NOT EXISTS overlap_accuracy (
    study_id INTEGER NOT NULL REFERENCES overlap_studies(id),
    model TEXT NOT NULL,
    test TEXT NOT NULL,
    n_correct INTEGER NOT NULL,
    n_total INTEGER NOT NULL,
    PRIMARY KEY (study_id, model, test)
);
CREATE TABLE IF NOT EXISTS overlap_analyses (
    study_id INTEGER NOT NULL REFERENCES overlap_studies(id),
    kind TEXT NOT NULL,
    doc TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (study_id, kind)
);
CREATE TABLE IF NOT EXISTS overlap_calibrations (
    corruption TEXT NOT NULL,
    model TEXT NOT NULL,
    doc TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (corruption, model)
);
CREATE TABLE IF NOT EXISTS overlap_benchmarks (
    name TEXT PRIMARY KEY,
    doc TEXT NOT NULL,
    created REAL NOT NULL
);
"""


class OverlapStore:
    """The overlap study's tables in one SQLite file."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        """Open (and, unless ``readonly``, create) the study tables in ``path``.

        ``readonly``: the file must exist and hold the study tables; it is opened with SQLite's ``mode=ro`` and
        never changed (``select`` without ``--save``, ``report --study``).

        Raises:
            DataError: not an SQLite file, damaged, a trigger or a view among the study tables, or (read-only) no
                study tables.
        """
        self.path = Path(path)
        self.readonly = readonly
        try:
            if readonly:
                from urllib.parse import quote

                if not self.path.is_file():
                    raise DataError(f"{str(self.path)!r} does not exist: expected the overlap.sqlite of a study")
                uri = "file:" + quote(str(self.path.absolute()))
                # at rest (no -wal: no writer connected) immutable, so that reading leaves no WAL files behind
                at_rest = not Path(str(self.path) + "-wal").exists()
                try:
                    self.db = sqlite3.connect(uri + ("?mode=ro&immutable=1" if at_rest else "?mode=ro"), uri=True,
                                              timeout=60)  # fmt: skip
                    self.db.execute("SELECT 1 FROM sqlite_master").fetchall()
                except sqlite3.OperationalError:
                    self.db = sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, timeout=60)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.db = sqlite3.connect(str(self.path), timeout=60)
            self._check(readonly)
            if not readonly:
                self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as e:
            if hasattr(self, "db"):
                self.db.close()
            raise DataError(f"{str(self.path)!r} is not a usable SQLite store: {e}") from None
        except DataError:
            if hasattr(self, "db"):
                self.db.close()
            raise

    def _check(self, readonly: bool) -> None:
        """Refuse triggers, views in place of the study tables and (read-only) a file without them."""
        master = self.db.execute("SELECT type, name FROM sqlite_master").fetchall()
        triggers = sorted(n for t, n in master if t == "trigger")
        if triggers:
            raise DataError(f"{str(self.path)!r} holds trigger(s) {', '.join(map(repr, triggers[:5]))}, which "
                            "shiftbench never creates: not used")  # fmt: skip
        views = sorted(n for t, n in master if t == "view" and n.startswith("overlap_"))
        if views:
            raise DataError(f"{str(self.path)!r}: {views[0]!r} is a view, not a table; not a store shiftbench wrote")
        if readonly and not any(t == "table" and n == "overlap_studies" for t, n in master):
            raise DataError(f"{str(self.path)!r} holds no overlap study tables (overlap_studies): not the "
                            "overlap.sqlite of a study")  # fmt: skip

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> OverlapStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # studies and models ------------------------------------------------------------------------

    def study(self, name: str, config: dict[str, Any]) -> int:
        """Id of the study ``name``; created with ``config`` if new."""
        row = self.db.execute("SELECT id FROM overlap_studies WHERE name = ?", (name,)).fetchone()
        if row:
            return int(row[0])
        with self.db:
            cur = self.db.execute(
                "INSERT INTO overlap_studies (name, config, created) VALUES (?, ?, ?)",
                (name, json.dumps(config, sort_keys=True), time.time()),
            )
        return int(cur.lastrowid or 0)

    def study_config(self, study_id: int) -> dict[str, Any]:
        row = self.db.execute("SELECT config FROM overlap_studies WHERE id = ?", (study_id,)).fetchone()
        return json.loads(row[0]) if row else {}

    def studies(self) -> list[tuple[int, str]]:
        return [(int(i), str(n)) for i, n in self.db.execute("SELECT id, name FROM overlap_studies ORDER BY id")]

    def model_state(self, study_id: int, model: str) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT status, epochs_done, epochs, checkpoint, seconds, train_loss, train_accuracy "
            "FROM overlap_models WHERE study_id = ? AND model = ?",
            (study_id, model),
        ).fetchone()
        if row is None:
            return None
        keys = ("status", "epochs_done", "epochs", "checkpoint", "seconds", "train_loss", "train_accuracy")
        return dict(zip(keys, row))

    def set_model_state(
        self,
        study_id: int,
        model: str,
        *,
        status: str,
        epochs_done: int,
        epochs: int,
        checkpoint: str | None,
        seconds: float,
        train_loss: float | None = None,
        train_accuracy: float | None = None,
    ) -> None:
        with self.db:
            self.db.execute(
                "INSERT INTO overlap_models (study_id, model, status, epochs_done, epochs, checkpoint, seconds, "
                "train_loss, train_accuracy, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(study_id, model) DO UPDATE SET status=excluded.status, epochs_done=excluded.epochs_done, "
                "epochs=excluded.epochs, checkpoint=excluded.checkpoint, seconds=excluded.seconds, "
                "train_loss=excluded.train_loss, train_accuracy=excluded.train_accuracy, updated=excluded.updated",
                (
                    study_id,
                    model,
                    status,
                    epochs_done,
                    epochs,
                    checkpoint,
                    seconds,
                    train_loss,
                    train_accuracy,
                    time.time(),
                ),
            )

    def models(self, study_id: int) -> dict[str, dict[str, Any]]:
        out = {}
        for (m,) in self.db.execute("SELECT model FROM overlap_models WHERE study_id = ? ORDER BY rowid", (study_id,)):
            st = self.model_state(study_id, m)
            assert st is not None
            out[str(m)] = st
        return out

    # accuracy matrix ---------------------------------------------------------------------------

    def put_accuracy(self, study_id: int, model: str, test: str, n_correct: int, n_total: int) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO overlap_accuracy (study_id, model, test, n_correct, n_total) VALUES (?, ?, ?, ?, ?)",
                (study_id, model, test, int(n_correct), int(n_total)),
            )

    def has_accuracy(self, study_id: int, model: str, test: str) -> bool:
        return (
            self.db.execute(
                "SELECT 1 FROM overlap_accuracy WHERE study_id = ? AND model = ? AND test = ?", (study_id, model, test)
            ).fetchone()
            is not None
        )

    def delete_accuracy(self, study_id: int, model: str) -> None:
        with self.db:
            self.db.execute("DELETE FROM overlap_accuracy WHERE study_id = ? AND model = ?", (study_id, model))

    def accuracy_matrix(
        self, study_id: int, models: Sequence[str] | None = None, tests: Sequence[str] | None = None
    ) -> AccuracyMatrix:
        """The stored accuracies as an :class:`AccuracyMatrix` (every model x every test must be present)."""
        rows = list(
            self.db.execute(
                "SELECT model, test, n_correct, n_total FROM overlap_accuracy WHERE study_id = ?", (study_id,)
            )
        )
        acc: dict[str, dict[str, float]] = {}
        for m, t, c, n in rows:
            acc.setdefault(str(m), {})[str(t)] = c / n if n else 0.0
        ms = list(models) if models is not None else list(acc)
        ts = list(tests) if tests is not None else sorted({t for v in acc.values() for t in v})
        missing = [f"{m} x {t}" for m in ms for t in ts if t not in acc.get(m, {})]
        if missing:
            raise DataError(
                f"the accuracy matrix of study {study_id} in {str(self.path)!r} is incomplete: {len(missing)} entries "
                f"missing ({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); run the study to completion"
            )
        return AccuracyMatrix(ms, ts, np.asarray([[acc[m][t] for t in ts] for m in ms], dtype=np.float64))

    # analyses and calibrations ----------------------------------------------------------------

    def put_analysis(self, study_id: int, kind: str, doc: dict[str, Any]) -> None:
        """Store one analysis of a study (``balance``, ``coverage``, ``mean_overlap``...), replacing the last one."""
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO overlap_analyses (study_id, kind, doc, updated) VALUES (?, ?, ?, ?)",
                (study_id, kind, json.dumps(doc, sort_keys=True), time.time()),
            )

    def analyses(self, study_id: int) -> dict[str, Any]:
        rows = self.db.execute("SELECT kind, doc FROM overlap_analyses WHERE study_id = ? ORDER BY kind", (study_id,))
        return {str(k): json.loads(d) for k, d in rows}

    def put_calibration(self, corruption: str, model: str, doc: dict[str, Any]) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO overlap_calibrations (corruption, model, doc, updated) VALUES (?, ?, ?, ?)",
                (corruption, model, json.dumps(doc, sort_keys=True), time.time()),
            )

    def calibration(self, corruption: str, model: str) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT doc FROM overlap_calibrations WHERE corruption = ? AND model = ?", (corruption, model)
        ).fetchone()
        return json.loads(row[0]) if row else None

    # saved benchmarks --------------------------------------------------------------------------

    def save_benchmark(self, name: str, doc: dict[str, Any]) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO overlap_benchmarks (name, doc, created) VALUES (?, ?, ?)",
                (name, json.dumps(doc, sort_keys=True), time.time()),
            )

    def benchmark(self, name: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT doc FROM overlap_benchmarks WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else None

    def benchmarks(self) -> list[str]:
        return [str(n) for (n,) in self.db.execute("SELECT name FROM overlap_benchmarks ORDER BY name")]

