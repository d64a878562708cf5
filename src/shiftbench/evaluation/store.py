"""The results store: an embedded SQLite database of runs and per-image predictions.

Layout (schema version 2)::

    meta(key, value)                          schema_version, created_by
    models(id, name, identity, checksum, details)       UNIQUE(identity, checksum)
    sources(id, kind, identity, location, classes, details)   UNIQUE(identity)
    label_spaces(id, digest, mode, classes)              UNIQUE(digest)
    evaluations(id, model_id, source_id, benchmark, edition, seed, release,
                label_space_id, created)                 UNIQUE(all but id, created)
    runs(id, evaluation_id, source_id, corruption, severity, n_expected, status,
         versions, error, created, updated, finished)  UNIQUE(evaluation_id, corruption, severity)
    predictions(run_id, image, label, top1, top2, top3, top4, top5)  PRIMARY KEY(run_id, image)
    skipped(run_id, image, reason)                      PRIMARY KEY(run_id, image)
    p_runs(id, evaluation_id, source_id, perturbation, level, frames, n_expected,
           status, versions, error, created, updated, finished)
                                                UNIQUE(evaluation_id, perturbation, level)
    p_videos(run_id, video, label, top5, skipped)        PRIMARY KEY(run_id, video)

An *evaluation* is one model on one dataset with fixed settings (benchmark,
edition, seed, release mode, label space); its *runs* are the conditions
(``clean``/severity 0, or a corruption and severity 1..5). Labels and
predictions are indices into the evaluation's label space. Each batch of
predictions is written in one transaction, and ``(run, image)`` is a primary
key, so a run interrupted at any point (Ctrl-C, ``kill -9``) resumes without
lost or duplicated rows. A run is marked ``complete`` only when every expected
image has a prediction or a recorded skip.

ImageNet-P evaluations (``benchmark = 'imagenet-p'``) keep their runs in
``p_runs``: one per perturbation and *level* (the data that is generated or
read: the noise difficulty for noise sequences, always 1 for temporal ones,
whose difficulties 2 and 3 are strides over the same frames). ``p_videos``
holds exactly one row per run and video: the label (-1 when the data has
none) and the top-5 classes of every frame (``top5``: T x 5 little-endian
uint16, or int32 for label spaces of 65 536 classes or more, row-major), or,
for a video that could not be read, NULL and the reason in ``skipped``. Every
ImageNet-P metric of every difficulty follows from these rows
(:mod:`shiftbench.perturbations.pipeline`).

Schema history: version 1 had no ``p_*`` tables; opening a version-1 store
adds them and records version 2 (old rows are untouched).
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, MissingDependencyError, UnknownNameError
from .errors import StoreError, StoreSchemaError
from .metrics import Baseline

__all__ = [
    "SCHEMA_VERSION",
    "ResultsStore",
    "EvaluationInfo",
    "RunInfo",
    "PRunInfo",
    "DEFAULT_STORE",
    "EXPORT_TABLES",
    "LOCK_WAIT_S",
    "check_store_path",
    "encode_top5",
    "decode_top5",
]

SCHEMA_VERSION = 2
DEFAULT_STORE = Path("shiftbench-workspace") / "results.sqlite"
EXPORT_TABLES = ("runs", "predictions", "p_runs", "p_videos")

LOCK_WAIT_S = 60.0
"""How long a write waits for another writer of the same store before it fails (``SHIFTBENCH_LOCK_WAIT`` overrides)."""

# Tables other parts of shiftbench keep in the same file (ImageNet-D, the overlap study and ImageNet-NOC).
_COMPANION_PREFIXES = ("imagenet_d_", "overlap_")


def check_store_path(path: str | Path, option: str = "--store") -> None:
    """Fail now (before any work) if a store cannot be created or written at ``path``.

    Raises:
        InvalidArgumentError: a folder, a read-only file, or no writable folder to create it in.
    """
    import os

    p = Path(path)
    if p.is_dir():
        raise InvalidArgumentError(option, str(path), "a database file path, not a folder")
    if p.exists():
        if not os.access(p, os.R_OK | os.W_OK):
            raise InvalidArgumentError(option, str(path), "a store this user can read and write", "Permission denied.")
        return
    anc = p.parent if str(p.parent) else Path(".")
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir() or not os.access(anc, os.W_OK | os.X_OK):
        raise InvalidArgumentError(
            option, str(path), "a path in a folder this user can write", f"{str(anc)!r} is not writable."
        )


def _lock_wait() -> float:
    import os

    try:
        return max(0.0, float(os.environ.get("SHIFTBENCH_LOCK_WAIT", LOCK_WAIT_S)))
    except ValueError:
        return LOCK_WAIT_S


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS models(
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    identity TEXT NOT NULL,
    checksum TEXT NOT NULL,
    details TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    UNIQUE(identity, checksum)
);
CREATE TABLE IF NOT EXISTS sources(
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    identity TEXT NOT NULL UNIQUE,
    location TEXT NOT NULL,
    classes TEXT NOT NULL,
    details TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS label_spaces(
    id INTEGER PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,
    mode TEXT NOT NULL,
    classes TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS evaluations(
    id INTEGER PRIMARY KEY,
    model_id INTEGER NOT NULL REFERENCES models(id),
    source_id INTEGER NOT NULL REFERENCES sources(id),
    benchmark TEXT NOT NULL,
    edition TEXT NOT NULL,
    seed INTEGER NOT NULL,
    release INTEGER NOT NULL,
    label_space_id INTEGER NOT NULL REFERENCES label_spaces(id),
    created REAL NOT NULL,
    UNIQUE(model_id, source_id, benchmark, edition, seed, release, label_space_id)
);
CREATE TABLE IF NOT EXISTS runs(
    id INTEGER PRIMARY KEY,
    evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
    source_id INTEGER NOT NULL REFERENCES sources(id),
    corruption TEXT NOT NULL,
    severity INTEGER NOT NULL,
    n_expected INTEGER NOT NULL,
    status TEXT NOT NULL CHECK(status IN ('running', 'complete', 'failed')),
    versions TEXT NOT NULL,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    finished REAL,
    UNIQUE(evaluation_id, corruption, severity)
);
CREATE TABLE IF NOT EXISTS predictions(
    run_id INTEGER NOT NULL REFERENCES runs(id),
    image TEXT NOT NULL,
    label INTEGER NOT NULL,
    top1 INTEGER NOT NULL,
    top2 INTEGER, top3 INTEGER, top4 INTEGER, top5 INTEGER,
    PRIMARY KEY(run_id, image)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS skipped(
    run_id INTEGER NOT NULL REFERENCES runs(id),
    image TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY(run_id, image)
) WITHOUT ROWID;
"""

