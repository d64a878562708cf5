"""Corruption throughput: shiftbench vs the reference imagenet-c, imagecorruptions and albumentations.

All libraries run in one invocation, on the same real 224 photos, with the same
number of worker processes (one thread each), over the 15 benchmark corruptions
x 5 severities. The peers run in the peers environment (tools/reference-env.sh).
Every library times each corruption ``--repeat`` times (default 3) and keeps its
fastest pass, which filters out interference from other load on the machine.

    python perf/speed.py                       # full comparison, 2 processes
    python perf/speed.py --only shiftbench     # just shiftbench
    python perf/speed.py --device cuda         # shiftbench on a GPU (batched)
    python perf/speed.py --only shiftbench --baseline-src /tmp/base/src --baseline-label 1a2b3c4
                                               # before/after: another checkout's src/ in the same run

Reports per-corruption rates (corrupted images per second of one core) and the
overall wall-clock rate of the whole 15 x 5 pass, with ratios to the reference,
and writes JSON to perf/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))


def machine() -> dict[str, object]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def _ours_worker(args: tuple[np.ndarray, list[str], list[int], int, str, int, str]) -> dict[str, dict[str, float]]:
    images, names, sevs, batch, device, repeat, clock_name = args
    clock = time.process_time if clock_name == "cpu" else time.perf_counter
    import torch

    torch.set_num_threads(1)
    import cv2

    cv2.setNumThreads(1)  # one thread per process, as for the peers
    import shiftbench

    x = torch.from_numpy(images).permute(0, 3, 1, 2).contiguous().to(device)
    shiftbench.corrupt(x[:2], "contrast", 1)  # warm-up (imports, numba compilation happen below per corruption)
    out: dict[str, dict[str, float]] = {"_source": {"path": str(Path(shiftbench.__file__).parent)}}
    for n in names:
        for s in sevs:  # warm-up: JIT compilation and per-severity tables (one-off per process) outside the timing
            shiftbench.corrupt(x[:2], n, s, seed=99)
        for _ in range(repeat):
            if device != "cpu":
                torch.cuda.synchronize()
            t0 = clock()
            cnt = 0
            for s in sevs:
                for a in range(0, len(x), batch):
                    shiftbench.corrupt(x[a : a + batch], n, s, seed=0)
                    cnt += len(x[a : a + batch])
            if device != "cpu":
                torch.cuda.synchronize()
            out.setdefault(n, {"images": cnt, "passes": []})["passes"].append(clock() - t0)
    return out


def run_ours(
    images: np.ndarray, names: list[str], sevs: list[int], procs: int, batch: int, device: str, repeat: int = 1, src: str | None = None,
    clock: str = "wall",
) -> dict[str, object]:
    """shiftbench's pass; with ``src`` the workers import shiftbench from that source folder
    (spawned processes start with this process's ``sys.path``, ``src`` put first)."""
    parts = [images[i::procs] for i in range(procs)] if device == "cpu" else [images]
    t0 = time.perf_counter()
    if len(parts) == 1 and src is None:
        results = [_ours_worker((parts[0], names, sevs, batch, device, repeat, clock))]
    else:
        saved = list(sys.path)
        if src is not None:
            sys.path.insert(0, str(Path(src).resolve()))
        try:
            with get_context("spawn").Pool(len(parts)) as pool:
                results = pool.map(_ours_worker, [(p, names, sevs, batch, device, repeat, clock) for p in parts])
        finally:
            sys.path[:] = saved
    source = results[0].pop("_source")["path"]
    for r in results[1:]:
        r.pop("_source")
    wall = time.perf_counter() - t0
    per = {n: {"images": sum(r[n]["images"] for r in results), "cpu_seconds": sum(min(r[n]["passes"]) for r in results)} for n in names}
    busy = max(sum(min(r[n]["passes"]) for n in names) for r in results)
    busy_median = max(sum(float(np.median(r[n]["passes"])) for n in names) for r in results)
    return {
        "library": "shiftbench",
        "source": source,
        "processes": len(parts),
        "wall_seconds": wall,
        "busy_seconds": busy,
        "busy_seconds_median_pass": busy_median,
        "per_corruption": per,
    }


def run_peer(lib: str, images: np.ndarray, names: list[str], sevs: list[int], procs: int, repeat: int = 1, clock: str = "wall") -> dict[str, object]:
    from tests.oracle.harness import peers_python

    py = peers_python()
    if py is None:
        return {"library": lib, "error": "peers environment not available (tools/reference-env.sh)"}
    with tempfile.TemporaryDirectory() as tmp:
        inp, outp = Path(tmp) / "in.npz", Path(tmp) / "out.json"
        np.savez(inp, images=images, names=np.array(names), severities=np.array(sevs))
        r = subprocess.run([str(py), str(HERE / "_peers_speed.py"), str(inp), str(outp), lib, str(procs), str(repeat), clock],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return {"library": lib, "error": r.stderr[-2000:]}
        return json.loads(outp.read_text())


def _fastest_round(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from several rounds of the same code: per corruption and for the whole pass the fastest round."""
    best = dict(runs[0])
    best["per_corruption"] = {n: min((r["per_corruption"][n] for r in runs), key=lambda e: e["cpu_seconds"]) for n in runs[0]["per_corruption"]}
    for k in ("wall_seconds", "busy_seconds", "busy_seconds_median_pass"):
        best[k] = min(r[k] for r in runs)
    best["rounds"] = len(runs)
    return best


def rate(entry: dict[str, float]) -> float | None:
    if "error" in entry or not entry.get("cpu_seconds"):
        return None
    return entry["images"] / entry["cpu_seconds"]


def _portable_paths(results: dict[str, Any], args: dict[str, Any]) -> None:
    """Paths in the results as the repository names them (``src/shiftbench``), the baseline's checkout as a
    placeholder: the results file describes the run, not the machine's folders."""
    base = args.get("baseline_src")
    placeholder = "<checkout of the baseline commit>/src"
    for res in results.values():
        src = res.get("source")
        if not isinstance(src, str):
            continue
        if base and Path(src).is_relative_to(Path(base).resolve()):
            res["source"] = str(Path(placeholder) / Path(src).relative_to(Path(base).resolve()))
        elif Path(src).is_relative_to(REPO):
            res["source"] = str(Path(src).relative_to(REPO))
    if base:
        args["baseline_src"] = placeholder
    if args.get("out"):
        out = Path(args["out"]).resolve()
        args["out"] = str(out.relative_to(REPO)) if out.is_relative_to(REPO) else out.name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=64, help="photos for shiftbench and albumentations")
    ap.add_argument("--peer-images", type=int, default=8, help="photos for the (slow) reference and imagecorruptions")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=3, help="time each corruption this many times per library and keep the fastest pass")
    ap.add_argument("--only", nargs="*", default=None, help="subset of: shiftbench imagenet_c imagecorruptions albumentations")
    ap.add_argument("--corruptions", nargs="*", default=None)
    ap.add_argument("--out", default=None, help="JSON output path")
    ap.add_argument("--baseline-src", default=None, help="src/ folder of another shiftbench checkout, timed in the same run (before/after)")
    ap.add_argument("--baseline-label", default=None, help="what the baseline is (a commit), stored with the results")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="every library's passes timed by the wall clock or by each worker's CPU time (on a machine shared with other jobs)")
    ap.add_argument("--rounds", type=int, default=2, help="with --baseline-src: baseline and current code alternate this many times; each keeps its fastest")
    args = ap.parse_args()

    from tests.oracle.harness import load_sample_224

    import shiftbench

    names = args.corruptions or shiftbench.list_corruptions(group="benchmark")
    sevs = [1, 2, 3, 4, 5]
    imgs = load_sample_224(max(args.images, args.peer_images))
    if len(imgs) < args.images:  # more images than photos (large GPU batches): the photos again, in order
        imgs = np.concatenate([imgs] * -(-args.images // len(imgs)))[: args.images]
    libs = list(args.only or ["shiftbench", "imagenet_c", "imagecorruptions", "albumentations"])
    if args.baseline_src and "shiftbench" in libs:
        libs.insert(libs.index("shiftbench") + 1, "shiftbench-baseline")
    load_start = [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None
    results = {}
    for lib in libs:
        if lib == "shiftbench-baseline":
            continue
        print(f"running {lib} ...", file=sys.stderr, flush=True)
        if lib == "shiftbench" and args.baseline_src:
            rounds: dict[str, list[dict[str, Any]]] = {"shiftbench": [], "shiftbench-baseline": []}
            for _ in range(max(1, args.rounds)):  # alternate, so that both see the same load on a shared machine
                for key, src in (("shiftbench-baseline", args.baseline_src), ("shiftbench", str(REPO / "src"))):
                    rounds[key].append(run_ours(imgs[: args.images], names, sevs, args.processes, args.batch_size, args.device, args.repeat, src, args.clock))
            for key, runs in rounds.items():
                results[key] = _fastest_round(runs)
            results["shiftbench-baseline"]["label"] = args.baseline_label
            continue
        if lib == "shiftbench":
            results[lib] = run_ours(imgs[: args.images], names, sevs, args.processes, args.batch_size, args.device, args.repeat, clock=args.clock)
        else:
            n = args.peer_images if lib != "albumentations" else min(args.images, 32)
            results[lib] = run_peer(lib, imgs[:n], names, sevs, args.processes, args.repeat, args.clock)

    ref = results.get("imagenet_c", {}).get("per_corruption", {})
    header = f"{'corruption':20s}" + "".join(f"{lib:>21s}" for lib in libs) + "   shiftbench/reference"
    lines = ["per-corruption rate, corrupted 224 images per second of one core", header]
    for n in names:
        row = f"{n:20s}"
        for lib in libs:
            e = results[lib].get("per_corruption", {}).get(n, {"error": results[lib].get("error", "")})
            r = rate(e)
            row += f"{(f'{r:.1f}' if r else 'fails'):>21s}"
        ro, rr = rate(results.get("shiftbench", {}).get("per_corruption", {}).get(n, {"error": 1})), rate(ref.get(n, {"error": 1}))
        row += f"   {ro / rr:8.1f}x" if ro and rr else "        -"
        lines.append(row)
    lines.append("")
    where = f"with {args.processes} processes (busiest process" if args.device == "cpu" else f"on {args.device} (one process"
    lines.append(f"whole 15 x 5 pass {where}, fastest pass per corruption):")
    for lib in libs:
        res = results[lib]
        if "error" in res:
            lines.append(f"  {lib:18s} error: {res['error'][:200]}")
            continue
        per = res["per_corruption"]
        ok = [v for v in per.values() if "error" not in v]
        total = sum(v["images"] for v in ok)
        wall = res.get("busy_seconds", res["wall_seconds"])
        note = "" if len(ok) == len(per) else f" ({len(per) - len(ok)} corruptions fail)"
        med = res.get("busy_seconds_median_pass")
        med_note = f" (median pass: {total / med:.1f})" if med else ""
        lines.append(f"  {lib:18s} {total / wall:9.1f} corrupted images/s{med_note}{note}")
        res["overall_rate"] = total / wall
        if med:
            res["overall_rate_median_pass"] = total / med
    if "shiftbench-baseline" in results and "overall_rate" in results["shiftbench-baseline"]:
        lines.append(f"  shiftbench / its baseline: {results['shiftbench']['overall_rate'] / results['shiftbench-baseline']['overall_rate']:.2f}x")
    if "shiftbench" in results and "imagenet_c" in results and "overall_rate" in results["imagenet_c"]:
        lines.append(f"  shiftbench / reference: {results['shiftbench']['overall_rate'] / results['imagenet_c']['overall_rate']:.1f}x")
    text = "\n".join(lines)
    print(text)
    out = Path(args.out).resolve() if args.out else HERE / "results" / f"speed--{platform.node() or 'machine'}--{args.device}.json"
    _portable_paths(results, vars(args))
    meta = {"machine": machine(), "device": args.device, "args": vars(args), "shiftbench": shiftbench.__version__}
    if hasattr(os, "getloadavg"):
        meta["load_average_at_start"] = load_start
        meta["load_average_at_end"] = [round(v, 2) for v in os.getloadavg()]
    import torch

    meta["torch"] = torch.__version__
    if args.device != "cpu" and torch.cuda.is_available():
        meta["gpu"] = torch.cuda.get_device_name(torch.device(args.device))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"metadata": meta, "results": results, "table": text}, indent=1))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
