"""Write corrupted datasets to disk in the published layouts.

* ImageNet-style editions (224, 299, 64): ``<out>/<corruption>/<severity>/<class>/<file>``,
  JPEG quality 85 (4:2:0, optimised Huffman tables) of the 8-bit truncated
  corruption, as the published ImageNet-C / Tiny-ImageNet-C files were stored.
* CIFAR edition (32) or an array source: ``<out>/<corruption>.npy`` (uint8,
  N*S x 32 x 32 x 3, severity-major) and ``<out>/labels.npy``, raw 8-bit (no JPEG),
  as CIFAR-10-C.

Runs are resumable: every file is written to a temporary name and renamed into
place, so a killed run never leaves a truncated file; a journal
(``<out>/.shiftbench/journal.sqlite``) records each finished file with its
SHA-256; a rerun of the same command completes only what is missing. At the end
``manifest.json`` (settings, versions, counts, failures) and
``checksums.sha256`` (``sha256sum -c`` format) are written.
"""

from __future__ import annotations

import hashlib
import io
import json
import multiprocessing as mp
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from .api import corrupt
from .checks import check_severity
from .corruptions._registry import FAMILIES, get_corruption, list_corruptions
from .editions import get_edition, preprocess
from .errors import DataError, InvalidArgumentError
from .io import ImageRecord, load_image_rgb, scan_image_folder
from .outputs import check_output_folder
from .rng.seeding import image_key
from .sources import ArraySource, load_array_source
from .version import __version__

__all__ = ["GenerateConfig", "GenerateReport", "generate"]

JPEG_QUALITY = 85
_STATE_DIR = ".shiftbench"


@dataclass
class GenerateConfig:
    """Settings of one generation run (also its fingerprint for resuming)."""

    src: str
    out: str
    edition: str = "224"
    corruptions: list[str] = field(default_factory=list)
    severities: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    seed: int = 0
    workers: int = 0  # 0: one per CPU core
    batch_size: int = 32
    labels: str | None = None
    device: str = "cpu"  # where corruptions run; not in the fingerprint (same pixels on every device)
    ray: str | None = None  # None: this machine; else a Ray address ("" RAY_ADDRESS or local, "auto", HOST:PORT, ray://...)

    def fingerprint(self) -> dict[str, Any]:
        return {"edition": self.edition, "seed": self.seed, "jpeg_quality": JPEG_QUALITY, "shiftbench": __version__}


@dataclass
class GenerateReport:
    written: int = 0
    already_done: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    layout: str = "folder"
    out: str = ""
    cluster: str | None = None  # the Ray cluster that ran it (None: this machine)

    @property
    def ok(self) -> bool:
        return not self.failed


def _versions() -> dict[str, str]:
    import cv2
    import PIL
    import scipy

    return {
        "shiftbench": __version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "pillow": PIL.__version__,
        "opencv": cv2.__version__,
    }


# ----------------------------------------------------------------------------- journal


class _Journal:
    def __init__(self, out: Path, config: GenerateConfig, resume_check: bool = True) -> None:
        state = out / _STATE_DIR
        state.mkdir(parents=True, exist_ok=True)
        # concurrent runs (a job array writing into one --out) share the journal: wait for each other's writes
        self.db = sqlite3.connect(state / "journal.sqlite", timeout=600)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        self.db.execute("CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL, bytes INTEGER)")
        # what finished runs produced (corruption, severity) and the source files they could not read
        self.db.execute("CREATE TABLE IF NOT EXISTS tasks (corruption TEXT, severity INTEGER, PRIMARY KEY (corruption, severity))")
        self.db.execute("CREATE TABLE IF NOT EXISTS failures (file TEXT PRIMARY KEY, reason TEXT)")
        fp = json.dumps(config.fingerprint(), sort_keys=True)
        self.db.execute("INSERT OR IGNORE INTO meta VALUES ('fingerprint', ?)", (fp,))
        self.db.commit()
        row = self.db.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()
        if row[0] != fp and resume_check:
            raise DataError(
                f"--out {str(out)!r} was generated with other settings {row[0]}; this run has {fp}. "
                "Use a new output folder (or delete the old one) rather than mixing settings."
            )
        self.done: dict[str, str] = dict(self.db.execute("SELECT path, sha256 FROM files"))

    def add(self, rows: Sequence[tuple[str, str, int]]) -> None:
        if not rows:
            return
        self.db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?)", rows)
        self.db.commit()
        for p, h, _ in rows:
            self.done[p] = h

    def finish(self, names: Sequence[str], sevs: Sequence[int], failed: Sequence[tuple[str, str]]) -> None:
        """Record a completed run: its corruptions and severities and the files it could not read."""
        self.db.executemany("INSERT OR IGNORE INTO tasks VALUES (?, ?)", [(n, s) for n in names for s in sevs])
        self.db.executemany("INSERT OR REPLACE INTO failures VALUES (?, ?)", list(failed))
        self.db.commit()

    def close(self) -> None:
        self.db.close()


