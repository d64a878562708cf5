"""The results store: an embedded SQLite database of every benchmark's evaluations and per-item records.

Layout (schema version 4)::

    meta(key, value)                          schema_version, created_by
    models(id, name, identity, checksum, details)       UNIQUE(identity, checksum)
    sources(id, kind, identity, location, classes, details)   UNIQUE(identity)
    label_spaces(id, digest, mode, classes)              UNIQUE(digest)
    evaluations(id, model_id, source_id, benchmark, edition, seed, release,
                label_space_id, options, created)        UNIQUE(all but id, created)
    runs(id, evaluation_id, source_id, condition, level, frames, n_expected, status,
         versions, error, created, updated, finished)   UNIQUE(evaluation_id, condition, level)
    records(run_id, item, label, top1..top5, frames_top5, correct, skipped)
                                                        PRIMARY KEY(run_id, item)

An *evaluation* is one model on one dataset with fixed settings (benchmark,
edition, seed (-1: none), release mode, label space, and ``options``: JSON of
what else identifies it for its benchmark, e.g. ImageNet-D's mapping digest or
the ImageNet-NOC benchmark's name and corruptions). Its *runs* are the
conditions: ``condition``/``level`` is ``clean``/0 or a corruption and severity
(ImageNet-C and its editions), a domain and 0 (ImageNet-D), a candidate
corruption and 0 (ImageNet-NOC), a perturbation and level (ImageNet-P: the data
generated or read, the noise difficulty for noise sequences, always 1 for
temporal ones whose difficulties 2 and 3 are strides over the same frames).
``frames`` is the number of frames of each item: 1 for still images.

``records`` holds exactly one row per run and item: the label (an index into
the label space; the DomainNet class for ImageNet-D; -1 when unknown) and

* for a still image: the top-5 classes in ``top1..top5`` (fewer for label
  spaces of fewer classes) and ``correct``, whether top-1 is right (for
  ImageNet-D under the evaluation's mapping);
* for an item of several frames: ``frames_top5``, the top-5 classes of every
  frame (T x 5 little-endian uint16, or int32 for label spaces of 65 536
  classes or more, row-major; :func:`encode_top5`);
* for an item that could not be read: only the reason in ``skipped``.

Each batch of records is written in one transaction, and ``(run, item)`` is a
primary key, so a run interrupted at any point (Ctrl-C, ``kill -9``) resumes
without lost or duplicated rows. A run is marked ``complete`` only when every
expected item has a record and one is scored.

Schema history (:data:`MIGRATIONS`, one numbered step per version, each in one
transaction: a failed step leaves the file as it was): version 1 had
ImageNet-C's ``runs(corruption, severity)``, ``predictions`` and ``skipped``;
version 2 added ImageNet-P's ``p_runs``/``p_videos``; ImageNet-D
(``imagenet_d_*``) and ImageNet-NOC (``overlap_noc_*``) kept tables of their own
in the same file. Version 3 moves all of them into ``evaluations``/``runs``/
``records`` and drops the old tables (ImageNet-D's records of version 2 keep
``correct`` NULL: it is scored with the mapping on reading; ImageNet-NOC's keep
only ``correct``, and its model identity was not recorded, so a new run does not
resume them). Version 4 stores ``evaluations.seed`` as decimal text, so that every seed
of 0..2**64-1 (and -1: none) is kept exactly (SQLite's integers stop at 2**63-1).

Opening checks that the file is what this module wrote (:meth:`ResultsStore.check_schema`): the
tables with their columns (a view in place of a table is refused), no triggers (shiftbench creates
none; a trigger could rewrite every record written), valid JSON and integers in the typed columns.
Stores opened for reading (``create=False``: ``results``, ``report``, ``select``) are opened
read-only (SQLite ``mode=ro``): they are never created, upgraded on disk or otherwise changed (an
older schema is upgraded in a copy in memory).
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
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
    "DEFAULT_STORE",
    "EXPORT_TABLES",
    "LOCK_WAIT_S",
    "check_store_path",
    "content_identity",
    "marker_key",
    "encode_top5",
    "decode_top5",
]

SCHEMA_VERSION = 4
DEFAULT_STORE = Path("shiftbench-workspace") / "results.sqlite"
EXPORT_TABLES = ("runs", "predictions", "p_runs", "p_videos")

LOCK_WAIT_S = 60.0
"""How long a write waits for another writer of the same store before it fails (``SHIFTBENCH_LOCK_WAIT`` overrides)."""

# Tables other parts of shiftbench keep in the same file: the overlap study's bookkeeping, and the tables
# ImageNet-D and ImageNet-NOC kept until schema 2 (moved into this store's tables when it is opened).
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


_CONTENT_CACHE: dict[tuple[str, int, int], str] = {}


def content_identity(value: Any) -> str | None:
    """What a path-valued option holds, for resume markers: None if ``value`` names no existing file or folder.

    A file: ``sha256:<digest of its bytes>`` (cached per process by path, size and modification time). A folder:
    ``tree:<digest>`` of every file below it (relative path, size, modification time in ns), so adding, removing,
    renaming or rewriting a file changes it without reading a dataset's bytes. Weights overwritten with other
    weights, or images added to a data folder, therefore give another marker, and the work is done again.
    """
    import hashlib
    import os

    if not isinstance(value, (str, os.PathLike)) or not str(value):
        return None
    p = Path(value).expanduser()
    try:
        st = p.stat()
    except (OSError, ValueError):
        return None
    if p.is_file():
        key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
        if key not in _CONTENT_CACHE:
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            _CONTENT_CACHE[key] = "sha256:" + h.hexdigest()
        return _CONTENT_CACHE[key]
    if p.is_dir():
        h = hashlib.sha256()
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for name in sorted(files):
                fp = Path(root) / name
                try:
                    fs = fp.stat()
                except OSError:
                    continue
                rel = fp.relative_to(p).as_posix()
                h.update(f"{rel}\0{fs.st_size}\0{fs.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
        return "tree:" + h.hexdigest()
    return None


def marker_key(prefix: str, identity: dict[str, Any]) -> str:
    """A resume marker's key: ``prefix:`` + SHA-256 of ``identity`` (JSON) with the content of every value that
    names a file or folder (:func:`content_identity`) beside the name; the key changes when the content does."""
    import hashlib

    def with_content(v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): with_content(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [with_content(x) for x in v]
        c = content_identity(v) if isinstance(v, (str, Path)) else None
        return v if c is None else {"path": str(v), "content": c}

    text = json.dumps(with_content(identity), sort_keys=True, default=str)
    return f"{prefix}:" + hashlib.sha256(text.encode()).hexdigest()


_CHECKED_FILES: set[tuple[Any, ...]] = set()


def _file_state(path: Path) -> tuple[Any, ...] | None:
    """What identifies a store file's content without reading it: path, inode, size and modification time of the file
    and of its WAL (None: unknown, e.g. in memory)."""
    try:
        st = path.stat()
    except OSError:
        return None
    try:
        wal = Path(str(path) + "-wal").stat()
        wal_state: tuple[int, int] = (wal.st_size, wal.st_mtime_ns)
    except OSError:
        wal_state = (-1, -1)
    return (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, *wal_state)


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
"""