# Added in schema version 2 (ImageNet-P).
_SCHEMA_V2 = """
CREATE TABLE IF NOT EXISTS p_runs(
    id INTEGER PRIMARY KEY,
    evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
    source_id INTEGER NOT NULL REFERENCES sources(id),
    perturbation TEXT NOT NULL,
    level INTEGER NOT NULL,
    frames INTEGER NOT NULL,
    n_expected INTEGER NOT NULL,
    status TEXT NOT NULL CHECK(status IN ('running', 'complete', 'failed')),
    versions TEXT NOT NULL,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    finished REAL,
    UNIQUE(evaluation_id, perturbation, level)
);
CREATE TABLE IF NOT EXISTS p_videos(
    run_id INTEGER NOT NULL REFERENCES p_runs(id),
    video TEXT NOT NULL,
    label INTEGER NOT NULL,
    top5 BLOB,
    skipped TEXT,
    PRIMARY KEY(run_id, video),
    CHECK((top5 IS NULL) != (skipped IS NULL))
) WITHOUT ROWID;
"""

# Statements that bring a store from version k to k + 1.
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V2}

CLEAN_NAME = "clean"


@dataclass(frozen=True)
class EvaluationInfo:
    """One stored evaluation (a model on a dataset with fixed settings)."""

    id: int
    model: str
    model_checksum: str
    source_kind: str
    source: str
    n_classes: int
    label_space: str
    benchmark: str
    edition: str
    seed: int
    release: bool
    created: float


@dataclass(frozen=True)
class RunInfo:
    """One stored run (one condition of an evaluation) with its counts."""

    id: int
    evaluation_id: int
    corruption: str
    severity: int
    status: str
    n_expected: int
    n_predicted: int
    n_wrong: int
    n_skipped: int
    error: str | None

    @property
    def top1_error(self) -> float | None:
        """Top-1 error over the predicted images (None if none)."""
        return self.n_wrong / self.n_predicted if self.n_predicted else None


@dataclass(frozen=True)
class PRunInfo:
    """One stored ImageNet-P run (a perturbation at one level of an evaluation) with its counts.

    Attributes:
        level: the noise difficulty for noise sequences; 1 for temporal ones
            (their difficulties are strides over the same frames).
        frames: frames per video.
        n_scored: videos with stored top-5 lists; ``n_skipped``: unreadable videos.
    """

    id: int
    evaluation_id: int
    perturbation: str
    level: int
    frames: int
    status: str
    n_expected: int
    n_scored: int
    n_skipped: int
    error: str | None


def encode_top5(top5: Any) -> bytes:
    """T x 5 class indices as bytes: little-endian uint16 when every index fits, else int32."""
    a = np.asarray(top5)
    if a.ndim != 2 or a.shape[1] != 5:
        raise InvalidArgumentError("top5", tuple(a.shape), "a T x 5 array of class indices")
    if a.size and (int(a.min()) < 0 or int(a.max()) > np.iinfo(np.int32).max):
        raise InvalidArgumentError("top5", "class indices out of range", "indices in 0..2**31-1")
    dtype = "<u2" if not a.size or int(a.max()) < 65536 else "<i4"
    return np.ascontiguousarray(a, dtype=dtype).tobytes()


def decode_top5(blob: bytes, frames: int) -> np.ndarray:
    """Inverse of :func:`encode_top5` for a video of ``frames`` frames (T x 5 int64)."""
    n = frames * 5
    if len(blob) == 2 * n:
        a = np.frombuffer(blob, dtype="<u2")
    elif len(blob) == 4 * n:
        a = np.frombuffer(blob, dtype="<i4")
    else:
        raise StoreError(f"stored top-5 list of {len(blob)} bytes does not match {frames} frames x 5 classes")
    return a.astype(np.int64).reshape(frames, 5)


