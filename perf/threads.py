"""One process, one batch call: the 15 x 5 pass on a batch of 32 224 photos at 1 and 2 threads.

How a training or evaluation loop uses shiftbench: ``corrupt(batch, name, severity)`` in its own
process, with ``torch.set_num_threads(t)`` (which ``corrupt`` follows: its ``threads`` default).
Three conditions: the machine as it is ("idle"), with one other process spinning on any core
("busy"), and with that process pinned to CPU 0 ("busy-pinned"). Each corruption's five severities
are timed ``--repeat`` times and the fastest pass kept; the pass rate is 2,400 images over the sum.
At more than one thread the pass runs twice: with ``corrupt``'s default (``threads=None``, which
leaves out the CPUs that other runnable tasks hold) and "forced" (``threads=t`` on every call).
The load average before and after each condition is recorded: on a shared machine the numbers
need a rerun on an idle one when it is high. Each condition first measures the machine itself ("ceiling"):
compiled loops of vector arithmetic and of dependent loads, no shiftbench code, on one thread and twice at
once on two. Where a VM's second CPU shares a core (or its power) with the first, vector arithmetic gains
less than 2x there too, and no split of the batch can do better than that.

    python perf/threads.py                   # writes perf/results/threads--<n>cpu--cpu.json
    python perf/threads.py --threads 1 2 4 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from functools import lru_cache
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


@lru_cache(maxsize=1)
def _ceiling_kernels():  # type: ignore[no-untyped-def]
    import numba
    import numpy as np

    @numba.njit(nogil=True)
    def arithmetic(a, reps):  # type: ignore[no-untyped-def]
        s = np.zeros(8)
        for _ in range(reps):
            for i in range(0, a.shape[0], 8):
                for k in range(8):
                    s[k] = s[k] * 0.999 + a[i + k]
        return s.sum()

    @numba.njit(nogil=True)
    def loads(nxt, steps):  # type: ignore[no-untyped-def]
        p = 0
        for _ in range(steps):
            p = nxt[p]
        return p

    rng = np.random.default_rng(0)
    return {
        "vector_arithmetic": (arithmetic, (rng.random(4096), 20_000)),  # 32 KiB: in L1
        "dependent_loads": (loads, (rng.permutation(1 << 16).astype(np.int64), 20_000_000)),  # 512 KiB: in L2
    }


def machine_ceiling(repeat: int) -> dict[str, float]:
    """What two threads give on this machine without shiftbench: compiled loops (GIL released) of vector arithmetic
    and of dependent loads, each once on one thread and twice at once on two threads, the fastest of ``repeat``
    tries; the work done per second on two threads over one (2.0: two whole cores)."""
    import threading

    out = {}
    for name, (fn, args) in _ceiling_kernels().items():
        fn(*args)  # compiled (once per process) outside the timing

        def twice() -> None:
            ts = [threading.Thread(target=fn, args=args) for _ in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()

        one = two = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn(*args)
            one = min(one, time.perf_counter() - t0)
            t0 = time.perf_counter()
            twice()
            two = min(two, time.perf_counter() - t0)
        out[name] = round(2 * one / two, 3)
    return out


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def run_pass(x, names: list[str], threads: int, repeat: int, forced: bool = False) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """The pass at ``torch.set_num_threads(threads)``: ``corrupt``'s default (``threads=None``), or
    with ``forced`` every call split over ``threads`` threads (``threads=threads``, what the default
    was before it looked at the other work on the machine)."""
    import torch

    import shiftbench
    from shiftbench.corruptions._parallel import resolve_threads

    torch.set_num_threads(threads)
    arg = threads if forced else None
    per: dict[str, float] = {}
    chosen: list[int] = []
    for n in names:
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            for s in range(1, 6):
                chosen.append(resolve_threads(arg))
                shiftbench.corrupt(x, n, s, seed=0, threads=arg)
            best = min(best, time.perf_counter() - t0)
        per[n] = best
    total = sum(per.values())
    return {
        "threads": threads,
        "policy": "forced" if forced else "default",
        "threads_used_mean": sum(chosen) / len(chosen),
        "seconds": total,
        "rate": 5 * len(x) * len(names) / total,
        "per_corruption_seconds": per,
    }


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
    from tests.oracle.harness import load_sample_224

    import shiftbench

    cv2.setNumThreads(1)
    names = args.corruptions or shiftbench.list_corruptions(group="benchmark")
    x = torch.from_numpy(load_sample_224(args.batch_size)).permute(0, 3, 1, 2).contiguous()
    torch.set_num_threads(1)
    for n in names:  # compile and build tables outside the timing
        for s in range(1, 6):
            shiftbench.corrupt(x[:2], n, s, seed=99)
    runs = []
    ceiling: dict[str, dict[str, float]] = {}
    for cond in args.conditions:
        spinner = None
        if cond != "idle":
            spinner = get_context("spawn").Process(target=_spin, args=(0 if cond == "busy-pinned" else None,), daemon=True)
            spinner.start()
            time.sleep(1.0)
        try:
            ceiling[cond] = machine_ceiling(args.repeat)
            print(f"{cond:12s} the machine alone, two threads over one: " + ", ".join(f"{k} {v:.2f}x" for k, v in ceiling[cond].items()), flush=True)
            for t in args.threads:
                for forced in (False, True) if t > 1 else (False,):
                    before = _load()
                    r = run_pass(x, names, t, args.repeat, forced)
                    r.update(condition=cond, load_before=before, load_after=_load())
                    runs.append(r)
                    print(
                        f"{cond:12s} threads={t} {r['policy']:8s}: {r['rate']:7.1f} images/s, {r['threads_used_mean']:.2f} threads per call"
                        f"  (load {before} -> {r['load_after']})",
                        flush=True,
                    )
        finally:
            if spinner is not None:
                spinner.terminate()
                spinner.join()
    cols = [(t, "default") for t in args.threads] + [(t, "forced") for t in args.threads if t > 1]
    lines = [f"{'condition':12s} " + "".join(f"{f'{t} {p}':>16s}" for t, p in cols) + "   speed-up over 1 thread"]
    for cond in args.conditions:
        rates = {(r["threads"], r["policy"]): r["rate"] for r in runs if r["condition"] == cond}
        row = f"{cond:12s} " + "".join(f"{rates[c]:16.1f}" for c in cols)
        if (1, "default") in rates and len(rates) > 1:
            row += "   " + " ".join(f"{t} {p}: {rates[(t, p)] / rates[(1, 'default')]:.2f}x" for t, p in cols if t != 1)
        lines.append(row)
    text = "\n".join(lines)
    print(text)
    meta = {"machine": machine(), "torch": torch.__version__, "shiftbench": shiftbench.__version__, "args": vars(args)}
    meta["machine"]["shared"] = "load averages per run below; other users' jobs ran beside it if they are above 0"
    out = Path(args.out) if args.out else HERE / "results" / f"threads--{os.cpu_count()}cpu--cpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"metadata": meta, "runs": runs, "ceiling": ceiling, "table": text}, indent=1))
    os.replace(tmp, out)  # never a half-written result
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
