"""How many worker processes should ``generate`` start? ``generate imagenet-c`` and ``generate imagenet-p`` with 1 and
2 workers and with their defaults, on the machine as it is and with every core busy with another process.

ImageNet-C: 12 photos of the shared sample set, three corruptions (gaussian_noise, glass_blur, jpeg_compression) at
severity 3, edition 224 (36 JPEG files). ImageNet-P: 2 photos, gaussian_noise and rotate at difficulty 1, edition 64,
x264 preset ultrafast (4 MP4 files). Each run is the command line in a fresh process writing into a fresh folder (so
its start-up, about a second of imports, is part of it); the fastest of ``--repeat`` runs is kept. Conditions: "as-is"
(the machine with whatever else runs on it: the load average before and after each setting is recorded) and "busy"
(one process spinning on every core beside the command). ``--workers 0`` is each command's default when the run
was measured (recorded as ``default_policy``): ``generate imagenet-c`` starts as many workers as ``--threads auto``
gives (the CPUs the machine's other tasks leave free, shiftbench.evaluation.threads); ``generate imagenet-p``
started one per core. What the default resolved to is recorded beside each run (``workers_used``).

    python perf/generate_workers.py          # writes perf/results/generate_workers--<n>cpu--cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from perf.speed import machine  # noqa: E402

SAMPLE = REPO.parent / "shared" / "data" / "imagenet-sample-100"
C_ARGS = ["--edition", "224", "--corruptions", "gaussian_noise,glass_blur,jpeg_compression", "--severities", "3"]
P_ARGS = ["--edition", "64", "--perturbations", "gaussian_noise,rotate", "--difficulties", "1", "--preset", "ultrafast",
          "--batch-size", "1"]


def _spin() -> None:
    while True:
        pass


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _data(root: Path, n: int) -> Path:
    import shutil

    for p in sorted(SAMPLE.glob("*.JPEG"))[:n]:
        d = root / p.name.split("_")[0]
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(p, d / p.name)
    return root


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}


def one_run(command: str, data: Path, workers: int, tmp: Path) -> float:
    out = Path(tempfile.mkdtemp(dir=tmp))
    extra = C_ARGS if command == "imagenet-c" else P_ARGS
    cmd = [sys.executable, "-m", "shiftbench.cli", "generate", command, "--src", str(data), "--out", str(out / "o"),
           "--workers", str(workers), *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return dt


def default_policy(command: str) -> str:
    """What ``--workers 0`` means for the command in this checkout (read from its --help)."""
    r = subprocess.run([sys.executable, "-m", "shiftbench.cli", "generate", command, "--help"], env=_env(),
                       capture_output=True, text=True)
    return "auto (--threads)" if "as --threads says" in " ".join(r.stdout.split()) else "one per core"


def resolved_default(policy: str) -> int:
    sys.path.insert(0, str(REPO / "src"))
    from shiftbench.evaluation.threads import resolve_model_threads

    return resolve_model_threads("auto") if policy.startswith("auto") else (os.cpu_count() or 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workers", nargs="+", type=int, default=[1, 2, 0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    out = args.out or HERE / "results" / f"generate_workers--{cpus}cpu--cpu.json"
    runs = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        data = {"imagenet-c": _data(tmp / "c", 12), "imagenet-p": _data(tmp / "p", 2)}
        policy = {c: default_policy(c) for c in data}
        for command in data:  # warm up: imports, numba caches, the encoder
            one_run(command, data[command], 1, tmp)
        for condition in ("as-is", "busy"):
            spinners = []
            if condition == "busy":
                ctx = get_context("spawn")
                spinners = [ctx.Process(target=_spin, daemon=True) for _ in range(cpus)]
                for p in spinners:
                    p.start()
                time.sleep(2.0)
            try:
                for command in data:
                    for w in args.workers:
                        before = _load()
                        used = w or resolved_default(policy[command])
                        best = min(one_run(command, data[command], w, tmp) for _ in range(args.repeat))
                        runs.append({"condition": condition, "command": command, "workers": w, "workers_used": used,
                                     "default_policy": policy[command] if w == 0 else None,
                                     "seconds": round(best, 3), "load_before": before, "load_after": _load()})
                        print(runs[-1], flush=True)
            finally:
                for p in spinners:
                    p.terminate()
                    p.join()
    import torch

    doc = {
        "metadata": {"machine": machine(), "torch": torch.__version__, "cpus": cpus,
                     "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     "args": {k: str(v) for k, v in vars(args).items()},
                     "work": {"imagenet-c": "12 photos x 3 corruptions at severity 3, edition 224",
                              "imagenet-p": "2 photos x 2 perturbations at difficulty 1, edition 64, x264 ultrafast"},
                     "note": "A shared machine: other users' jobs ran beside the 'as-is' runs (see the load averages); "
                             "'busy' adds one spinning process per core on top of them. workers 0 is the command's "
                             "default, workers_used what it resolved to when the run started."},
        "runs": runs,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