class ResultsStore:
    """An SQLite results store (see the module docstring).

    Args:
        path: the database file; created with its folder unless ``create`` is False.
        create: create a missing store (False: a missing file is an error).

    Raises:
        StoreError: the file is not a shiftbench store, or cannot be opened.
        StoreSchemaError: the store was written by a newer schema.

    Example:
        >>> with ResultsStore("shiftbench-workspace/results.sqlite") as store:  # doctest: +SKIP
        ...     for ev in store.evaluations():
        ...         print(ev.model, store.runs(ev.id))
    """

    def __init__(self, path: str | Path = DEFAULT_STORE, *, create: bool = True) -> None:
        self.path = Path(path)
        if self.path.exists() and self.path.is_dir():
            raise InvalidArgumentError("store", str(self.path), "a database file path, not a folder")
        if not self.path.exists():
            if not create:
                raise StoreError(f"--store {str(self.path)!r} does not exist (no results have been stored there yet)")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(str(self.path), timeout=1.0, isolation_level=None)
            self._db.execute("PRAGMA foreign_keys=ON")
            self._check_and_create()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as e:
            if hasattr(self, "_db"):
                self._db.close()
            raise StoreError(f"--store {str(self.path)!r} is not a usable SQLite results store: {e}") from e

    def _check_and_create(self) -> None:
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables == {"meta"} and self._db.execute("SELECT COUNT(*) FROM meta").fetchone()[0] == 0:
            tables = set()  # an empty meta table and nothing else: a store whose creation never finished
        if "meta" in tables:
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                raise StoreError(f"--store {str(self.path)!r} has no schema version: not a shiftbench results store")
            try:
                found = int(row[0])
            except ValueError as e:
                raise StoreError(f"--store {str(self.path)!r} has a malformed schema version {row[0]!r}") from e
            if found > SCHEMA_VERSION:
                raise StoreSchemaError(str(self.path), found, SCHEMA_VERSION)
            if found < 1:
                raise StoreError(f"--store {str(self.path)!r} has an unknown schema version {found}")
            if found < SCHEMA_VERSION:
                self._migrate()
            return
        foreign = {t for t in tables if not t.startswith(_COMPANION_PREFIXES) and t != "sqlite_sequence"}
        if foreign:
            tables = foreign
            raise StoreError(
                f"--store {str(self.path)!r} is an SQLite database with other tables "
                f"({', '.join(sorted(tables)[:5])}): not a shiftbench results store; pass another --store"
            )
        self._begin()
        try:
            for stmt in (_SCHEMA + _SCHEMA_V2).split(";"):
                if stmt.strip():
                    self._db.execute(stmt)
            self._db.execute("INSERT OR IGNORE INTO meta VALUES('schema_version', ?)", (str(SCHEMA_VERSION),))
            self._db.execute("INSERT OR IGNORE INTO meta VALUES('created_by', 'shiftbench')")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE``, waiting for another writer with a message on stderr, then a clear error."""
        import sys

        deadline = time.monotonic() + _lock_wait()
        told = False
        while True:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                if not told:
                    print(
                        f"The store {str(self.path)!r} is locked by another writer; waiting up to "
                        f"{_lock_wait():.0f} s ...",
                        file=sys.stderr,
                    )
                    told = True
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"--store {str(self.path)!r} is locked by another writer (another shiftbench run?): waited "
                        f"{_lock_wait():.0f} s. Let it finish, or pass another --store."
                    ) from e
                time.sleep(0.2)

    def _migrate(self) -> None:
        """Upgrade an older store in place, one version at a time, each step in one transaction."""
        while True:
            self._begin()
            try:
                found = int(self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
                if found >= SCHEMA_VERSION:
                    self._db.execute("COMMIT")
                    return
                for stmt in _MIGRATIONS[found].split(";"):
                    if stmt.strip():
                        self._db.execute(stmt)
                self._db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(found + 1),))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- plumbing -----------------------------------------------------------------

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: everything inside is stored, or nothing (also after ``kill -9``)."""
        self._begin()
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    def _get_or_insert(self, select: str, sargs: tuple[Any, ...], insert: str, iargs: tuple[Any, ...]) -> int:
        row = self._db.execute(select, sargs).fetchone()
        if row is not None:
            return int(row[0])
        with self.transaction():
            row = self._db.execute(select, sargs).fetchone()
            if row is not None:
                return int(row[0])
            cur = self._db.execute(insert, iargs)
            return int(cur.lastrowid or 0)

    # -- markers ----------------------------------------------------------------------

    def marker(self, key: str) -> str | None:
        """The value stored under ``key`` with :meth:`set_marker` (None: never set)."""
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (f"marker:{key}",)).fetchone()
        return None if row is None else str(row[0])

    def set_marker(self, key: str, value: str | None) -> None:
        """Store ``value`` under ``key`` (None removes it), in one transaction: e.g. that a piece of work is finished.

        Markers live beside the schema version in the ``meta`` table, prefixed ``marker:``.
        """
        with self.transaction():
            self._db.execute("DELETE FROM meta WHERE key=?", (f"marker:{key}",))
            if value is not None:
                self._db.execute("INSERT INTO meta(key, value) VALUES(?, ?)", (f"marker:{key}", value))

    # -- registration ---------------------------------------------------------------

    def register_model(self, name: str, identity: str, checksum: str, details: dict[str, Any]) -> int:
        """Id of the model (inserted on first use)."""
        return self._get_or_insert(
            "SELECT id FROM models WHERE identity=? AND checksum=?",
            (identity, checksum),
            "INSERT INTO models(name, identity, checksum, details, created) VALUES(?,?,?,?,?)",
            (name, identity, checksum, json.dumps(details, sort_keys=True, default=str), time.time()),
        )

    def register_source(
        self, kind: str, identity: str, location: str, classes: Sequence[str], details: dict[str, Any]
    ) -> int:
        """Id of the data source (inserted on first use)."""
        return self._get_or_insert(
            "SELECT id FROM sources WHERE identity=?",
            (identity,),
            "INSERT INTO sources(kind, identity, location, classes, details) VALUES(?,?,?,?,?)",
            (kind, identity, location, json.dumps(list(classes)), json.dumps(details, sort_keys=True, default=str)),
        )

    def register_label_space(self, digest: str, mode: str, classes: Sequence[str]) -> int:
        """Id of the label space (inserted on first use)."""
        return self._get_or_insert(
            "SELECT id FROM label_spaces WHERE digest=?",
            (digest,),
            "INSERT INTO label_spaces(digest, mode, classes) VALUES(?,?,?)",
            (digest, mode, json.dumps(list(classes))),
        )

    def register_evaluation(
        self,
        model_id: int,
        source_id: int,
        benchmark: str,
        edition: str,
        seed: int,
        release: bool,
        label_space_id: int,
    ) -> int:
        """Id of the evaluation with these settings (inserted on first use).

        ``source_id`` is the data the corrupted images come from; the clean run
        may use other data (its own ``source_id`` is stored with the run).
        """
        key = (model_id, source_id, benchmark, edition, seed, int(release), label_space_id)
        return self._get_or_insert(
            "SELECT id FROM evaluations WHERE model_id=? AND source_id=? AND benchmark=? "
            "AND edition=? AND seed=? AND release=? AND label_space_id=?",
            key,
            "INSERT INTO evaluations(model_id, source_id, benchmark, edition, seed, release, "
            "label_space_id, created) VALUES(?,?,?,?,?,?,?,?)",
            (*key, time.time()),
        )

    def register_run(
        self,
        evaluation_id: int,
        source_id: int,
        corruption: str,
        severity: int,
        n_expected: int,
        versions: dict[str, str],
    ) -> int:
        """Id of the run for this condition (inserted on first use).

        Raises:
            StoreError: a stored run of this condition used other data, or expects a
                different number of images (the data changed since it was started).
        """
        row = self._db.execute(
            "SELECT id, n_expected, source_id FROM runs WHERE evaluation_id=? AND corruption=? AND severity=?",
            (evaluation_id, corruption, severity),
        ).fetchone()
        if row is not None:
            if int(row[2]) != source_id:
                loc = self._db.execute("SELECT location FROM sources WHERE id=?", (row[2],)).fetchone()
                raise StoreError(
                    f"stored run {row[0]} ({corruption}, severity {severity}) was evaluated on other data "
                    f"({loc[0] if loc else 'unknown'}). Rerun with --rerun to replace it, or pass another --store."
                )
            if int(row[1]) != n_expected:
                raise StoreError(
                    f"stored run {row[0]} ({corruption}, severity {severity}) expects {row[1]} images but the data now "
                    f"has {n_expected}: the data changed since it was started. Rerun with --rerun to start it over, "
                    "or pass another --store."
                )
            return int(row[0])
        now = time.time()
        return self._get_or_insert(
            "SELECT id FROM runs WHERE evaluation_id=? AND corruption=? AND severity=?",
            (evaluation_id, corruption, severity),
            "INSERT INTO runs(evaluation_id, source_id, corruption, severity, n_expected, status, versions, created, "
            "updated) VALUES(?,?,?,?,?,'running',?,?,?)",
            (
                evaluation_id,
                source_id,
                corruption,
                severity,
                n_expected,
                json.dumps(versions, sort_keys=True),
                now,
                now,
            ),
        )

    def delete_runs(self, run_ids: Sequence[int]) -> None:
        """Delete runs with their predictions and skips (for ``--rerun``)."""
        with self.transaction():
            for rid in run_ids:
                self._db.execute("DELETE FROM predictions WHERE run_id=?", (rid,))
                self._db.execute("DELETE FROM skipped WHERE run_id=?", (rid,))
                self._db.execute("DELETE FROM runs WHERE id=?", (rid,))

    # -- writing ---------------------------------------------------------------------

    def done_keys(self, run_id: int) -> set[str]:
        """Image ids already predicted or skipped in a run."""
        keys = {r[0] for r in self._db.execute("SELECT image FROM predictions WHERE run_id=?", (run_id,))}
        keys.update(r[0] for r in self._db.execute("SELECT image FROM skipped WHERE run_id=?", (run_id,)))
        return keys

    def write_batch(
        self,
        run_id: int,
        keys: Sequence[str],
        labels: Sequence[int],
        topk: Sequence[Sequence[int]],
        skipped: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Store one batch of predictions (and skipped images) in one transaction.

        Rows already present are left as they are (a resumed run never duplicates).
        """
        rows = []
        for key, label, top in zip(keys, labels, topk, strict=True):
            t = [int(v) for v in top][:5]
            t += [None] * (5 - len(t))  # type: ignore[list-item]
            rows.append((run_id, key, int(label), *t))
        with self.transaction():
            self._db.executemany("INSERT OR IGNORE INTO predictions VALUES(?,?,?,?,?,?,?,?)", rows)
            self._db.executemany(
                "INSERT OR IGNORE INTO skipped VALUES(?,?,?)", [(run_id, k, r[:500]) for k, r in skipped]
            )
            self._db.execute("UPDATE runs SET updated=? WHERE id=?", (time.time(), run_id))

    def finish_run(self, run_id: int) -> bool:
        """Mark a run complete if every expected image is predicted or skipped; returns whether it is."""
        with self.transaction():
            row = self._db.execute(
                "SELECT n_expected, (SELECT COUNT(*) FROM predictions WHERE run_id=runs.id), "
                "(SELECT COUNT(*) FROM skipped WHERE run_id=runs.id) FROM runs WHERE id=?",
                (run_id,),
            ).fetchone()
            if row is None:
                return False
            done = int(row[1]) + int(row[2]) >= int(row[0]) and int(row[1]) > 0
            if done:
                self._db.execute(
                    "UPDATE runs SET status='complete', error=NULL, finished=?, updated=? WHERE id=?",
                    (time.time(), time.time(), run_id),
                )
            return done

    def fail_runs(self, run_ids: Sequence[int], message: str) -> None:
        """Mark unfinished runs as failed with a message (their rows stay, for a later resume)."""
        with self.transaction():
            for rid in run_ids:
                self._db.execute(
                    "UPDATE runs SET status='failed', error=?, updated=? WHERE id=? AND status!='complete'",
                    (message[:2000], time.time(), rid),
                )

    def mark_running(self, run_ids: Sequence[int]) -> None:
        """Mark unfinished runs as running again (on resume)."""
        with self.transaction():
            for rid in run_ids:
                self._db.execute(
                    "UPDATE runs SET status='running', updated=? WHERE id=? AND status!='complete'", (time.time(), rid)
                )

    # -- reading ---------------------------------------------------------------------

    def evaluations_of(
        self, benchmarks: Sequence[str], model: str | None = None, evaluation: int | None = None
    ) -> list[EvaluationInfo]:
        """Stored evaluations of these benchmarks (optionally: model names containing ``model``, one id)."""
        return [
            e
            for e in self.evaluations(model)
            if e.benchmark in benchmarks and (evaluation is None or e.id == evaluation)
        ]

    def evaluations(self, model: str | None = None) -> list[EvaluationInfo]:
        """Stored evaluations, oldest first (``model``: keep names containing this text)."""
        rows = self._db.execute(
            "SELECT e.id, m.name, m.checksum, s.kind, s.location, l.classes, l.mode, e.benchmark, e.edition, e.seed, "
            "e.release, e.created FROM evaluations e JOIN models m ON m.id=e.model_id "
            "JOIN sources s ON s.id=e.source_id JOIN label_spaces l ON l.id=e.label_space_id ORDER BY e.id"
        ).fetchall()
        out = [
            EvaluationInfo(
                int(r[0]),
                r[1],
                r[2],
                r[3],
                r[4],
                len(json.loads(r[5])),
                r[6],
                r[7],
                r[8],
                int(r[9]),
                bool(r[10]),
                float(r[11]),
            )
            for r in rows
        ]
        if model is not None:
            out = [e for e in out if model.lower() in e.model.lower()]
        return out

    def evaluation(self, evaluation_id: int) -> EvaluationInfo:
        """One stored evaluation.

        Raises:
            InvalidArgumentError: no evaluation has this id.
        """
        for e in self.evaluations():
            if e.id == evaluation_id:
                return e
        raise InvalidArgumentError(
            "evaluation", evaluation_id, "the id of a stored evaluation (see `shiftbench results --runs`)"
        )

    def runs(self, evaluation_id: int) -> list[RunInfo]:
        """Runs of an evaluation with their counts, clean first, then by corruption and severity."""
        rows = self._db.execute(
            "SELECT r.id, r.evaluation_id, r.corruption, r.severity, r.status, r.n_expected, "
            "(SELECT COUNT(*) FROM predictions p WHERE p.run_id=r.id), "
            "(SELECT COUNT(*) FROM predictions p WHERE p.run_id=r.id AND p.top1!=p.label), "
            "(SELECT COUNT(*) FROM skipped k WHERE k.run_id=r.id), r.error "
            "FROM runs r WHERE r.evaluation_id=? ORDER BY r.severity!=0, r.id",
            (evaluation_id,),
        ).fetchall()
        return [
            RunInfo(int(r[0]), int(r[1]), r[2], int(r[3]), r[4], int(r[5]), int(r[6]), int(r[7]), int(r[8]), r[9])
            for r in rows
        ]

    def label_space_classes(self, evaluation_id: int) -> list[str]:
        """Class ids of an evaluation's label space."""
        row = self._db.execute(
            "SELECT l.classes FROM evaluations e JOIN label_spaces l ON l.id=e.label_space_id WHERE e.id=?",
            (evaluation_id,),
        ).fetchone()
        return [] if row is None else list(json.loads(row[0]))

    def error_table(self, evaluation_id: int) -> tuple[float | None, dict[str, dict[int, float]], list[RunInfo]]:
        """Clean error and per-severity errors of an evaluation, from its complete runs.

        Returns:
            ``(clean_error or None, {corruption: {severity: error}}, incomplete runs)``.
        """
        clean: float | None = None
        table: dict[str, dict[int, float]] = {}
        incomplete: list[RunInfo] = []
        for r in self.runs(evaluation_id):
            if r.status != "complete" or r.top1_error is None:
                incomplete.append(r)
                continue
            if r.corruption == CLEAN_NAME:
                clean = r.top1_error
            else:
                table.setdefault(r.corruption, {})[r.severity] = r.top1_error
        return clean, table, incomplete

    def model_details(self, evaluation_id: int) -> dict[str, Any]:
        """Model name, identity, checksum and details of an evaluation."""
        row = self._db.execute(
            "SELECT m.name, m.identity, m.checksum, m.details FROM evaluations e JOIN models m ON m.id=e.model_id "
            "WHERE e.id=?",
            (evaluation_id,),
        ).fetchone()
        if row is None:
            return {}
        return {"name": row[0], "identity": row[1], "checksum": row[2], **json.loads(row[3])}

    def baseline(self, spec: str, *, edition: str | None = None, source_kind: str | None = None) -> Baseline:
        """A stored model's errors as a CE baseline.

        Args:
            spec: ``"eval:<id>"`` / ``"#<id>"`` for one evaluation, or a model name
                (its evaluations with complete runs are considered).
            edition: keep only evaluations of this edition.
            source_kind: prefer evaluations on this kind of data.

        Raises:
            UnknownNameError: no stored model has this name.
            InvalidArgumentError: several evaluations match (pass ``eval:<id>``), or
                the match has no complete corrupted runs.
        """
        evs = self.evaluations()
        s = spec.strip()
        if s.startswith(("eval:", "#")):
            try:
                eid = int(s.split(":", 1)[1] if s.startswith("eval:") else s[1:])
            except ValueError as e:
                raise InvalidArgumentError("baseline", spec, "'eval:<id>' with a numeric id") from e
            cands = [e for e in evs if e.id == eid]
            if not cands:
                raise InvalidArgumentError(
                    "baseline", spec, "the id of a stored evaluation (see `shiftbench results --runs`)"
                )
        else:
            names = sorted({e.model for e in evs})
            cands = [e for e in evs if e.model == s]
            if not cands:
                from ..checks import suggest

                raise UnknownNameError("baseline", spec, ["alexnet", *names], suggest(s, names))
            if edition is not None:
                cands = [e for e in cands if e.edition == edition] or cands
            if source_kind is not None and len(cands) > 1:
                cands = [e for e in cands if e.source_kind == source_kind] or cands
            complete = [e for e in cands if any(r.status == "complete" and r.severity > 0 for r in self.runs(e.id))]
            cands = complete or cands
            if len(cands) > 1:
                raise InvalidArgumentError(
                    "baseline",
                    spec,
                    "a model with one stored evaluation, or one evaluation id",
                    f"{s!r} has evaluations {', '.join('eval:' + str(e.id) for e in cands)}; pass one of them.",
                )
        ev = cands[0]
        clean, table, _ = self.error_table(ev.id)
        if not table:
            raise InvalidArgumentError("baseline", spec, "a stored evaluation with complete corrupted runs")
        n = max((r.n_predicted for r in self.runs(ev.id)), default=0)
        return Baseline(
            name=ev.model,
            errors=table,
            clean_error=clean,
            source=(
                f"results store {self.path}, evaluation {ev.id} ({ev.source_kind} {ev.source}, edition {ev.edition})"
            ),
            edition=ev.edition,
            n_images=n or None,
        )

    # -- ImageNet-P runs ---------------------------------------------------------------

    def register_p_run(
        self,
        evaluation_id: int,
        source_id: int,
        perturbation: str,
        level: int,
        frames: int,
        n_expected: int,
        versions: dict[str, str],
    ) -> int:
        """Id of the ImageNet-P run for this perturbation and level (inserted on first use).

        Raises:
            StoreError: a stored run of this perturbation used other data, another
                frame count, or expects a different number of videos.
        """
        row = self._db.execute(
            "SELECT id, n_expected, source_id, frames FROM p_runs WHERE evaluation_id=? AND perturbation=? AND level=?",
            (evaluation_id, perturbation, level),
        ).fetchone()
        if row is not None:
            what = f"stored ImageNet-P run {row[0]} ({perturbation}, level {level})"
            if int(row[2]) != source_id:
                loc = self._db.execute("SELECT location FROM sources WHERE id=?", (row[2],)).fetchone()
                raise StoreError(
                    f"{what} was evaluated on other data ({loc[0] if loc else 'unknown'}). "
                    "Rerun with --rerun to replace it, or pass another --store."
                )
            if int(row[3]) != frames:
                raise StoreError(
                    f"{what} has {row[3]} frames per video, not {frames}. Rerun with --rerun, or pass another --store."
                )
            if int(row[1]) != n_expected:
                raise StoreError(
                    f"{what} expects {row[1]} videos but the data now has {n_expected}: the data changed since it "
                    "was started. Rerun with --rerun to start it over, or pass another --store."
                )
            return int(row[0])
        now = time.time()
        return self._get_or_insert(
            "SELECT id FROM p_runs WHERE evaluation_id=? AND perturbation=? AND level=?",
            (evaluation_id, perturbation, level),
            "INSERT INTO p_runs(evaluation_id, source_id, perturbation, level, frames, n_expected, status, versions, "
            "created, updated) VALUES(?,?,?,?,?,?,'running',?,?,?)",
            (evaluation_id, source_id, perturbation, level, frames, n_expected, json.dumps(versions, sort_keys=True),
             now, now),
        )

    def p_runs(self, evaluation_id: int) -> list[PRunInfo]:
        """ImageNet-P runs of an evaluation with their counts, in insertion order."""
        rows = self._db.execute(
            "SELECT r.id, r.evaluation_id, r.perturbation, r.level, r.frames, r.status, r.n_expected, "
            "(SELECT COUNT(*) FROM p_videos v WHERE v.run_id=r.id AND v.top5 IS NOT NULL), "
            "(SELECT COUNT(*) FROM p_videos v WHERE v.run_id=r.id AND v.top5 IS NULL), r.error "
            "FROM p_runs r WHERE r.evaluation_id=? ORDER BY r.id",
            (evaluation_id,),
        ).fetchall()
        return [
            PRunInfo(int(r[0]), int(r[1]), r[2], int(r[3]), int(r[4]), r[5], int(r[6]), int(r[7]), int(r[8]), r[9])
            for r in rows
        ]

    def p_done_videos(self, run_id: int) -> set[str]:
        """Videos of an ImageNet-P run already scored or skipped."""
        return {r[0] for r in self._db.execute("SELECT video FROM p_videos WHERE run_id=?", (run_id,))}

    def write_p_videos(
        self,
        run_id: int,
        videos: Sequence[tuple[str, int, Any]],
        skipped: Sequence[tuple[str, int, str]] = (),
    ) -> None:
        """Store finished videos ``(video, label, T x 5 top-5)`` and skips ``(video, label, reason)`` in one transaction.

        Rows already present are left as they are (a resumed run never duplicates).
        """
        rows = [(run_id, v, int(lab), encode_top5(t5), None) for v, lab, t5 in videos]
        rows += [(run_id, v, int(lab), None, reason[:500] or "unreadable") for v, lab, reason in skipped]
        with self.transaction():
            self._db.executemany("INSERT OR IGNORE INTO p_videos VALUES(?,?,?,?,?)", rows)
            self._db.execute("UPDATE p_runs SET updated=? WHERE id=?", (time.time(), run_id))

    def finish_p_run(self, run_id: int) -> bool:
        """Mark an ImageNet-P run complete if every expected video is stored; returns whether it is."""
        with self.transaction():
            row = self._db.execute(
                "SELECT n_expected, (SELECT COUNT(*) FROM p_videos WHERE run_id=p_runs.id), "
                "(SELECT COUNT(*) FROM p_videos WHERE run_id=p_runs.id AND top5 IS NOT NULL) FROM p_runs WHERE id=?",
                (run_id,),
            ).fetchone()
            if row is None:
                return False
            done = int(row[1]) >= int(row[0]) and int(row[2]) > 0
            if done:
                now = time.time()
                self._db.execute(
                    "UPDATE p_runs SET status='complete', error=NULL, finished=?, updated=? WHERE id=?",
                    (now, now, run_id),
                )
            return done

    def set_p_status(self, run_ids: Sequence[int], status: str, message: str | None = None) -> None:
        """Mark unfinished ImageNet-P runs ``'running'`` (on resume) or ``'failed'`` (with a message)."""
        if status not in ("running", "failed"):
            raise InvalidArgumentError("status", status, "'running' or 'failed'")
        with self.transaction():
            for rid in run_ids:
                self._db.execute(
                    "UPDATE p_runs SET status=?, error=?, updated=? WHERE id=? AND status!='complete'",
                    (status, None if message is None else message[:2000], time.time(), rid),
                )

    def delete_p_runs(self, run_ids: Sequence[int]) -> None:
        """Delete ImageNet-P runs with their videos (for ``--rerun``)."""
        with self.transaction():
            for rid in run_ids:
                self._db.execute("DELETE FROM p_videos WHERE run_id=?", (rid,))
                self._db.execute("DELETE FROM p_runs WHERE id=?", (rid,))

    def p_top5(self, run_id: int) -> tuple[list[str], np.ndarray, np.ndarray, list[tuple[str, str]]]:
        """Stored videos of an ImageNet-P run, ordered by video id.

        Returns:
            ``(videos, labels (N,), top5 (N x T x 5 int64), skipped [(video, reason)])``.
        """
        row = self._db.execute("SELECT frames FROM p_runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise InvalidArgumentError("run", run_id, "the id of a stored ImageNet-P run")
        frames = int(row[0])
        videos: list[str] = []
        labels: list[int] = []
        tops: list[np.ndarray] = []
        skipped: list[tuple[str, str]] = []
        for v, lab, blob, why in self._db.execute(
            "SELECT video, label, top5, skipped FROM p_videos WHERE run_id=? ORDER BY video", (run_id,)
        ):
            if blob is None:
                skipped.append((v, why))
                continue
            videos.append(v)
            labels.append(int(lab))
            tops.append(decode_top5(blob, frames))
        top5 = np.stack(tops) if tops else np.zeros((0, frames, 5), dtype=np.int64)
        return videos, np.asarray(labels, dtype=np.int64), top5, skipped

    # -- export ----------------------------------------------------------------------

    def rows(self, table: str = "runs", evaluation_id: int | None = None) -> list[dict[str, Any]]:
        """Flat records for export.

        Args:
            table: ``"runs"`` (one record per run: model, checksum, data, corruption,
                severity, seed, edition, release, versions, counts, error),
                ``"predictions"`` (one record per image: the run's keys plus image,
                label and top-5 predictions as class indices and class ids),
                ``"p_runs"`` (one record per ImageNet-P run) or ``"p_videos"``
                (one record per ImageNet-P video: the run's keys plus video, label
                and the frames' top-5 lists, ``"a b c d e;..."`` one group per frame).
            evaluation_id: only this evaluation.
        """
        if table not in EXPORT_TABLES:
            raise InvalidArgumentError("table", table, f"one of {', '.join(EXPORT_TABLES)}")
        if table.startswith("p_"):
            return self._p_rows(table, evaluation_id)
        where = "" if evaluation_id is None else "WHERE e.id=?"
        args: tuple[Any, ...] = () if evaluation_id is None else (evaluation_id,)
        base = (
            "SELECT r.id, e.id, m.name, m.checksum, s.kind, s.location, e.benchmark, e.edition, e.seed, e.release, "
            "r.corruption, r.severity, r.status, r.n_expected, r.versions, r.error, l.classes "
            "FROM runs r JOIN evaluations e ON e.id=r.evaluation_id JOIN models m ON m.id=e.model_id "
            f"JOIN sources s ON s.id=r.source_id JOIN label_spaces l ON l.id=e.label_space_id {where} ORDER BY r.id"
        )
        out: list[dict[str, Any]] = []
        for r in self._db.execute(base, args).fetchall():
            meta = {
                "run": int(r[0]),
                "evaluation": int(r[1]),
                "model": r[2],
                "model_checksum": r[3],
                "data_kind": r[4],
                "data": r[5],
                "benchmark": r[6],
                "edition": r[7],
                "seed": None if int(r[8]) < 0 else int(r[8]),
                "release": bool(r[9]),
                "corruption": r[10],
                "severity": int(r[11]),
            }
            if table == "runs":
                info = next(x for x in self.runs(int(r[1])) if x.id == int(r[0]))
                out.append(
                    {
                        **meta,
                        "status": r[12],
                        "n_expected": int(r[13]),
                        "n_predicted": info.n_predicted,
                        "n_skipped": info.n_skipped,
                        "top1_error": info.top1_error,
                        "versions": r[14],
                        "error": r[15],
                    }
                )
                continue
            classes = json.loads(r[16])
            for p in self._db.execute(
                "SELECT image, label, top1, top2, top3, top4, top5 FROM predictions WHERE run_id=? ORDER BY image",
                (r[0],),
            ):
                top = [v for v in p[2:] if v is not None]
                out.append(
                    {
                        **meta,
                        "image": p[0],
                        "label": int(p[1]),
                        "label_class": classes[int(p[1])] if 0 <= int(p[1]) < len(classes) else None,
                        "top1": int(p[2]),
                        "top5": " ".join(str(int(v)) for v in top),
                        "top5_classes": " ".join(classes[int(v)] for v in top if 0 <= int(v) < len(classes)),
                        "correct": int(p[2]) == int(p[1]),
                    }
                )
        return out

    def _p_rows(self, table: str, evaluation_id: int | None) -> list[dict[str, Any]]:
        where = "" if evaluation_id is None else "WHERE e.id=?"
        args: tuple[Any, ...] = () if evaluation_id is None else (evaluation_id,)
        base = (
            "SELECT r.id, e.id, m.name, m.checksum, s.kind, s.location, e.benchmark, e.edition, e.seed, "
            "r.perturbation, r.level, r.frames, r.status, r.n_expected, r.versions, r.error "
            "FROM p_runs r JOIN evaluations e ON e.id=r.evaluation_id JOIN models m ON m.id=e.model_id "
            f"JOIN sources s ON s.id=r.source_id {where} ORDER BY r.id"
        )
        out: list[dict[str, Any]] = []
        for r in self._db.execute(base, args).fetchall():
            meta = {
                "run": int(r[0]),
                "evaluation": int(r[1]),
                "model": r[2],
                "model_checksum": r[3],
                "data_kind": r[4],
                "data": r[5],
                "benchmark": r[6],
                "edition": r[7],
                "seed": None if int(r[8]) < 0 else int(r[8]),
                "perturbation": r[9],
                "level": int(r[10]),
                "frames": int(r[11]),
            }
            if table == "p_runs":
                info = next(x for x in self.p_runs(int(r[1])) if x.id == int(r[0]))
                out.append(
                    {
                        **meta,
                        "status": r[12],
                        "n_expected": int(r[13]),
                        "n_scored": info.n_scored,
                        "n_skipped": info.n_skipped,
                        "versions": r[14],
                        "error": r[15],
                    }
                )
                continue
            for v, lab, blob, why in self._db.execute(
                "SELECT video, label, top5, skipped FROM p_videos WHERE run_id=? ORDER BY video", (r[0],)
            ):
                t5 = None if blob is None else decode_top5(blob, int(r[11]))
                out.append(
                    {
                        **meta,
                        "video": v,
                        "label": int(lab),
                        "top5": None if t5 is None else ";".join(" ".join(map(str, f)) for f in t5.tolist()),
                        "skipped": why,
                    }
                )
        return out

    def export(
        self, path: str | Path, *, table: str = "runs", fmt: str | None = None, evaluation_id: int | None = None
    ) -> int:
        """Write :meth:`rows` to a CSV or JSON file (format from ``fmt`` or the suffix); returns the row count."""
        p = Path(path)
        fmt = (fmt or p.suffix.lstrip(".")).lower()
        if fmt not in ("csv", "json"):
            raise InvalidArgumentError("format", fmt or str(path), "'csv' or 'json' (or a file ending in .csv/.json)")
        records = self.rows(table, evaluation_id)
        p.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "json":
            p.write_text(json.dumps(records, indent=1, default=str) + "\n", encoding="utf-8")
        else:
            p.write_text(records_to_csv(records), encoding="utf-8")
        return len(records)

    def to_pandas(self, table: str = "runs", evaluation_id: int | None = None) -> Any:
        """:meth:`rows` as a pandas DataFrame.

        Raises:
            MissingDependencyError: pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError as e:
            raise MissingDependencyError("pandas", "Exporting results to pandas", "pandas") from e
        return pd.DataFrame.from_records(self.rows(table, evaluation_id))


def records_to_csv(records: Sequence[dict[str, Any]]) -> str:
    """Records (dicts with the same keys) as CSV text with a header row."""
    buf = io.StringIO()
    if records:
        w = csv.DictWriter(buf, fieldnames=list(records[0]), lineterminator="\n")
        w.writeheader()
        for rec in records:
            w.writerow(rec)
    return buf.getvalue()