# Added in schema version 2 (ImageNet-P; moved into runs/records in version 3).
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

# Version 3: one layout for every benchmark's evaluations.
_SCHEMA_V3_RESULTS = """
CREATE TABLE IF NOT EXISTS evaluations(
    id INTEGER PRIMARY KEY,
    model_id INTEGER NOT NULL REFERENCES models(id),
    source_id INTEGER NOT NULL REFERENCES sources(id),
    benchmark TEXT NOT NULL,
    edition TEXT NOT NULL,
    seed INTEGER NOT NULL,
    release INTEGER NOT NULL,
    label_space_id INTEGER NOT NULL REFERENCES label_spaces(id),
    options TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    UNIQUE(model_id, source_id, benchmark, edition, seed, release, label_space_id, options)
);
CREATE TABLE IF NOT EXISTS runs(
    id INTEGER PRIMARY KEY,
    evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),
    source_id INTEGER NOT NULL REFERENCES sources(id),
    condition TEXT NOT NULL,
    level INTEGER NOT NULL,
    frames INTEGER NOT NULL DEFAULT 1 CHECK(frames >= 1),
    n_expected INTEGER NOT NULL,
    status TEXT NOT NULL CHECK(status IN ('running', 'complete', 'failed')),
    versions TEXT NOT NULL,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    finished REAL,
    UNIQUE(evaluation_id, condition, level)
);
CREATE TABLE IF NOT EXISTS records(
    run_id INTEGER NOT NULL REFERENCES runs(id),
    item TEXT NOT NULL,
    label INTEGER NOT NULL,
    top1 INTEGER, top2 INTEGER, top3 INTEGER, top4 INTEGER, top5 INTEGER,
    frames_top5 BLOB,
    correct INTEGER CHECK(correct IN (0, 1)),
    skipped TEXT,
    PRIMARY KEY(run_id, item),
    CHECK(skipped IS NULL OR (top1 IS NULL AND frames_top5 IS NULL AND correct IS NULL)),
    CHECK(skipped IS NOT NULL OR top1 IS NOT NULL OR frames_top5 IS NOT NULL OR correct IS NOT NULL)
) WITHOUT ROWID;
"""

# Version 4: seeds as decimal text (0..2**64-1, or -1: none), kept exactly.
_SCHEMA_V4_EVALUATIONS = """
CREATE TABLE IF NOT EXISTS evaluations(
    id INTEGER PRIMARY KEY,
    model_id INTEGER NOT NULL REFERENCES models(id),
    source_id INTEGER NOT NULL REFERENCES sources(id),
    benchmark TEXT NOT NULL,
    edition TEXT NOT NULL,
    seed TEXT NOT NULL,
    release INTEGER NOT NULL,
    label_space_id INTEGER NOT NULL REFERENCES label_spaces(id),
    options TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    UNIQUE(model_id, source_id, benchmark, edition, seed, release, label_space_id, options)
);
"""

CLEAN_NAME = "clean"
_EXPECTED_COLUMNS: dict[str, list[tuple[str, str]]] = {}

SEED_MAX = 2**64 - 1
"""The largest seed a store holds (seeds are 0..2**64-1; -1 records "no seed")."""


def _seed_text(seed: Any) -> str:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not (-1 <= int(seed) <= SEED_MAX):
        raise InvalidArgumentError("seed", seed, f"an integer in 0..{SEED_MAX} (or -1: no seed)")
    return str(int(seed))


# What check_schema verifies beyond the tables' columns: JSON columns, and integer columns of the small tables
_JSON_COLUMNS = (("models", "details"), ("sources", "classes"), ("sources", "details"), ("label_spaces", "classes"),
                 ("evaluations", "options"), ("runs", "versions"))  # fmt: skip
_INT_COLUMNS = (("evaluations", "model_id"), ("evaluations", "source_id"), ("evaluations", "release"),
                ("evaluations", "label_space_id"), ("runs", "evaluation_id"), ("runs", "source_id"), ("runs", "level"),
                ("runs", "frames"), ("runs", "n_expected"), ("records", "run_id"), ("records", "label"),
                ("records", "top1"), ("records", "top2"), ("records", "top3"), ("records", "top4"), ("records", "top5"),
                ("records", "correct"))  # fmt: skip
_REAL_COLUMNS = (("models", "created"), ("evaluations", "created"), ("runs", "created"), ("runs", "updated"),
                 ("runs", "finished"))  # fmt: skip


def _expected_columns() -> dict[str, list[tuple[str, str]]]:
    """Each table of a current store with its (column, declared type) list, from the schema scripts themselves."""
    mem = sqlite3.connect(":memory:")
    try:
        _script(_SCHEMA + _SCHEMA_V4_EVALUATIONS + _SCHEMA_V3_RESULTS)(mem)
        return {t: [(r[1], r[2]) for r in mem.execute(f"PRAGMA table_info({t})")] for t in sorted(_tables(mem))}
    finally:
        mem.close()


