"""Write ImageNet-P to disk in the released layouts (``shiftbench generate imagenet-p``).

* ImageNet-P editions (224, 299, 64 = Tiny-ImageNet-P, 64x64 = ImageNet 64x64-P):
  ``<out>/<perturbation>[_<d>]/<class>/<file stem>.mp4``, one H.264 MP4 per photo and sequence,
  encoded as the reference generator's ffmpeg call did (:func:`~shiftbench.perturbations.video.encode_video`).
  Noise perturbations have one folder per difficulty (``_2``, ``_3``); temporal ones only the
  difficulty-1 videos (their difficulty is a comparison stride over the same frames).
* CIFAR-P (32): ``<out>/<perturbation>[_<d>].npy``, uint8 (N, T, 32, 32, 3), videos in source order,
  and ``<out>/labels.npy`` (the reference script collects the labels but saves none).

The frames are those of :func:`~shiftbench.perturbations.perturb` on each photo (keyed by its
clean crop's pixels), so a file can be checked against the in-memory sequences. Runs resume the
way ``generate imagenet-c`` does (the same machinery, :mod:`shiftbench.generate`): every file is
written under a temporary name and renamed into place, a journal records its SHA-256, a rerun
does only what is missing, and ``manifest.json`` and ``checksums.sha256`` describe the result.
``ray`` runs the work as Ray tasks on a cluster and writes the same files.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import DataError, InvalidArgumentError
from ..generate import (
    STATE_DIR,
    Journal,
    RunDir,
    atomic_write_bytes,
    lock_file,
    map_in_processes,
    missing_outputs,
    software_versions,
)
from ..io import load_image_rgb, scan_image_folder
from ..outputs import check_output_folder
from ..version import __version__
from ._source import SQUASHED_64, prepare, resolve_recipe
from ._spec import check_difficulty, get_perturbation
from .sequences import perturb
from .video import encode_video, folder_name, require_av, video_settings

__all__ = ["PGenerateConfig", "PGenerateReport", "generate_imagenet_p", "P_DATASETS"]

P_DATASETS = {
    "224": "ImageNet-P",
    "299": "ImageNet-P (Inception 299)",
    "64": "Tiny-ImageNet-P",
    SQUASHED_64: "ImageNet 64x64-P",
    "32": "CIFAR-10-P / CIFAR-100-P",
}


@dataclass
class PGenerateConfig:
    """Settings of one ``generate imagenet-p`` run (the pixel-deciding ones are its fingerprint)."""

    src: str
    out: str
    edition: str = "224"  # 224, 299, 64, 64x64 or 32
    perturbations: list[str] = field(default_factory=list)  # default: all 14
    difficulties: list[int] = field(default_factory=lambda: [1, 2, 3])
    seed: int = 0
    workers: int = 0  # 0: one per CPU core
    batch_size: int = 4  # photos per task
    preset: str = "veryslow"  # x264 preset (the reference's)
    labels: str | None = None
    ray: str | None = None

    def fingerprint(self) -> dict[str, Any]:
        return {"dataset": "imagenet-p", "edition": self.edition, "seed": self.seed, "preset": self.preset,
                "shiftbench": __version__}


@dataclass
class PGenerateReport:
    written: int = 0
    already_done: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    layout: str = "mp4"
    out: str = ""
    cluster: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failed


def _runs(config: PGenerateConfig, edition: str) -> list[tuple[str, int]]:
    """(perturbation, difficulty) pairs: noise at each difficulty asked for, temporal at difficulty 1 only."""
    from ._spec import list_perturbations

    names = list_perturbations(config.perturbations or "all", edition=edition)
    if not names:
        raise InvalidArgumentError("--perturbations", ",".join(config.perturbations), f"perturbations of edition {edition}")
    diffs = sorted({check_difficulty(d, "--difficulties") for d in config.difficulties})
    if not diffs:
        raise InvalidArgumentError("--difficulties", config.difficulties, "one or more of 1, 2, 3")
    runs = [(n, d) for n in names for d in diffs if d == 1 or get_perturbation(n).noise]
    if not runs:
        raise InvalidArgumentError(
            "--difficulties", ",".join(map(str, diffs)),
            "difficulty 1 for temporal perturbations (2 and 3 exist as data only for the noise perturbations)",
        )
    return runs


def _check(config: PGenerateConfig) -> tuple[str, str]:
    ed, recipe = resolve_recipe(config.edition)
    config.edition = recipe or ed
    if isinstance(config.seed, bool) or not isinstance(config.seed, int) or not 0 <= config.seed < 2**64:
        raise InvalidArgumentError("--seed", config.seed, "an integer in 0..2**64-1")
    if isinstance(config.batch_size, bool) or not isinstance(config.batch_size, int) or config.batch_size < 1:
        raise InvalidArgumentError("--batch-size", config.batch_size, "a positive integer")
    if isinstance(config.workers, bool) or not isinstance(config.workers, int) or config.workers < 0:
        raise InvalidArgumentError("--workers", config.workers, "0 (one per core) or a positive integer")
    presets = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow", "placebo")
    if config.preset not in presets:
        raise InvalidArgumentError("--preset", config.preset, f"an x264 preset: {', '.join(presets)}")
    return ed, recipe


# ----------------------------------------------------------------------------- work


@dataclass
class _VideoChunk:
    records: list[tuple[str, str, str]]  # (absolute photo path, class folder, file stem)
    runs: list[tuple[str, int, list[int]]]  # (perturbation, difficulty, indices into records)
    edition: str  # as given: 224, 299, 64, 64x64
    seed: int
    preset: str
    out: str
    tmp: str


def _run_video_chunk(chunk: _VideoChunk) -> tuple[list[tuple[str, str, int]], list[tuple[str, str]], int]:
    photos: dict[int, np.ndarray] = {}
    failed: list[tuple[str, str]] = []
    for i, (path, cls, _stem) in enumerate(chunk.records):
        try:
            photos[i] = np.asarray(load_image_rgb(Path(path)))
        except Exception as e:  # noqa: BLE001 - report any unreadable file, keep going
            failed.append((f"{cls}/{Path(path).name}", f"{type(e).__name__}: {e}"))
    prepared = {i: prepare(a, chunk.edition) for i, a in photos.items()}
    rows: list[tuple[str, str, int]] = []
    n_done = 0
    for name, d, idx in chunk.runs:
        noise = get_perturbation(name).noise
        for i in idx:
            n_done += 1
            if i not in prepared:
                continue
            frames = perturb(prepared[i], name, d, seed=chunk.seed)[0]
            data = encode_video(frames, noise=noise, preset=chunk.preset)
            _, cls, stem = chunk.records[i]
            rel = f"{folder_name(name, d)}/{cls}/{stem}.mp4"
            atomic_write_bytes(Path(chunk.out) / rel, data, Path(chunk.tmp))
            rows.append((rel, hashlib.sha256(data).hexdigest(), len(data)))
    return rows, failed, n_done


@dataclass
class _ArrayRun:
    images: np.ndarray  # N x 32 x 32 x 3 uint8 (empty on a cluster: the object store has them)
    name: str
    difficulty: int
    seed: int
    batch_size: int
    out: str
    tmp: str


def _run_array(run: _ArrayRun) -> tuple[list[tuple[str, str, int]], list[tuple[str, str]], int]:
    seqs = [perturb(run.images[a : a + run.batch_size], run.name, run.difficulty, seed=run.seed, edition="32")
            for a in range(0, len(run.images), run.batch_size)]
    arr = torch.cat(seqs).permute(0, 1, 3, 4, 2).contiguous().numpy()
    buf = io.BytesIO()
    np.save(buf, arr)
    data = buf.getvalue()
    rel = f"{folder_name(run.name, run.difficulty)}.npy"
    atomic_write_bytes(Path(run.out) / rel, data, Path(run.tmp))
    return [(rel, hashlib.sha256(data).hexdigest(), len(data))], [], len(run.images)


def _run_array_shared(images: np.ndarray, run: _ArrayRun) -> tuple[list[tuple[str, str, int]], list[tuple[str, str]], int]:
    run.images = images
    return _run_array(run)


# ----------------------------------------------------------------------------- driver


def generate_imagenet_p(config: PGenerateConfig, progress: Callable[[int, int], None] | None = None) -> PGenerateReport:
    """Generate ImageNet-P (or Tiny / 64x64 / 299 / CIFAR-P) from clean photos; see the module docstring.

    ``progress(done, total)`` counts videos. Raises :class:`~shiftbench.errors.InvalidArgumentError`
    for bad settings and :class:`~shiftbench.errors.DataError` for an unusable source or output
    folder, before anything is written.
    """
    ed, _ = _check(config)
    runs = _runs(config, ed)
    layout = "cifar-p" if ed == "32" else "mp4"
    out = Path(config.out)
    src = Path(config.src)
    check_output_folder(out, "--out")
    if layout == "mp4":
        records = scan_image_folder(src, arg="--src")[0]
        images = labels = None
    else:
        records = []
        images, labels, failed_src = _array_source(config)
    if layout == "mp4":
        require_av()
    out.mkdir(parents=True, exist_ok=True)
    run_dir = RunDir(out)
    report = PGenerateReport(layout=layout, out=str(out))
    t0 = time.perf_counter()
    executor = None
    try:
        if config.ray is not None:
            from ..distributed import RayExecutor

            executor = RayExecutor(config.ray, num_gpus=0, local_cpus=config.workers or None)
            report.cluster = executor.describe()
            executor.check_paths([str(src.resolve()), str(run_dir.path.resolve())], "--out/--src")
        journal = Journal(out, config)  # type: ignore[arg-type]
        try:
            if layout == "mp4":
                _generate_videos(config, records, runs, journal, report, run_dir.path, progress, executor)
            else:
                assert images is not None and labels is not None
                report.failed.extend(failed_src)
                _generate_arrays(config, images, labels, runs, journal, report, run_dir.path, progress, executor)
            journal.finish([n for n, _ in runs], sorted({d for _, d in runs}), report.failed)
        finally:
            report.seconds = time.perf_counter() - t0
            journal.close()
        _write_manifest(out, config, report, run_dir.path)
    finally:
        if executor is not None:
            executor.close()
        run_dir.close()
    return report


def _array_source(config: PGenerateConfig) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """CIFAR arrays (as ``generate imagenet-c``), or a folder of photos squashed to 32 x 32."""
    src = Path(config.src)
    if src.is_file() or (src.is_dir() and ((src / "test_batch").exists() or (src / "test").is_file())):
        from ..sources import load_array_source

        arr = load_array_source(config.src, config.labels)
        if arr.images.shape[1:] != (32, 32, 3):
            raise InvalidArgumentError("--src", f"images of shape {arr.images.shape[1:]}", "32 x 32 x 3 images for CIFAR-P")
        return arr.images, arr.labels, []
    records = scan_image_folder(src, arg="--src")[0]
    imgs, labs, failed = [], [], []
    for r in records:
        try:
            imgs.append(prepare(np.asarray(load_image_rgb(r.path)), "32").crops[0].permute(1, 2, 0).numpy())
            labs.append(r.label)
        except Exception as e:  # noqa: BLE001
            failed.append((r.key, f"{type(e).__name__}: {e}"))
    if not imgs:
        raise DataError(f"--src {config.src!r}: none of the images could be read")
    return np.stack(imgs), np.asarray(labs), failed


def _absolute(c: _VideoChunk) -> _VideoChunk:
    return _VideoChunk([(str(Path(p).absolute()), cls, st) for p, cls, st in c.records], c.runs, c.edition, c.seed,
                       c.preset, str(Path(c.out).absolute()), str(Path(c.tmp).absolute()))


def _generate_videos(
    config: PGenerateConfig,
    records: Sequence[Any],
    runs: list[tuple[str, int]],
    journal: Journal,
    report: PGenerateReport,
    tmp: Path,
    progress: Callable[[int, int], None] | None,
    executor: Any,
) -> None:
    out = Path(config.out)
    total = len(records) * len(runs)
    chunks: list[_VideoChunk] = []
    recovered: list[tuple[str, str, int]] = []
    bs = config.batch_size
    for a in range(0, len(records), bs):
        recs = [(str(r.path), r.class_name, Path(r.path).stem) for r in records[a : a + bs]]
        todo = []
        for name, d in runs:
            rels = [f"{folder_name(name, d)}/{cls}/{stem}.mp4" for _, cls, stem in recs]
            missing = missing_outputs(journal, out, rels, recovered)
            if missing:
                todo.append((name, d, missing))
        if todo:
            chunks.append(_VideoChunk(recs, todo, config.edition, config.seed, config.preset, str(out), str(tmp)))
    journal.add(recovered)
    report.already_done = total - sum(len(t[2]) for c in chunks for t in c.runs)
    done = report.already_done
    if progress:
        progress(done, total)
    if executor is not None:
        stream = executor.map_unordered(_run_video_chunk, [_absolute(c) for c in chunks])
    else:
        stream = map_in_processes(_run_video_chunk, chunks, config.workers or (os.cpu_count() or 1))
    failed: dict[str, str] = {}
    for rows, bad, n in stream:
        journal.add(rows)
        report.written += len(rows)
        failed.update(bad)
        done += n
        if progress:
            progress(done, total)
    report.failed = sorted(failed.items())


def _generate_arrays(
    config: PGenerateConfig,
    images: np.ndarray,
    labels: np.ndarray,
    runs: list[tuple[str, int]],
    journal: Journal,
    report: PGenerateReport,
    tmp: Path,
    progress: Callable[[int, int], None] | None,
    executor: Any,
) -> None:
    out = Path(config.out)
    n = len(images)
    todo = []
    for name, d in runs:
        rel = f"{folder_name(name, d)}.npy"
        if rel in journal.done and (out / rel).exists():
            continue
        todo.append(_ArrayRun(images, name, d, config.seed, config.batch_size * 64, str(out), str(tmp)))
    report.already_done = n * (len(runs) - len(todo))
    done = report.already_done
    if progress:
        progress(done, n * len(runs))
    if executor is not None:  # the images go to the object store once, not with every task
        for t in todo:
            t.images = np.empty((0,), np.uint8)
            t.out, t.tmp = str(Path(t.out).absolute()), str(Path(t.tmp).absolute())
        stream = executor.map_unordered(_run_array_shared, todo, shared=images)
    else:
        stream = map_in_processes(_run_array, todo, config.workers or (os.cpu_count() or 1))
    for rows, _, k in stream:
        journal.add(rows)
        report.written += len(rows)
        done += k
        if progress:
            progress(done, n * len(runs))
    if "labels.npy" not in journal.done or not (out / "labels.npy").exists():
        buf = io.BytesIO()
        np.save(buf, labels.astype(np.uint8 if labels.max(initial=0) < 256 else np.int64))
        atomic_write_bytes(out / "labels.npy", buf.getvalue(), tmp)
        journal.add([("labels.npy", hashlib.sha256(buf.getvalue()).hexdigest(), len(buf.getvalue()))])


def _write_manifest(out: Path, config: PGenerateConfig, report: PGenerateReport, tmp: Path) -> None:
    """``checksums.sha256`` and ``manifest.json`` of everything the runs into ``out`` have finished (under a lock)."""
    from ._spec import list_perturbations

    with open(out / STATE_DIR / "manifest.lock", "ab") as lock:
        lock_file(lock, blocking=True)
        db = sqlite3.connect(out / STATE_DIR / "journal.sqlite", timeout=600)
        try:
            rows = sorted(db.execute("SELECT path, sha256 FROM files WHERE path NOT LIKE ?", (f"{STATE_DIR}/%",)))
            tasks = db.execute("SELECT corruption, severity FROM tasks").fetchall()
            failed = sorted(db.execute("SELECT file, reason FROM failures"))
        finally:
            db.close()
        done = {n for n, _ in tasks}
        names = [n for n in list_perturbations("all") if n in done]
        folders = sorted({folder_name(n, int(d)) for n, d in tasks})
        atomic_write_bytes(out / "checksums.sha256", "".join(f"{h}  {p}\n" for p, h in rows).encode(), tmp)
        manifest = {
            "generator": "shiftbench generate imagenet-p",
            "dataset": P_DATASETS[config.edition],
            "config": {"src": config.src, "edition": config.edition, "perturbations": names,
                       "difficulties": sorted({int(d) for _, d in tasks}), "seed": config.seed, "labels": config.labels},
            "layout": report.layout,
            "perturbations": names,
            "folders": folders,
            "video": None if report.layout != "mp4" else {
                "noise": video_settings(True, config.preset), "temporal": video_settings(False, config.preset)},
            "versions": {**software_versions(), **_av_version()},
            "files": len(rows),
            "failed": [{"file": f, "reason": r} for f, r in failed],
            "checksums": "checksums.sha256",
        }
        atomic_write_bytes(out / "manifest.json", json.dumps(manifest, indent=1).encode(), tmp)


def _av_version() -> dict[str, str]:
    try:
        import av

        return {"av": av.__version__}
    except ImportError:
        return {}