class _RunDir:
    """This run's own temporary folder under ``<out>/.shiftbench/tmp``, held by an exclusive lock.

    Runs into one ``--out`` never share temporary files. A folder whose lock is free belongs to a
    run that ended or was killed (the lock dies with its process), so a new run removes it.
    """

    def __init__(self, out: Path) -> None:
        root = out / _STATE_DIR / "tmp"
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / f"run-{os.getpid()}-{os.urandom(6).hex()}"
        self.path.mkdir()
        self._fh = open(self.path / "lock", "wb")  # noqa: SIM115 - held for the run's lifetime
        _lock(self._fh, blocking=True)
        for other in root.iterdir():
            if other != self.path and other.is_dir():
                _remove_if_abandoned(other)

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self._fh.close()


def checksum_line(digest: str, path: str) -> str:
    """One line of ``sha256sum`` output, as GNU ``sha256sum -c`` reads it: a name holding a newline, a carriage
    return or a backslash is escaped (``\\n``, ``\\r``, ``\\\\``) and the line starts with a backslash."""
    if any(c in path for c in "\\\n\r"):
        esc = path.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return f"\\{digest}  {esc}\n"
    return f"{digest}  {path}\n"


def _lock(fh: Any, blocking: bool) -> bool:
    """An exclusive advisory lock on an open file (released when the process ends, even by SIGKILL)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: runs into one --out are not coordinated
        return True
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _remove_if_abandoned(run_dir: Path) -> None:
    try:
        fh = open(run_dir / "lock", "rb")  # noqa: SIM115
    except OSError:
        return  # being removed, or just created (its run locks it next)
    with fh:
        if _lock(fh, blocking=False):
            shutil.rmtree(run_dir, ignore_errors=True)


def _sha256_file(path: Path) -> tuple[str, int]:
    data = path.read_bytes()
    return hashlib.sha256(data).hexdigest(), len(data)


def _atomic_write_bytes(path: Path, data: bytes, tmp_dir: Path) -> None:
    # unique per writer: on a cluster a shard run again after its node was lost may overlap the first attempt
    tmp = tmp_dir / f"{os.getpid()}-{os.urandom(4).hex()}-{hashlib.md5(str(path).encode()).hexdigest()}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as e:  # disk full, folder removed or made read-only during the run: one line, resumable
        tmp.unlink(missing_ok=True)
        raise DataError(f"--out: {str(path)!r} could not be written: {e}. Rerun the same command to resume.") from None


def _out_name(relpath: str) -> str:
    p = Path(relpath)
    if p.suffix.lower() in (".jpeg", ".jpg"):
        return relpath
    return str(p.with_suffix(".JPEG").as_posix())


# ----------------------------------------------------------------------------- workers


def _init_worker() -> None:
    # one thread per worker process, OpenCV's pool included (it oversubscribes the cores otherwise)
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import cv2

    cv2.setNumThreads(1)


@dataclass
class _FolderChunk:
    records: list[tuple[str, str]]  # (absolute path, relpath)
    tasks: list[tuple[str, int, list[int]]]  # (corruption, severity, indices into records)
    edition: str
    seed: int
    out: str
    device: str = "cpu"
    tmp: str = ""


def _run_folder_chunk(chunk: _FolderChunk) -> tuple[list[tuple[str, str, int]], list[tuple[str, str]], int]:
    out = Path(chunk.out)
    tmp_dir = Path(chunk.tmp)
    images: dict[int, np.ndarray] = {}
    failed: list[tuple[str, str]] = []
    for i, (path, rel) in enumerate(chunk.records):
        try:
            images[i] = np.asarray(preprocess(load_image_rgb(Path(path)), chunk.edition))
        except Exception as e:  # noqa: BLE001 - report any unreadable file, keep going
            failed.append((rel, f"{type(e).__name__}: {e}"))
    # each image's content key, once for all its corruptions and severities (the same keys
    # corrupt() would compute from the pixels, so the draws are unchanged)
    keys = {i: image_key(np.ascontiguousarray(im.transpose(2, 0, 1))) for i, im in images.items()}
    rows: list[tuple[str, str, int]] = []
    n_done = 0
    for name, sev, idx in chunk.tasks:
        ok = [i for i in idx if i in images]
        n_done += len(idx) - len(ok)
        if not ok:
            continue
        batch = torch.from_numpy(np.stack([images[i] for i in ok])).permute(0, 3, 1, 2).to(chunk.device)
        res = corrupt(batch, name, sev, seed=chunk.seed, edition=chunk.edition, release=False, keys=[keys[i] for i in ok]).cpu()
        arr = res.permute(0, 2, 3, 1).numpy()
        for j, i in enumerate(ok):
            buf = io.BytesIO()
            Image.fromarray(arr[j]).save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=True)
            data = buf.getvalue()
            rel = f"{name}/{sev}/{_out_name(chunk.records[i][1])}"
            _atomic_write_bytes(out / rel, data, tmp_dir)
            rows.append((rel, hashlib.sha256(data).hexdigest(), len(data)))
        n_done += len(ok)
    return rows, failed, n_done


@dataclass
class _ArrayTask:
    images: np.ndarray
    name: str
    severity: int
    edition: str
    seed: int
    out: str
    batch_size: int
    device: str = "cpu"
    tmp: str = ""


def _run_array_task(task: _ArrayTask) -> tuple[list[tuple[str, str, int]], list[tuple[str, str]], int]:
    out = Path(task.out)
    res = np.empty_like(task.images)
    for a in range(0, len(task.images), task.batch_size):
        b = torch.from_numpy(task.images[a : a + task.batch_size]).permute(0, 3, 1, 2).to(task.device)
        res[a : a + task.batch_size] = (
            corrupt(b, task.name, task.severity, seed=task.seed, edition=task.edition).cpu().permute(0, 2, 3, 1).numpy()
        )
    buf = io.BytesIO()
    np.save(buf, res)
    data = buf.getvalue()
    rel = f"{_STATE_DIR}/parts/{task.name}_{task.severity}.npy"
    _atomic_write_bytes(out / rel, data, Path(task.tmp))
    return [(rel, hashlib.sha256(data).hexdigest(), len(data))], [], len(task.images)


def _map(fn: Callable[[Any], Any], items: list[Any], workers: int) -> Iterator[Any]:
    if workers <= 1 or len(items) <= 1:
        for it in items:
            yield fn(it)
        return
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(workers, initializer=_init_worker)
    try:
        yield from pool.imap_unordered(fn, items)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _shards(chunk: _FolderChunk) -> list[_FolderChunk]:
    """A chunk split per corruption (its images x that corruption's severities): the unit of work on a
    cluster, small enough to spread a few thousand images over many nodes. Each shard reads only the
    images it needs."""
    by_name: dict[str, list[tuple[str, int, list[int]]]] = {}
    for t in chunk.tasks:
        by_name.setdefault(t[0], []).append(t)
    if len(by_name) <= 1:
        return [chunk]
    out = []
    for tasks in by_name.values():
        used = sorted({i for _, _, idx in tasks for i in idx})
        new = {old: k for k, old in enumerate(used)}
        out.append(_FolderChunk([chunk.records[i] for i in used], [(n, s, [new[i] for i in idx]) for n, s, idx in tasks],
                                chunk.edition, chunk.seed, chunk.out, chunk.device, chunk.tmp))
    return out


def _absolute(chunk: _FolderChunk) -> _FolderChunk:
    """The chunk with absolute paths (a cluster's workers do not run in the driver's folder)."""
    return _FolderChunk([(str(Path(p).absolute()), rel) for p, rel in chunk.records], chunk.tasks, chunk.edition, chunk.seed,
                        str(Path(chunk.out).absolute()), chunk.device, str(Path(chunk.tmp).absolute()))


def _run_array_task_shared(images: np.ndarray, task: _ArrayTask) -> tuple[list[tuple[str, str, int]], list[tuple[str, str]], int]:
    """:func:`_run_array_task` with the images from the cluster's object store (read-only there)."""
    task.images = images if images.flags.writeable else images.copy()
    return _run_array_task(task)


# ----------------------------------------------------------------------------- driver


def _resolve(config: GenerateConfig) -> tuple[list[str], list[int]]:
    get_edition(config.edition)
    if isinstance(config.seed, bool) or not isinstance(config.seed, int) or not 0 <= config.seed < 2**64:
        raise InvalidArgumentError("--seed", config.seed, "an integer in 0..2**64-1")
    edition = get_edition(config.edition).name
    names = list_corruptions(config.corruptions or "*", edition=edition)
    if not names:
        raise InvalidArgumentError("--corruptions", ",".join(config.corruptions), f"names or wildcards matching corruptions of edition {edition}")
    for item in config.corruptions:  # a name asked for by name must not be dropped silently
        if not any(ch in item for ch in "*?[") and item.strip().lower() not in ("all", "benchmark", "extra", "candidate"):
            key = item.strip().lower().replace("-", "_")
            if key in FAMILIES:
                continue
            spec = get_corruption(key)
            if spec.name not in names:
                raise InvalidArgumentError(
                    "--corruptions", item, f"corruptions defined for edition {edition}" + (" (overlap candidates are selected with 'candidate')" if spec.group == "candidate" else "")
                )
    sevs = sorted({check_severity(s, "--severities") for s in config.severities})
    if not sevs:
        raise InvalidArgumentError("--severities", config.severities, "one or more integers in 1..5")
    if config.batch_size < 1:
        raise InvalidArgumentError("--batch-size", config.batch_size, "a positive integer")
    if config.workers < 0:
        raise InvalidArgumentError("--workers", config.workers, "0 (one per core) or a positive integer")
    from .evaluation.models import parse_device

    if config.ray is not None and str(config.device).startswith("cuda"):
        # the cluster's workers have the GPUs (Ray gives each task one and shows it as "cuda"), not the driver
        config.device = "cuda"
    else:
        config.device = str(parse_device(config.device, "--device"))
    return names, sevs


def generate(
    config: GenerateConfig,
    progress: Callable[[int, int], None] | None = None,
) -> GenerateReport:
    """Generate a corrupted dataset (see the module docstring). ``progress(done, total)`` is called as work completes."""
    names, sevs = _resolve(config)
    edition = get_edition(config.edition).name
    config.edition = edition
    src = Path(config.src)
    array_input = src.is_file() or (src.is_dir() and ((src / "test_batch").exists() or (src / "test").is_file()))
    layout = "cifar" if (edition == "32" or array_input) else "folder"
    out = Path(config.out)
    # everything that can be refused is refused before --out is touched: settings, output place, sources
    check_output_folder(out, "--out")
    source = _read_source(config, layout, array_input)
    out.mkdir(parents=True, exist_ok=True)
    run = _RunDir(out)
    workers = config.workers or (os.cpu_count() or 1)
    report = GenerateReport(layout=layout, out=str(out))
    t0 = time.perf_counter()
    executor = None
    try:
        if config.ray is not None:
            from .distributed import RayExecutor

            executor = RayExecutor(config.ray, num_gpus=1 if config.device.startswith("cuda") else 0,
                                   local_cpus=config.workers or None)
            report.cluster = executor.describe()
            # every node writes into this run's folder and reads --src: both must be shared storage
            executor.check_paths([str(src.resolve()), str(run.path.resolve())], "--out/--src")
        journal = _Journal(out, config)
        try:
            if layout == "folder":
                _generate_folder(config, source, names, sevs, journal, report, workers, progress, run.path, executor)
            else:
                _generate_arrays(config, source, names, sevs, journal, report, workers, progress, run.path, executor)
            journal.finish(names, sevs, report.failed)
        finally:
            report.seconds = time.perf_counter() - t0
            journal.close()
        _write_manifest(out, config, report, run.path)
    finally:
        if executor is not None:
            report.cluster = f"{report.cluster}; {executor.health()}"  # nodes lost, shards run again
            executor.close()
        run.close()
    return report


@dataclass
class _Source:
    """The clean images of a run, read (or listed) before anything is written."""

    records: list[ImageRecord] = field(default_factory=list)  # folder layout: files, read by the workers
    images: np.ndarray | None = None  # array layout: N x H x W x 3 uint8
    labels: np.ndarray | None = None
    failed: list[tuple[str, str]] = field(default_factory=list)  # unreadable source files


def _read_source(config: GenerateConfig, layout: str, array_input: bool) -> _Source:
    """List or load ``--src``; a missing, empty or unreadable source is a :class:`DataError`."""
    if layout == "folder":
        return _Source(records=scan_image_folder(config.src, arg="--src")[0])
    if array_input:
        arr: ArraySource = load_array_source(config.src, config.labels)
        if arr.images.shape[1:3] != (32, 32) and config.edition == "32":
            raise InvalidArgumentError("--src", f"images of {arr.images.shape[1]}x{arr.images.shape[2]}", "32x32 images for the CIFAR edition")
        return _Source(images=arr.images, labels=arr.labels)
    records, _ = scan_image_folder(config.src, arg="--src")
    imgs, labs, failed = [], [], []
    for r in records:
        try:
            imgs.append(np.asarray(preprocess(load_image_rgb(r.path), config.edition)))
            labs.append(r.label)
        except Exception as e:  # noqa: BLE001
            failed.append((r.relpath, f"{type(e).__name__}: {e}"))
    if not imgs:
        raise DataError(f"--src {config.src!r}: none of the images could be read")
    return _Source(images=np.stack(imgs), labels=np.asarray(labs), failed=failed)


def _generate_folder(
    config: GenerateConfig,
    source: _Source,
    names: list[str],
    sevs: list[int],
    journal: _Journal,
    report: GenerateReport,
    workers: int,
    progress: Callable[[int, int], None] | None,
    tmp: Path,
    executor: Any = None,
) -> None:
    records = source.records
    out = Path(config.out)
    total = len(records) * len(names) * len(sevs)
    chunks: list[_FolderChunk] = []
    recovered: list[tuple[str, str, int]] = []
    bs = config.batch_size
    for a in range(0, len(records), bs):
        recs: list[ImageRecord] = records[a : a + bs]
        tasks = []
        for name in names:
            for s in sevs:
                missing = missing_outputs(journal, out, [f"{name}/{s}/{_out_name(r.relpath)}" for r in recs], recovered)
                if missing:
                    tasks.append((name, s, missing))
        if tasks:
            chunks.append(_FolderChunk([(str(r.path), r.relpath) for r in recs], tasks, config.edition, config.seed, str(out), config.device, str(tmp)))
    journal.add(recovered)
    todo = sum(len(t[2]) for c in chunks for t in c.tasks)
    report.already_done = total - todo
    done = report.already_done
    if progress:
        progress(done, total)
    failed_images: dict[str, str] = {}
    if executor is not None:
        stream = executor.map_unordered(_run_folder_chunk, (_absolute(s) for c in chunks for s in _shards(c)))
    else:
        stream = _map(_run_folder_chunk, chunks, workers)
    for rows, failed, n in stream:
        journal.add(rows)
        report.written += len(rows)
        for rel, why in failed:
            failed_images[rel] = why
        done += n
        if progress:
            progress(done, total)
    report.failed = sorted(failed_images.items())


def _generate_arrays(
    config: GenerateConfig,
    source: _Source,
    names: list[str],
    sevs: list[int],
    journal: _Journal,
    report: GenerateReport,
    workers: int,
    progress: Callable[[int, int], None] | None,
    tmp: Path,
    executor: Any = None,
) -> None:
    out = Path(config.out)
    assert source.images is not None and source.labels is not None
    images, labels = source.images, source.labels
    report.failed.extend(source.failed)
    n = len(images)
    total = n * len(names) * len(sevs)
    tasks = []
    for name in names:
        for s in sevs:
            rel = f"{_STATE_DIR}/parts/{name}_{s}.npy"
            final_done = (out / f"{name}.npy").exists() and f"{name}.npy" in journal.done
            if final_done or (rel in journal.done and (out / rel).exists()):
                continue
            tasks.append(_ArrayTask(images, name, s, config.edition, config.seed, str(out), config.batch_size, config.device, str(tmp)))
    report.already_done = total - n * len(tasks)
    done = report.already_done
    if progress:
        progress(done, total)
    if executor is not None:  # the images go to the object store once, not with every task
        for t in tasks:
            t.images = np.empty((0,), np.uint8)
            t.out, t.tmp = str(Path(t.out).absolute()), str(Path(t.tmp).absolute())
        stream = executor.map_unordered(_run_array_task_shared, tasks, shared=images)
    else:
        stream = _map(_run_array_task, tasks, workers)
    for rows, _, k in stream:
        journal.add(rows)
        done += k
        if progress:
            progress(done, total)
    label_dtype = np.uint8 if labels.max(initial=0) < 256 else np.int64
    lab_all = np.tile(labels.astype(label_dtype), len(sevs))
    buf = io.BytesIO()
    np.save(buf, lab_all)
    _atomic_write_bytes(out / "labels.npy", buf.getvalue(), tmp)
    journal.add([("labels.npy", hashlib.sha256(buf.getvalue()).hexdigest(), len(buf.getvalue()))])
    for name in names:
        final = out / f"{name}.npy"
        if final.exists() and f"{name}.npy" in journal.done:
            continue
        parts = [np.load(out / _STATE_DIR / "parts" / f"{name}_{s}.npy") for s in sevs]
        buf = io.BytesIO()
        np.save(buf, np.concatenate(parts))
        _atomic_write_bytes(final, buf.getvalue(), tmp)
        journal.add([(f"{name}.npy", hashlib.sha256(buf.getvalue()).hexdigest(), len(buf.getvalue()))])
        report.written += 1
        for s in sevs:
            (out / _STATE_DIR / "parts" / f"{name}_{s}.npy").unlink(missing_ok=True)


def _write_manifest(out: Path, config: GenerateConfig, report: GenerateReport, tmp_dir: Path) -> None:
    """``checksums.sha256`` and ``manifest.json`` of everything the runs into ``out`` have finished.

    Runs into one ``--out`` (a job array) take turns under a lock and each writes the whole state
    from the journal, so the last one to finish leaves what one run of all their corruptions
    would have written: the settings that decide the pixels, the union of corruptions and
    severities, every file and every unreadable source file.
    """
    with open(out / _STATE_DIR / "manifest.lock", "ab") as lock:
        _lock(lock, blocking=True)
        db = sqlite3.connect(out / _STATE_DIR / "journal.sqlite", timeout=600)
        try:
            rows = sorted(db.execute("SELECT path, sha256 FROM files WHERE path NOT LIKE ?", (f"{_STATE_DIR}/%",)))
            tasks = db.execute("SELECT corruption, severity FROM tasks").fetchall()
            failed = sorted(db.execute("SELECT file, reason FROM failures"))
        finally:
            db.close()
        done = {n for n, _ in tasks}
        names = [n for n in list_corruptions("all") + list_corruptions(group="candidate") + list_corruptions("style") if n in done]
        sevs = sorted({int(s) for _, s in tasks})
        _atomic_write_bytes(out / "checksums.sha256", "".join(checksum_line(h, p) for p, h in rows).encode("utf-8", "surrogateescape"), tmp_dir)
        settings = {
            "src": config.src,
            "edition": config.edition,
            "corruptions": names,
            "severities": sevs,
            "seed": config.seed,
            "labels": config.labels,
            "device": config.device,
        }
        manifest = {
            "generator": "shiftbench generate imagenet-c",
            "config": settings,
            "layout": report.layout,
            "corruptions": names,
            "severities": sevs,
            "jpeg_quality": JPEG_QUALITY if report.layout == "folder" else None,
            "versions": _versions(),
            "files": len(rows),
            "failed": [{"file": f, "reason": r} for f, r in failed],
            "checksums": "checksums.sha256",
        }
        if "style_transfer" in names:  # the style set, backend and schedule fix these pixels as much as the seed
            from .style import style_backend, style_settings, style_source

            style_source(), style_backend()
            manifest["style"] = style_settings()
        _atomic_write_bytes(out / "manifest.json", json.dumps(manifest, indent=1).encode(), tmp_dir)


# ----------------------------------------------------------------------------- shared with the other generators
# The resumable-writing machinery of this module, public for the generators of other datasets
# (``shiftbench generate imagenet-p``, in shiftbench.perturbations.generate): the same journal, run
# folder, atomic writes, locks and worker pool, so every dataset on disk resumes the same way.
STATE_DIR = _STATE_DIR
Journal = _Journal
RunDir = _RunDir
atomic_write_bytes = _atomic_write_bytes
def missing_outputs(journal: Journal, out: Path, rels: list[str], recovered: list[tuple[str, str, int]]) -> list[int]:
    """Indices of the output files `rels` (relative to `out`) still to write. A file renamed into place but not
    journaled (killed in between) is kept and its checksum appended to `recovered` for the journal."""
    missing = []
    for i, rel in enumerate(rels):
        if rel in journal.done and (out / rel).exists():
            continue
        if (out / rel).exists():
            h, nb = _sha256_file(out / rel)
            recovered.append((rel, h, nb))
            continue
        missing.append(i)
    return missing


sha256_file = _sha256_file
lock_file = _lock
map_in_processes = _map
software_versions = _versions