def _script(sql: str) -> Callable[[sqlite3.Connection], None]:
    def run(db: sqlite3.Connection) -> None:
        for stmt in sql.split(";"):
            if stmt.strip():
                db.execute(stmt)

    return run


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _migrate_2_to_3(db: sqlite3.Connection) -> None:
    """Version 3: ImageNet-C's, ImageNet-P's (p_runs/p_videos), ImageNet-D's (imagenet_d_*) and ImageNet-NOC's
    (overlap_noc_*) rows in one layout: evaluations (+ options), runs (condition, level, frames), records.

    Ids of evaluations and runs of version 2's ``evaluations``/``runs`` are kept; the other tables' rows get new ids.
    """
    for t in ("evaluations", "runs", "predictions", "skipped"):
        db.execute(f"ALTER TABLE {t} RENAME TO v2_{t}")
    _script(_SCHEMA_V3_RESULTS)(db)
    db.execute(
        "INSERT INTO evaluations(id, model_id, source_id, benchmark, edition, seed, release, label_space_id, options, "
        "created) SELECT id, model_id, source_id, benchmark, edition, seed, release, label_space_id, '{}', created "
        "FROM v2_evaluations"
    )
    db.execute(
        "INSERT INTO runs(id, evaluation_id, source_id, condition, level, frames, n_expected, status, versions, error, "
        "created, updated, finished) SELECT id, evaluation_id, source_id, corruption, severity, 1, n_expected, status, "
        "versions, error, created, updated, finished FROM v2_runs"
    )
    db.execute(
        "INSERT INTO records(run_id, item, label, top1, top2, top3, top4, top5, correct) "
        "SELECT run_id, image, label, top1, top2, top3, top4, top5, top1 = label FROM v2_predictions"
    )
    db.execute(
        "INSERT OR IGNORE INTO records(run_id, item, label, skipped) SELECT run_id, image, -1, reason FROM v2_skipped"
    )
    tables = _tables(db)
    if "p_runs" in tables:
        for row in db.execute(
            "SELECT id, evaluation_id, source_id, perturbation, level, frames, n_expected, status, versions, error, "
            "created, updated, finished FROM p_runs ORDER BY id"
        ).fetchall():
            cur = db.execute(
                "INSERT INTO runs(evaluation_id, source_id, condition, level, frames, n_expected, status, versions, "
                "error, created, updated, finished) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                row[1:],
            )
            db.execute(
                "INSERT INTO records(run_id, item, label, frames_top5, skipped) "
                "SELECT ?, video, label, top5, skipped FROM p_videos WHERE run_id=?",
                (cur.lastrowid, row[0]),
            )
        db.execute("DROP TABLE p_videos")
        db.execute("DROP TABLE p_runs")
    for t in ("skipped", "predictions", "runs", "evaluations"):
        db.execute(f"DROP TABLE v2_{t}")
    _import_companions(db)


