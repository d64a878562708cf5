"""generate and evaluate on Ray: images per second on 1 node against 2 nodes, and Ray's cost per shard.

Everything runs on this machine: the nodes are separate ``ray start --block`` processes on 127.0.0.1
(:class:`shiftbench.distributed.local.LocalCluster`), each offering ``--cpus`` CPUs. On a real cluster
each node has its own cores; here the nodes share the machine's cores, so the 2-node figure shows what
Ray adds and what it can spread, not a second machine's speed.

Measured ``--repeats`` times each, the pool set-ups first (alternating), then the Ray ones on one cluster that
gets its second node in between (the fastest run is reported, all runs are kept):

* ``pool-1`` / ``pool-2``: ``shiftbench generate`` without Ray, 1 and 2 worker processes;
* ``ray-1node`` / ``ray-2nodes``: ``shiftbench generate --ray`` on a head alone, then on a head and a
  worker node (a driver process that connects, shards of image ranges x corruption, one CPU each);
  every run's checksums.sha256 is compared with ``pool-1``'s (they must be identical);
* per-shard overhead: ``--items`` trivial work items through ``RayExecutor.map_unordered`` (task
  submission, scheduling, the version check, result transfer) against a ``multiprocessing`` spawn pool's
  ``imap_unordered`` (the plain worker pool's mechanism), in milliseconds per item.

``--part evaluate`` (or ``all``) measures ``shiftbench evaluate`` the same way, with EfficientNet-Lite0
(``--eval-model``) on ``--eval-images`` photos x clean + ``--eval-corruptions`` at severity 3:

* ``local`` / ``local-1thread``: without Ray (PyTorch's default threads / one thread, as each Ray worker); ``ray-1node`` / ``ray-2nodes``: ``--ray`` on a head
  alone, then on a head and a worker node (one model copy per node, one CPU each); the stored
  predictions of every run are compared with ``local``'s (they must be identical);
* per-shard overhead: a tiny model over ``--eval-images`` clean images in batches of one, through
  ``RayPredictions`` in shards of one image and in one shard: the difference per extra shard, in ms
  (the workers' start is in both), next to the local loop's time per image.

Results of one part are merged into an existing ``--json`` file, so the other part's figures stay.

Images: the shared sample photos (``--images N`` of them, an ImageFolder of links built in a temporary
folder). Run::

    PYTHONPATH=src python perf/ray_scaling.py --json perf/results/ray_scaling.json
    PYTHONPATH=src python perf/ray_scaling.py --part evaluate --json perf/results/ray_scaling.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SAMPLE = Path(os.environ.get("SHIFTBENCH_SAMPLE_DIR", REPO.parent / "shared" / "data" / "imagenet-sample-100"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("RAY_ADDRESS", None)
    return env


def _generate(src: Path, out: Path, args: argparse.Namespace, extra: list[str]) -> float:
    cmd = [sys.executable, "-m", "shiftbench.cli", "generate", "imagenet-c", "--src", str(src), "--out", str(out),
           "--corruptions", args.corruptions, "--severities", args.severities, "--batch-size", str(args.batch_size), *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return dt


def _overhead(address: str, items: int) -> dict[str, float]:
    from shiftbench.distributed import RayExecutor

    with RayExecutor(address) as ex:
        list(ex.map_unordered(abs, range(8)))  # workers started and imported before timing
        t0 = time.perf_counter()
        n = sum(1 for _ in ex.map_unordered(abs, range(items)))
        ray_s = time.perf_counter() - t0
    import ray

    ray.shutdown()
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        list(pool.imap_unordered(abs, range(8)))
        t0 = time.perf_counter()
        m = sum(1 for _ in pool.imap_unordered(abs, range(items), chunksize=1))
        pool_s = time.perf_counter() - t0
    assert n == m == items
    return {"ray_ms_per_item": 1000 * ray_s / items, "pool_ms_per_item": 1000 * pool_s / items, "items": items}


def _rows_digest(store: Path) -> str:
    import hashlib
    import sqlite3

    con = sqlite3.connect(store)
    try:
        rows = con.execute(
            "SELECT r.corruption, r.severity, p.image, p.label, p.top1, p.top2, p.top3, p.top4, p.top5 "
            "FROM predictions p JOIN runs r ON p.run_id = r.id ORDER BY 1, 2, 3"
        ).fetchall()
    finally:
        con.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def _evaluate(src: Path, store: Path, args: argparse.Namespace, extra: list[str], threads: int | None = None) -> float:
    cmd = [sys.executable, "-m", "shiftbench.cli", "evaluate", "--model", args.eval_model, "--data", str(src),
           "--store", str(store), "--corruptions", args.eval_corruptions, "--severities", "3",
           "--batch-size", str(args.batch_size), "--no-progress", "--results-format", "json", *extra]
    env = _env()
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)  # PyTorch's thread count in that process
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return dt


def _tiny_classifier() -> Any:
    import torch

    from shiftbench.evaluation.models import Classifier, InputTransform, imagenet_wnids

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 1000))
    return Classifier(net, name="tiny", transform=InputTransform(None, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 255.0),
                      classes=imagenet_wnids())


def _eval_overhead(address: str, src: Path) -> dict[str, float]:
    """Ray's cost per shard: the same images and batches of one through RayPredictions in shards of one image
    and in one shard per condition; the difference over the extra shards (the workers' start is in both)."""
    import threading

    import numpy as np
    import ray

    from shiftbench.distributed import RayExecutor, RayPredictions
    from shiftbench.evaluation.data import CLEAN, ImageFolderSource
    from shiftbench.evaluation.models import resolve_label_space
    from shiftbench.evaluation.runner import Work

    clf = _tiny_classifier()
    source = ImageFolderSource(src, edition="224")
    space = resolve_label_space(clf.classes, source.classes, "auto")
    keys = {it.key for it in source.items(CLEAN)}
    work = [Work(source, np.arange(len(source.classes)), {CLEAN: keys})]
    t0 = time.perf_counter()
    n_local = 0
    for wb in source.batches({CLEAN: keys}, batch_size=1, seed=0, release=False, stop=threading.Event()):
        clf.logits(wb.images)
        n_local += len(wb.keys)
    local_s = time.perf_counter() - t0
    times: dict[int, list[float]] = {1: [], len(keys): []}
    try:
        with RayExecutor(address) as ex:
            for _ in range(2):
                for shard in times:
                    rp = RayPredictions(ex, shard=shard)
                    t0 = time.perf_counter()
                    n_ray = sum(len(s.batch.keys) for s in rp.run(clf, space, work, batch_size=1, seed=0,
                                                                 release=False, stop=threading.Event()))
                    times[shard].append(time.perf_counter() - t0)
                    assert n_ray == len(keys)
    finally:
        ray.shutdown()
    assert n_local == len(keys)
    small, whole = min(times[1]), min(times[len(keys)])
    return {"images": len(keys), "local_ms_per_image": 1000 * local_s / n_local,
            "ray_s_one_shard": whole, "ray_s_shards_of_one": small,
            "ray_ms_per_extra_shard": 1000 * (small - whole) / (len(keys) - 1)}


def evaluate_part(args: argparse.Namespace, tmp: Path, src: Path, n_images: int) -> dict[str, Any]:
    from shiftbench.distributed.local import LocalCluster

    n_pred = n_images * (1 + len(args.eval_corruptions.split(",")))
    load_before = os.getloadavg()
    rounds: dict[str, list[float]] = {"local": [], "local-1thread": [], "ray-1node": [], "ray-2nodes": []}
    same: dict[str, bool] = {}
    ref: list[str] = []
    k = 0

    def run(mode: str, extra: list[str]) -> None:
        nonlocal k
        k += 1
        store = tmp / f"eval-{mode}-{k}.sqlite"
        rounds[mode].append(_evaluate(src, store, args, extra, 1 if mode == "local-1thread" else None))
        digest = _rows_digest(store)
        if not ref:
            ref.append(digest)  # the first local run's rows
        same[mode] = same.get(mode, True) and digest == ref[0]

    for _ in range(args.repeats):
        run("local", [])
        run("local-1thread", [])
    with LocalCluster(nodes=1, cpus=args.cpus, env=_env()) as cluster:
        for _ in range(args.repeats):
            run("ray-1node", ["--ray", cluster.address])
        cluster.add_node()
        for _ in range(args.repeats):
            run("ray-2nodes", ["--ray", cluster.address])
        overhead = _eval_overhead(cluster.address, src)
    load_after = os.getloadavg()
    return {
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
                    "note": "one shared machine: both Ray nodes and the driver share its cores, and other developers' "
                    "jobs were running (load averages in this section)"},
        "loadavg_before": [round(x, 1) for x in load_before],
        "loadavg_after": [round(x, 1) for x in load_after],
        "settings": {"model": args.eval_model, "images": n_images, "conditions": f"clean + {args.eval_corruptions} at severity 3",
                     "predictions": n_pred, "batch_size": args.batch_size, "shard_images": 4 * args.batch_size,
                     "cpus_per_node": args.cpus, "repeats": args.repeats},
        "runs": {
            mode: {"best_s": round(min(ts), 2), "all_s": [round(t, 2) for t in ts],
                   "images_per_s": round(n_pred / min(ts), 2)}
            for mode, ts in rounds.items()
        },
        "predictions_identical_to_local": same,
        "per_shard_overhead_ms": {k2: round(v, 2) if isinstance(v, float) else v for k2, v in overhead.items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=60)
    p.add_argument("--corruptions", default="contrast,motion_blur,spatter")
    p.add_argument("--severities", default="3")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--cpus", type=int, default=1, help="CPUs per Ray node")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--items", type=int, default=400, help="trivial items for the per-shard overhead")
    p.add_argument("--json", default=None)
    p.add_argument("--part", choices=["generate", "evaluate", "all"], default="all")
    p.add_argument("--eval-images", type=int, default=24)
    p.add_argument("--eval-model", default="efficientnet-lite0")
    p.add_argument("--eval-corruptions", default="contrast,gaussian_noise")
    args = p.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    from shiftbench.distributed.local import LocalCluster

    tmp = Path(tempfile.mkdtemp(prefix="ray-scaling-"))
    src = tmp / "src"
    photos = sorted(SAMPLE.glob("*.JPEG"))[: args.images]
    for ph in photos:
        d = src / ph.name.split("_")[0]
        d.mkdir(parents=True, exist_ok=True)
        (d / ph.name).symlink_to(ph)
    previous: dict[str, Any] = {}
    if args.json and Path(args.json).exists():
        previous = json.loads(Path(args.json).read_text())
    if args.part == "evaluate":
        esrc = tmp / "eval-src"
        for ph in photos[: args.eval_images]:
            d = esrc / ph.name.split("_")[0]
            d.mkdir(parents=True, exist_ok=True)
            (d / ph.name).symlink_to(ph)
        result = dict(previous) or {"benchmark": "ray_scaling"}
        result["evaluate"] = evaluate_part(args, tmp, esrc, len(photos[: args.eval_images]))
        _write(result, args)
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        return
    n_out = len(photos) * len(args.corruptions.split(",")) * len(args.severities.split(","))
    load_before = os.getloadavg()
    rounds: dict[str, list[float]] = {"pool-1": [], "pool-2": [], "ray-1node": [], "ray-2nodes": []}
    same: dict[str, bool] = {}
    k = 0

    def run(mode: str, extra: list[str]) -> None:
        nonlocal k
        k += 1
        out = tmp / f"{mode}-{k}"
        rounds[mode].append(_generate(src, out, args, extra))
        ref = tmp / "pool-1-ref"
        if mode == "pool-1" and not ref.exists():
            out.rename(ref)
        else:
            same[mode] = same.get(mode, True) and (ref / "checksums.sha256").read_bytes() == (out / "checksums.sha256").read_bytes()

    for _ in range(args.repeats):
        run("pool-1", ["--workers", "1"])
        run("pool-2", ["--workers", "2"])
    with LocalCluster(nodes=1, cpus=args.cpus, env=_env()) as cluster:
        for _ in range(args.repeats):
            run("ray-1node", ["--ray", cluster.address])
        cluster.add_node()
        for _ in range(args.repeats):
            run("ray-2nodes", ["--ray", cluster.address])
        overhead = _overhead(cluster.address, args.items)
    load_after = os.getloadavg()
    result: dict[str, Any] = {
        "benchmark": "ray_scaling",
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "note": "one shared machine: both Ray nodes and the driver share its cores, and other jobs were running "
            "(load averages below)",
            "loadavg_before": [round(x, 1) for x in load_before],
            "loadavg_after": [round(x, 1) for x in load_after],
        },
        "settings": {"images": len(photos), "corruptions": args.corruptions, "severities": args.severities,
                     "batch_size": args.batch_size, "cpus_per_node": args.cpus, "corrupted_images": n_out,
                     "repeats": args.repeats},
        "generate": {
            mode: {"best_s": round(min(ts), 2), "all_s": [round(t, 2) for t in ts],
                   "images_per_s": round(n_out / min(ts), 2)}
            for mode, ts in rounds.items()
        },
        "checksums_identical_to_pool_1": same,
        "per_item_overhead_ms": {k2: round(v, 3) if isinstance(v, float) else v for k2, v in overhead.items()},
    }
    if args.part == "all":
        esrc = tmp / "eval-src"
        for ph in photos[: args.eval_images]:
            d = esrc / ph.name.split("_")[0]
            d.mkdir(parents=True, exist_ok=True)
            (d / ph.name).symlink_to(ph)
        result["evaluate"] = evaluate_part(args, tmp, esrc, len(photos[: args.eval_images]))
    elif "evaluate" in previous:
        result["evaluate"] = previous["evaluate"]
    _write(result, args)
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)


def _write(result: dict[str, Any], args: argparse.Namespace) -> None:
    try:
        import ray

        result["versions"] = {"ray": ray.__version__}
    except ImportError:  # pragma: no cover
        pass
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(args.json).with_suffix(".json.tmp")
        tmp.write_text(json.dumps(result, indent=1) + "\n")
        tmp.replace(args.json)  # never half-written


if __name__ == "__main__":
    main()
