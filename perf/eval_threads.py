"""How many threads should the model get? ``evaluate`` with 1, 2 and ``auto`` threads, on the machine as it is and
with every core busy with another process.

EfficientNet-Lite0 (the built-in model) on 8 photos of the shared sample set, clean and two corruptions at severity 3
(24 predictions per run, 224 px), into a fresh store each time; the fastest of ``--repeat`` runs is kept. Conditions:
"as-is" (the machine with whatever else runs on it: the load average before and after is recorded) and "busy" (one
process spinning on every core beside the evaluation). The ``auto`` default of ``--threads`` takes the CPUs the
other runnable tasks leave free (shiftbench.cpus.free_cpus, the rule of the corruption engine's threads too).

    python perf/eval_threads.py                    # writes perf/results/eval_threads--<n>cpu--cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from perf.speed import machine

SAMPLE = REPO.parent / "shared" / "data" / "imagenet-sample-100"


def _spin() -> None:
    while True:
        pass


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _data(root: Path, n: int) -> Path:
    import shutil

    photos = sorted(SAMPLE.glob("*.JPEG"))[:n]
    for p in photos:
        d = root / p.name.split("_")[0]
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(p, d / p.name)
    return root


def one_run(data: Path, threads: int | str) -> tuple[float, int]:
    import torch

    import shiftbench
    from shiftbench.evaluation.threads import resolve_model_threads

    n = resolve_model_threads(threads)
    torch.set_num_threads(n)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        shiftbench.evaluate("efficientnet-lite0", "imagenet-c", data=data, corruptions="contrast,fog", severities="3",
                            store=Path(tmp) / "s.sqlite", batch_size=8)
        return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", nargs="+", default=["1", "2", "auto"])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    out = args.out or HERE / "results" / f"eval_threads--{cpus}cpu--cpu.json"
    import torch

    default_threads = torch.get_num_threads()  # before any run changes it
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        data = _data(Path(tmp) / "data", args.images)
        one_run(data, 1)  # warm up: imports, model file, numba caches
        for condition in ("as-is", "busy"):
            spinners = []
            if condition == "busy":
                ctx = get_context("spawn")
                spinners = [ctx.Process(target=_spin, daemon=True) for _ in range(cpus)]
                for p in spinners:
                    p.start()
                time.sleep(2.0)
            try:
                for t in args.threads:
                    before = _load()
                    best, used = min(one_run(data, int(t) if t != "auto" else "auto") for _ in range(args.repeat))
                    runs.append({"condition": condition, "threads": t, "threads_used": used, "seconds": round(best, 3),
                                 "predictions_per_s": round(3 * args.images / best, 2),
                                 "load_before": before, "load_after": _load()})
                    print(runs[-1], flush=True)
            finally:
                for p in spinners:
                    p.terminate()
                    p.join()
    doc = {
        "metadata": {"machine": machine(), "torch": torch.__version__, "torch_default_threads": default_threads,
                     "cpus": cpus, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     "args": {k: str(v) for k, v in vars(args).items()},
                     "note": "A shared machine: other users' jobs ran beside the 'as-is' runs (see the load averages); "
                             "'busy' adds one spinning process per core on top of them."},
        "runs": runs,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