def _import_companions(db: sqlite3.Connection) -> None:
    """Move the tables ImageNet-D (``imagenet_d_*``) and ImageNet-NOC (``overlap_noc_*``) kept beside a
    version-2 store (or in a file of their own) into version 3's tables, then drop them.

    Their evaluations had no run status: each stored domain / condition becomes a complete run of the
    rows it holds.
    """
    tables = _tables(db)
    now = time.time()

    def get_or_insert(select: str, sargs: tuple[Any, ...], insert: str, iargs: tuple[Any, ...]) -> int:
        row = db.execute(select, sargs).fetchone()
        if row is not None:
            return int(row[0])
        return int(db.execute(insert, iargs).lastrowid or 0)

    def label_space(digest: str, mode: str, classes: Sequence[str]) -> int:
        return get_or_insert("SELECT id FROM label_spaces WHERE digest=?", (digest,),
                             "INSERT INTO label_spaces(digest, mode, classes) VALUES(?,?,?)",
                             (digest, mode, json.dumps(list(classes))))

    def run(eid: int, sid: int, cond: str, n: int, created: float) -> int:
        return int(db.execute(
            "INSERT INTO runs(evaluation_id, source_id, condition, level, frames, n_expected, status, versions, "
            "created, updated, finished) VALUES(?,?,?,0,1,?,'complete','{}',?,?,?)",
            (eid, sid, cond, n, created, now, now),
        ).lastrowid or 0)

    if "imagenet_d_evaluations" in tables:
        from .models import LabelSpace, imagenet_wnids

        space = LabelSpace(imagenet_wnids(), None, "model")
        ls = label_space(space.digest, space.mode, space.classes)
        cols = {r[1] for r in db.execute("PRAGMA table_info(imagenet_d_evaluations)")}
        mapping = "mapping" if "mapping" in cols else "NULL"
        for eid, model, ident, checksum, data, data_ident, digest, created, _mname in db.execute(
            "SELECT id, model, model_identity, model_checksum, data, data_identity, mapping_digest, created, "
            f"{mapping} FROM imagenet_d_evaluations ORDER BY id"
        ).fetchall():
            mid = get_or_insert("SELECT id FROM models WHERE identity=? AND checksum=?", (ident, checksum),
                                "INSERT INTO models(name, identity, checksum, details, created) VALUES(?,?,?,'{}',?)",
                                (model, ident, checksum, created))
            sid = get_or_insert("SELECT id FROM sources WHERE identity=?", (data_ident,),
                                "INSERT INTO sources(kind, identity, location, classes, details) "
                                "VALUES('imagenet-d',?,?,'[]','{}')", (data_ident, data))
            new = int(db.execute(
                "INSERT INTO evaluations(model_id, source_id, benchmark, edition, seed, release, label_space_id, "
                "options, created) VALUES(?,?,'imagenet-d','224',-1,0,?,?,?)",
                (mid, sid, ls, _json({"mapping_digest": digest, "label_classes": "source"}), created),
            ).lastrowid or 0)
            domains = [r[0] for r in db.execute(
                "SELECT domain FROM imagenet_d_predictions WHERE evaluation_id=? UNION "
                "SELECT domain FROM imagenet_d_skipped WHERE evaluation_id=?", (eid, eid))]
            for d in sorted(domains):
                n = db.execute(
                    "SELECT (SELECT COUNT(*) FROM imagenet_d_predictions WHERE evaluation_id=? AND domain=?) + "
                    "(SELECT COUNT(*) FROM imagenet_d_skipped WHERE evaluation_id=? AND domain=?)", (eid, d, eid, d)
                ).fetchone()[0]
                rid = run(new, sid, d, int(n), created)
                db.execute(
                    # labels are DomainNet classes: whether top1 is right depends on the mapping (scored on reading)
                    "INSERT INTO records(run_id, item, label, top1, top2, top3, top4, top5, correct) "
                    "SELECT ?, image, label, top1, top2, top3, top4, top5, NULL FROM imagenet_d_predictions "
                    "WHERE evaluation_id=? AND domain=?", (rid, eid, d))
                db.execute(
                    "INSERT OR IGNORE INTO records(run_id, item, label, skipped) SELECT ?, image, -1, reason "
                    "FROM imagenet_d_skipped WHERE evaluation_id=? AND domain=?", (rid, eid, d))
        for t in ("imagenet_d_skipped", "imagenet_d_predictions", "imagenet_d_evaluations"):
            db.execute(f"DROP TABLE {t}")
    if "overlap_noc_evals" in tables:
        # Version 2 kept a digest of the model, data and benchmark and a description of each, not their
        # identities: the rows keep that digest as the model's checksum and are not resumed by new runs.
        ls = label_space("unrecorded", "unrecorded", [])
        for eid, ident, model, data, bench, seed, created in db.execute(
            "SELECT id, identity, model, data, benchmark, seed, created FROM overlap_noc_evals ORDER BY id"
        ).fetchall():
            mid = get_or_insert("SELECT id FROM models WHERE identity=? AND checksum=?", (f"unrecorded:{model}", ident),
                                "INSERT INTO models(name, identity, checksum, details, created) VALUES(?,?,?,?,?)",
                                (model, f"unrecorded:{model}", ident, _json({"stored_by": "schema 2"}), created))
            sid = get_or_insert("SELECT id FROM sources WHERE identity=?", (f"unrecorded:{data}",),
                                "INSERT INTO sources(kind, identity, location, classes, details) "
                                "VALUES('imagefolder',?,?,'[]','{}')", (f"unrecorded:{data}", data))
            new = int(db.execute(
                "INSERT INTO evaluations(model_id, source_id, benchmark, edition, seed, release, label_space_id, "
                "options, created) VALUES(?,?,'imagenet-noc','224',?,0,?,?,?)",
                (mid, sid, int(seed), ls, _json({"benchmark": bench, "identity": ident}), created),
            ).lastrowid or 0)
            conds = db.execute(
                "SELECT condition, COUNT(*), MIN(rowid) FROM overlap_noc_predictions WHERE eval_id=? "
                "GROUP BY condition ORDER BY condition != 'clean', MIN(rowid)", (eid,)
            ).fetchall()
            for cond, n, _ in conds:
                rid = run(new, sid, cond, int(n), created)
                db.execute(
                    "INSERT INTO records(run_id, item, label, correct) SELECT ?, key, -1, correct != 0 "
                    "FROM overlap_noc_predictions WHERE eval_id=? AND condition=?", (rid, eid, cond))
        for t in ("overlap_noc_predictions", "overlap_noc_evals"):
            db.execute(f"DROP TABLE {t}")


def _migrate_3_to_4(db: sqlite3.Connection) -> None:
    """Version 4: ``evaluations.seed`` as decimal text (seeds up to 2**64-1 kept exactly); rows unchanged."""
    # SQLite's table rebuild: new table, copy, drop, rename (runs' REFERENCES evaluations(id) then names the new one)
    _script(_SCHEMA_V4_EVALUATIONS.replace("EXISTS evaluations(", "EXISTS v4_evaluations("))(db)
    db.execute(
        "INSERT INTO v4_evaluations(id, model_id, source_id, benchmark, edition, seed, release, label_space_id, "
        "options, created) SELECT id, model_id, source_id, benchmark, edition, CAST(seed AS TEXT), release, "
        "label_space_id, options, created FROM evaluations"
    )
    db.execute("DROP TABLE evaluations")
    db.execute("ALTER TABLE v4_evaluations RENAME TO evaluations")


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _script(_SCHEMA_V2),
    2: _migrate_2_to_3,
    3: _migrate_3_to_4,
}
"""``MIGRATIONS[k]`` brings a store from schema version k to k + 1 (run in one transaction, in order)."""

_EXPECTED_COLUMNS.update(_expected_columns())



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
    options: dict[str, Any] = field(default_factory=dict, hash=False)
    """Benchmark-specific identity of the evaluation (ImageNet-D: the mapping's digest; ImageNet-NOC: the benchmark)."""


