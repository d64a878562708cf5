"""One process, one batch call: the 15 x 5 pass on a batch of 32 224 photos at 1 and 2 threads.

How a training or evaluation loop uses shiftbench: ``corrupt(batch, name, severity)`` in its own
process, with ``torch.set_num_threads(t)`` (which ``corrupt`` follows: its ``threads`` default).
Three conditions: the machine as it is ("idle"), with one other process spinning on any core
("busy"), and with that process pinned to CPU 0 ("busy-pinned"). Each corruption's five severities
are timed ``--repeat`` times and the fastest pass kept; the pass rate is 2,400 images over the sum.
The load average before and after each condition is recorded: on a shared machine the numbers
need a rerun on an idle one when it is high.

    python perf/threads.py                   # writes perf/results/threads--<n>cpu--cpu.json
    python perf/threads.py --threads 1 2 4 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from perf.speed import machine  # noqa: E402


def _spin(cpu: int | None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    while True:
        pass


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def run_pass(x, names: list[str], threads: int, repeat: int) -> dict[str, object]:  # type: ignore[no-untyped-def]
    import torch

    import shiftbench

    torch.set_num_threads(threads)
    per: dict[str, float] = {}
    for n in names:
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            for s in range(1, 6):
                shiftbench.corrupt(x, n, s, seed=0)
            best = min(best, time.perf_counter() - t0)
        per[n] = best
    total = sum(per.values())
    return {"threads": threads, "seconds": total, "rate": 5 * len(x) * len(names) / total, "per_corruption_seconds": per}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--conditions", nargs="*", default=["idle", "busy", "busy-pinned"])
    ap.add_argument("--corruptions", nargs="*", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import cv2
    import torch

    import shiftbench
    from tests.oracle.harness import load_sample_224

    cv2.setNumThreads(1)
    names = args.corruptions or shiftbench.list_corruptions(group="benchmark")
    x = torch.from_numpy(load_sample_224(args.batch_size)).permute(0, 3, 1, 2).contiguous()
    torch.set_num_threads(1)
    for n in names:  # compile and build tables outside the timing
        for s in range(1, 6):
            shiftbench.corrupt(x[:2], n, s, seed=99)
    runs = []
    for cond in args.conditions:
        spinner = None
        if cond != "idle":
            spinner = get_context("spawn").Process(target=_spin, args=(0 if cond == "busy-pinned" else None,), daemon=True)
            spinner.start()
            time.sleep(1.0)
        try:
            for t in args.threads:
                before = _load()
                r = run_pass(x, names, t, args.repeat)
                r.update(condition=cond, load_before=before, load_after=_load())
                runs.append(r)
                print(f"{cond:12s} threads={t}: {r['rate']:7.1f} images/s  (load {before} -> {r['load_after']})", flush=True)
        finally:
            if spinner is not None:
                spinner.terminate()
                spinner.join()
    lines = [f"{'condition':12s} " + "".join(f"{f'threads={t}':>12s}" for t in args.threads) + "   speed-up"]
    for cond in args.conditions:
        rates = {r["threads"]: r["rate"] for r in runs if r["condition"] == cond}
        row = f"{cond:12s} " + "".join(f"{rates[t]:12.1f}" for t in args.threads)
        if 1 in rates and len(rates) > 1:
            row += "   " + " ".join(f"{rates[t] / rates[1]:.2f}x" for t in args.threads if t != 1)
        lines.append(row)
    text = "\n".join(lines)
    print(text)
    meta = {"machine": machine(), "torch": torch.__version__, "shiftbench": shiftbench.__version__, "args": vars(args)}
    meta["machine"]["shared"] = "load averages per run below; other users' jobs ran beside it if they are above 0"
    out = Path(args.out) if args.out else HERE / "results" / f"threads--{os.cpu_count()}cpu--cpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"metadata": meta, "runs": runs, "table": text}, indent=1))
    os.replace(tmp, out)  # never a half-written result
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