@dataclass(frozen=True)
class RunInfo:
    """One stored run (one condition of an evaluation) with its counts.

    ``corruption``/``severity`` are the stored ``condition``/``level`` (also readable under
    those names): a corruption and severity for ImageNet-C, a domain and 0 for ImageNet-D,
    a perturbation and level for ImageNet-P, whose items have ``frames`` frames each.
    """

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
    frames: int = 1
    n_unjudged: int = 0
    """Still images stored without a right/wrong flag (ImageNet-D rows of schema 2, scored with the mapping)."""

    @property
    def condition(self) -> str:
        """The stored condition name (``corruption``)."""
        return self.corruption

    @property
    def level(self) -> int:
        """The stored level (``severity``)."""
        return self.severity

    @property
    def top1_error(self) -> float | None:
        """Top-1 error over the predicted images (None if none, or if some carry no right/wrong flag)."""
        return self.n_wrong / self.n_predicted if self.n_predicted and not self.n_unjudged else None


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
        readonly: open the file read-only (SQLite ``mode=ro``): nothing on disk changes, an older schema is
            upgraded in a copy in memory. Default: read-only exactly when ``create`` is False.

    Raises:
        StoreError: the file is not a shiftbench store, fails the schema check (:meth:`check_schema`), is damaged,
            or cannot be opened.
        StoreSchemaError: the store was written by a newer schema.

    Example:
        >>> with ResultsStore("shiftbench-workspace/results.sqlite") as store:  # doctest: +SKIP
        ...     for ev in store.evaluations():
        ...         print(ev.model, store.runs(ev.id))
    """

    def __init__(self, path: str | Path = DEFAULT_STORE, *, create: bool = True, readonly: bool | None = None) -> None:
        self.path = Path(path)
        self.readonly = (not create) if readonly is None else bool(readonly)
        if self.path.exists() and self.path.is_dir():
            raise InvalidArgumentError("store", str(self.path), "a database file path, not a folder")
        if not self.path.exists():
            if not create or self.readonly:
                raise StoreError(f"--store {str(self.path)!r} does not exist (no results have been stored there yet)")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"--store {str(self.path)!r}: its folder cannot be created ({e.strerror or e})") from None
        try:
            if self.readonly:
                self._open_readonly()
            else:
                self._db = sqlite3.connect(str(self.path), timeout=1.0, isolation_level=None)
                self._db.text_factory = self._text
                self._db.execute("PRAGMA foreign_keys=ON")
                self._check_and_create()
                self.check_schema()
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
            if self.readonly:
                self.check_schema()
        except UnicodeDecodeError as e:
            self._db.close()
            raise StoreError(f"--store {str(self.path)!r} holds text that is not UTF-8 (a damaged file?): {e}") from None
        except (sqlite3.DatabaseError, StoreError) as e:
            if hasattr(self, "_db"):
                self._db.close()
            if isinstance(e, StoreError):
                raise
            raise StoreError(f"--store {str(self.path)!r} is not a usable SQLite results store: {e}") from None

    def _open_readonly(self) -> None:
        """Open the file with ``mode=ro``; an older schema is copied into memory and upgraded there.

        A store at rest (no writer connected: no ``-wal`` file beside it) is opened ``immutable``, so that reading
        it leaves no WAL files behind either (SQLite creates them for any reader of a WAL-mode file, and a read-only
        reader cannot remove them); with a writer connected, the reader shares its WAL.
        """
        from urllib.parse import quote

        uri = "file:" + quote(str(self.path.absolute()))
        at_rest = not Path(str(self.path) + "-wal").exists()
        try:
            self._db = sqlite3.connect(uri + ("?mode=ro&immutable=1" if at_rest else "?mode=ro"), uri=True,
                                       timeout=1.0, isolation_level=None)  # fmt: skip
            tables = _tables(self._db)
        except sqlite3.OperationalError:
            if hasattr(self, "_db"):
                self._db.close()
            self._db = sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, timeout=1.0, isolation_level=None)
            tables = _tables(self._db)
        self._db.text_factory = self._text
        if not tables:
            raise StoreError(f"--store {str(self.path)!r} is empty: no results have been stored there yet")
        if "meta" not in tables or self._schema_version() < SCHEMA_VERSION:
            # an older schema (or tables ImageNet-D/-NOC wrote alone): upgraded in a copy in memory, the file unchanged
            mem = sqlite3.connect(":memory:", isolation_level=None)
            mem.text_factory = self._text
            self._db.backup(mem)
            self._db.close()
            self._db = mem
            self._db.execute("PRAGMA foreign_keys=ON")
            self._check_and_create()
        self._db.execute("PRAGMA query_only=ON")

    def _text(self, raw: bytes) -> str:
        """SQLite text as str; text that is not UTF-8 (a damaged file) is a :class:`StoreError`, not a traceback."""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise StoreError(f"--store {str(self.path)!r} holds text that is not UTF-8 ({bytes(raw[:40])!r}...): "
                             "a damaged file") from None  # fmt: skip

    def _schema_version(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            raise StoreError(f"--store {str(self.path)!r} has no schema version: not a shiftbench results store")
        try:
            found = int(row[0])
        except (TypeError, ValueError):
            raise StoreError(f"--store {str(self.path)!r} has a malformed schema version {row[0]!r}") from None
        if found > SCHEMA_VERSION:
            raise StoreSchemaError(str(self.path), found, SCHEMA_VERSION)
        if found < 1:
            raise StoreError(f"--store {str(self.path)!r} has an unknown schema version {found}")
        return found

    def check_schema(self) -> None:
        """Refuse a store that is not exactly what this module writes (it could report wrong numbers).

        Checked: every table of the current schema is a table (not a view) with its columns; no triggers (an
        ``AFTER INSERT`` trigger could mark every record correct); JSON in the JSON columns; integers and numbers in
        the typed columns (SQLite accepts text in any column).

        Raises:
            StoreError: naming the file and the first problem found.
        """
        where = f"--store {str(self.path)!r}"
        state = _file_state(self.path)
        master = {(r[0], r[1]): r[2] for r in self._db.execute("SELECT type, name, tbl_name FROM sqlite_master")}
        triggers = sorted(name for kind, name in master if kind == "trigger")
        if triggers:
            raise StoreError(f"{where} holds trigger(s) {', '.join(map(repr, triggers[:5]))}, which shiftbench never "
                             "creates (they could change what is stored): not used. Drop them or pass another --store")  # fmt: skip
        for table, columns in _EXPECTED_COLUMNS.items():
            kinds = [kind for kind, name in master if name == table]
            if kinds != ["table"]:
                what = "is missing" if not kinds else f"is a {kinds[0]}, not a table"
                raise StoreError(f"{where}: {table!r} {what}; not a store shiftbench wrote")
            got = [(r[1], r[2]) for r in self._db.execute(f"PRAGMA table_info({table})")]
            if got != columns:
                raise StoreError(f"{where}: table {table!r} has the columns {[c for c, _ in got]} of types "
                                 f"{[t for _, t in got]}; expected {[c for c, _ in columns]} of types "
                                 f"{[t for _, t in columns]}")  # fmt: skip
        for table, col in _JSON_COLUMNS:
            row = self._db.execute(f"SELECT rowid, {col} FROM {table} WHERE typeof({col}) != 'text' OR "
                                   f"json_valid({col}) = 0 LIMIT 1").fetchone()  # fmt: skip
            if row is not None:
                raise StoreError(f"{where}: {table}.{col} of row {row[0]} is not JSON ({str(row[1])[:60]!r})")
        if state is not None and state in _CHECKED_FILES:
            return  # the typed columns of this very file (same size, times, inode and WAL) were checked in this process
        # one scan per table (records can hold millions of rows), then the offending column named
        for table in dict.fromkeys(t for t, _ in _INT_COLUMNS + _REAL_COLUMNS):
            ints = [c for t, c in _INT_COLUMNS if t == table]
            reals = [c for t, c in _REAL_COLUMNS if t == table]
            conds = [f"({c} IS NOT NULL AND typeof({c}) != 'integer')" for c in ints]
            conds += [f"({c} IS NOT NULL AND typeof({c}) NOT IN ('real', 'integer'))" for c in reals]
            row = self._db.execute(f"SELECT {', '.join(ints + reals)} FROM {table} WHERE {' OR '.join(conds)} "
                                   "LIMIT 1").fetchone()  # fmt: skip
            if row is None:
                continue
            for c, v in zip(ints + reals, row, strict=True):
                if v is not None and (isinstance(v, (str, bytes)) or (c in ints and isinstance(v, float))):
                    kind = "an integer" if c in ints else "a number"
                    raise StoreError(f"{where}: {table}.{c} holds {str(v)[:60]!r}, not {kind}")
            raise StoreError(f"{where}: table {table!r} holds a value of the wrong type")
        row = self._db.execute("SELECT seed FROM evaluations WHERE typeof(seed) != 'text' OR NOT (seed = '-1' OR "
                               "(seed != '' AND length(seed) <= 20 AND seed NOT GLOB '*[^0-9]*')) LIMIT 1").fetchone()  # fmt: skip
        if row is not None:
            raise StoreError(f"{where}: evaluations.seed holds {str(row[0])[:60]!r}, not a seed")
        if state is not None:
            _CHECKED_FILES.add(state)

    def _check_and_create(self) -> None:
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables == {"meta"} and self._db.execute("SELECT COUNT(*) FROM meta").fetchone()[0] == 0:
            tables = set()  # an empty meta table and nothing else: a store whose creation never finished
        if "meta" in tables:
            found = self._schema_version()
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
            _script(_SCHEMA + _SCHEMA_V4_EVALUATIONS + _SCHEMA_V3_RESULTS)(self._db)
            _import_companions(self._db)  # a file ImageNet-D or ImageNet-NOC wrote before schema 3
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
                if "readonly" in str(e) or "read-only" in str(e):
                    raise StoreError(f"--store {str(self.path)!r} was opened read-only (a command that only reads "
                                     "results); nothing is written to it") from None  # fmt: skip
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
        """Upgrade an older store in place, one version at a time (:data:`MIGRATIONS`), each step in one
        transaction: a step that fails leaves the file as it was before that step."""
        self._db.execute("PRAGMA foreign_keys=OFF")  # tables are rebuilt; the keys are checked before each commit
        try:
            while True:
                self._begin()
                try:
                    found = int(self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])
                    if found >= SCHEMA_VERSION:
                        self._db.execute("COMMIT")
                        return
                    MIGRATIONS[found](self._db)
                    bad = self._db.execute("PRAGMA foreign_key_check").fetchall()
                    if bad:
                        raise StoreError(
                            f"--store {str(self.path)!r}: upgrading schema {found} to {found + 1} left "
                            f"{len(bad)} row(s) without their parent (first: table {bad[0][0]}); the file is unchanged"
                        )
                    self._db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(found + 1),))
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
        finally:
            self._db.execute("PRAGMA foreign_keys=ON")

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
        options: dict[str, Any] | None = None,
    ) -> int:
        """Id of the evaluation with these settings (inserted on first use).

        ``source_id`` is the data the corrupted images come from; the clean run
        may use other data (its own ``source_id`` is stored with the run).
        ``options``: benchmark-specific identity (JSON; part of the evaluation's key).
        """
        key = (model_id, source_id, benchmark, edition, _seed_text(seed), int(release), label_space_id,
               _json(options or {}))  # fmt: skip
        return self._get_or_insert(
            "SELECT id FROM evaluations WHERE model_id=? AND source_id=? AND benchmark=? "
            "AND edition=? AND seed=? AND release=? AND label_space_id=? AND options=?",
            key,
            "INSERT INTO evaluations(model_id, source_id, benchmark, edition, seed, release, "
            "label_space_id, options, created) VALUES(?,?,?,?,?,?,?,?,?)",
            (*key, time.time()),
        )

    def register_run(
        self,
        evaluation_id: int,
        source_id: int,
        condition: str,
        level: int,
        n_expected: int,
        versions: dict[str, str],
        *,
        frames: int = 1,
    ) -> int:
        """Id of the run for this condition and level (inserted on first use).

        ``frames``: frames per item (1 for still images; T for ImageNet-P's videos).

        Raises:
            StoreError: a stored run of this condition used other data, another frame
                count, or expects a different number of items (the data changed since it was started).
        """
        row = self._db.execute(
            "SELECT id, n_expected, source_id, frames FROM runs WHERE evaluation_id=? AND condition=? AND level=?",
            (evaluation_id, condition, level),
        ).fetchone()
        if row is not None:
            what = f"stored run {row[0]} ({condition}, {'level' if frames > 1 else 'severity'} {level})"
            if int(row[2]) != source_id:
                loc = self._db.execute("SELECT location FROM sources WHERE id=?", (row[2],)).fetchone()
                raise StoreError(
                    f"{what} was evaluated on other data "
                    f"({loc[0] if loc else 'unknown'}). Rerun with --rerun to replace it, or pass another --store."
                )
            if int(row[3]) != frames:
                raise StoreError(
                    f"{what} has {row[3]} frames per item, not {frames}. Rerun with --rerun, or pass another --store."
                )
            if int(row[1]) != n_expected:
                unit = "videos" if frames > 1 else "images"
                raise StoreError(
                    f"{what} expects {row[1]} {unit} but the data now has {n_expected}: the data changed since it "
                    "was started. Rerun with --rerun to start it over, or pass another --store."
                )
            return int(row[0])
        now = time.time()
        return self._get_or_insert(
            "SELECT id FROM runs WHERE evaluation_id=? AND condition=? AND level=?",
            (evaluation_id, condition, level),
            "INSERT INTO runs(evaluation_id, source_id, condition, level, frames, n_expected, status, versions, "
            "created, updated) VALUES(?,?,?,?,?,?,'running',?,?,?)",
            (evaluation_id, source_id, condition, level, frames, n_expected, _json(versions), now, now),
        )

    def delete_runs(self, run_ids: Sequence[int]) -> None:
        """Delete runs with their records (for ``--rerun``)."""
        with self.transaction():
            for rid in run_ids:
                self._db.execute("DELETE FROM records WHERE run_id=?", (rid,))
                self._db.execute("DELETE FROM runs WHERE id=?", (rid,))

    # -- writing ---------------------------------------------------------------------

    def done_keys(self, run_id: int) -> set[str]:
        """Item ids already recorded (predicted or skipped) in a run."""
        return {r[0] for r in self._db.execute("SELECT item FROM records WHERE run_id=?", (run_id,))}

    def write_batch(
        self,
        run_id: int,
        keys: Sequence[str],
        labels: Sequence[int],
        topk: Sequence[Sequence[int]],
        skipped: Sequence[tuple[str, str]] = (),
        correct: Sequence[bool] | None = None,
    ) -> None:
        """Store one batch of still-image predictions (and skipped images) in one transaction.

        ``correct``: whether each top-1 prediction is right, for benchmarks whose labels are not
        classes of the label space (ImageNet-D); default: top-1 equals the label.
        Rows already present are left as they are (a resumed run never duplicates).
        """
        rows = []
        if correct is not None and len(correct) != len(keys):
            raise InvalidArgumentError("correct", len(correct), f"one flag per image ({len(keys)})")
        for j, (key, label, top) in enumerate(zip(keys, labels, topk, strict=True)):
            t = [int(v) for v in top][:5]
            if not t:
                raise InvalidArgumentError("topk", list(top), "at least one predicted class per image")
            ok = int(t[0] == int(label)) if correct is None else int(bool(correct[j]))
            padded: list[int | None] = [*t, *[None] * (5 - len(t))]
            rows.append((run_id, key, int(label), *padded, ok))
        with self.transaction():
            self._db.executemany(
                "INSERT OR IGNORE INTO records(run_id, item, label, top1, top2, top3, top4, top5, correct) "
                "VALUES(?,?,?,?,?,?,?,?,?)",
                rows,
            )
            self._db.executemany(
                "INSERT OR IGNORE INTO records(run_id, item, label, skipped) VALUES(?,?,-1,?)",
                [(run_id, k, r[:500] or "unreadable") for k, r in skipped],
            )
            self._db.execute("UPDATE runs SET updated=? WHERE id=?", (time.time(), run_id))

    def write_sequences(
        self,
        run_id: int,
        items: Sequence[tuple[str, int, Any]],
        skipped: Sequence[tuple[str, int, str]] = (),
    ) -> None:
        """Store finished multi-frame items ``(key, label, T x 5 top-5)`` and skips ``(key, label, reason)``
        in one transaction (:func:`encode_top5`). Rows already present are left as they are."""
        rows: list[tuple[int, str, int, bytes | None, str | None]] = [
            (run_id, k, int(lab), encode_top5(t5), None) for k, lab, t5 in items
        ]
        rows += [(run_id, k, int(lab), None, reason[:500] or "unreadable") for k, lab, reason in skipped]
        with self.transaction():
            self._db.executemany(
                "INSERT OR IGNORE INTO records(run_id, item, label, frames_top5, skipped) VALUES(?,?,?,?,?)", rows
            )
            self._db.execute("UPDATE runs SET updated=? WHERE id=?", (time.time(), run_id))

    def finish_run(self, run_id: int) -> bool:
        """Mark a run complete if every expected item is recorded and one is scored; returns whether it is."""
        with self.transaction():
            row = self._db.execute(
                "SELECT r.n_expected, COUNT(c.item), COALESCE(SUM(c.item IS NOT NULL AND c.skipped IS NULL), 0) FROM runs r "
                "LEFT JOIN records c ON c.run_id=r.id WHERE r.id=? GROUP BY r.id",
                (run_id,),
            ).fetchone()
            if row is None:
                return False
            done = int(row[1]) >= int(row[0]) and int(row[2]) > 0
            if done:
                now = time.time()
                self._db.execute(
                    "UPDATE runs SET status='complete', error=NULL, finished=?, updated=? WHERE id=?",
                    (now, now, run_id),
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
            "e.release, e.created, e.options FROM evaluations e JOIN models m ON m.id=e.model_id "
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
                json.loads(r[12]),
            )
            for r in rows
        ]
        if model is not None:
            out = [e for e in out if model.lower() in e.model.lower()]
        return out

    def sources(self) -> dict[str, str]:
        """Every stored data source's location -> its identity (what identifies the data, not where it lies)."""
        return {str(loc): str(ident) for loc, ident in self._db.execute("SELECT location, identity FROM sources")}

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
        """Runs of an evaluation with their counts, level 0 (clean, domains) first, then in insertion order."""
        rows = self._db.execute(
            "SELECT r.id, r.evaluation_id, r.condition, r.level, r.status, r.n_expected, "
            "COALESCE(SUM(c.item IS NOT NULL AND c.skipped IS NULL), 0), COALESCE(SUM(c.correct = 0), 0), "
            "COALESCE(SUM(c.skipped IS NOT NULL), 0), r.error, r.frames, "
            "COALESCE(SUM(c.item IS NOT NULL AND c.skipped IS NULL AND c.frames_top5 IS NULL AND c.correct IS NULL), 0) "
            "FROM runs r LEFT JOIN records c ON c.run_id=r.id "
            "WHERE r.evaluation_id=? GROUP BY r.id ORDER BY r.level!=0, r.id",
            (evaluation_id,),
        ).fetchall()
        return [
            RunInfo(int(r[0]), int(r[1]), r[2], int(r[3]), r[4], int(r[5]), int(r[6]), int(r[7]), int(r[8]), r[9],
                    int(r[10]), int(r[11]))
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
        # Baselines are evaluations of corruptions at severities 1..5 on still images (not ImageNet-P's videos,
        # nor benchmarks whose conditions have no severity).
        graded = {
            int(r[0])
            for r in self._db.execute(
                "SELECT evaluation_id FROM runs GROUP BY evaluation_id HAVING MAX(frames) = 1 AND MAX(level) >= 1"
            )
        }
        evs = [e for e in self.evaluations() if e.id in graded]
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

    def top5(self, run_id: int) -> tuple[list[str], np.ndarray, np.ndarray, list[tuple[str, str]]]:
        """Stored still-image records of a run, ordered by item.

        Returns:
            ``(items, labels (N,), top-5 (N x 5 int64, -1 where not stored), skipped [(item, reason)])``.
        """
        items: list[str] = []
        labels: list[int] = []
        tops: list[list[int]] = []
        skipped: list[tuple[str, str]] = []
        for rec in self._db.execute(
            "SELECT item, label, top1, top2, top3, top4, top5, skipped FROM records WHERE run_id=? ORDER BY item",
            (run_id,),
        ):
            if rec[7] is not None:
                skipped.append((rec[0], rec[7]))
                continue
            items.append(rec[0])
            labels.append(int(rec[1]))
            tops.append([-1 if v is None else int(v) for v in rec[2:7]])
        return items, np.asarray(labels, dtype=np.int64), np.asarray(tops, dtype=np.int64).reshape(-1, 5), skipped

    # -- ImageNet-P runs (runs whose items are videos of `frames` frames) ------------------

    def p_runs(self, evaluation_id: int) -> list[RunInfo]:
        """The runs of an evaluation whose items are videos (frames > 1), in insertion order."""
        return [r for r in sorted(self.runs(evaluation_id), key=lambda r: r.id) if r.frames > 1]

    def p_top5(self, run_id: int) -> tuple[list[str], np.ndarray, np.ndarray, list[tuple[str, str]]]:
        """Stored videos of an ImageNet-P run, ordered by video id.

        Returns:
            ``(videos, labels (N,), top5 (N x T x 5 int64), skipped [(video, reason)])``.
        """
        row = self._db.execute("SELECT frames FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None or int(row[0]) < 2:
            raise InvalidArgumentError("run", run_id, "the id of a stored ImageNet-P run")
        frames = int(row[0])
        videos: list[str] = []
        labels: list[int] = []
        tops: list[np.ndarray] = []
        skipped: list[tuple[str, str]] = []
        for v, lab, blob, why in self._db.execute(
            "SELECT item, label, frames_top5, skipped FROM records WHERE run_id=? ORDER BY item", (run_id,)
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
        where = "" if evaluation_id is None else "AND e.id=?"
        args: tuple[Any, ...] = () if evaluation_id is None else (evaluation_id,)
        base = (
            "SELECT r.id, e.id, m.name, m.checksum, s.kind, s.location, e.benchmark, e.edition, e.seed, e.release, "
            "r.condition, r.level, r.status, r.n_expected, r.versions, r.error, l.classes, "
            "json_extract(e.options, '$.label_classes'), s.classes "
            "FROM runs r JOIN evaluations e ON e.id=r.evaluation_id JOIN models m ON m.id=e.model_id "
            f"JOIN sources s ON s.id=r.source_id JOIN label_spaces l ON l.id=e.label_space_id "
            f"WHERE r.frames=1 {where} ORDER BY r.id"
        )
        out: list[dict[str, Any]] = []
        runs: dict[int, RunInfo] = {}
        for r in self._db.execute(base, args).fetchall():
            if int(r[0]) not in runs:
                runs.update((x.id, x) for x in self.runs(int(r[1])))
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
                info = runs[int(r[0])]
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
            # labels of evaluations with options {"label_classes": "source"} (ImageNet-D) index the data's classes
            names = json.loads(r[18]) if r[17] == "source" else classes
            for p in self._db.execute(
                "SELECT item, label, top1, top2, top3, top4, top5, correct FROM records "
                "WHERE run_id=? AND skipped IS NULL ORDER BY item",
                (r[0],),
            ):
                top = [v for v in p[2:7] if v is not None]
                out.append(
                    {
                        **meta,
                        "image": p[0],
                        "label": int(p[1]),
                        "label_class": names[int(p[1])] if 0 <= int(p[1]) < len(names) else None,
                        "top1": None if p[2] is None else int(p[2]),
                        "top5": " ".join(str(int(v)) for v in top),
                        "top5_classes": " ".join(classes[int(v)] for v in top if 0 <= int(v) < len(classes)),
                        "correct": bool(p[7]),
                    }
                )
        return out

    def _p_rows(self, table: str, evaluation_id: int | None) -> list[dict[str, Any]]:
        where = "" if evaluation_id is None else "AND e.id=?"
        args: tuple[Any, ...] = () if evaluation_id is None else (evaluation_id,)
        base = (
            "SELECT r.id, e.id, m.name, m.checksum, s.kind, s.location, e.benchmark, e.edition, e.seed, "
            "r.condition, r.level, r.frames, r.status, r.n_expected, r.versions, r.error "
            "FROM runs r JOIN evaluations e ON e.id=r.evaluation_id JOIN models m ON m.id=e.model_id "
            f"JOIN sources s ON s.id=r.source_id WHERE r.frames>1 {where} ORDER BY r.id"
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
                        "n_scored": info.n_predicted,
                        "n_skipped": info.n_skipped,
                        "versions": r[14],
                        "error": r[15],
                    }
                )
                continue
            for v, lab, blob, why in self._db.execute(
                "SELECT item, label, frames_top5, skipped FROM records WHERE run_id=? ORDER BY item", (r[0],)
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
