"""Working memory of every corruption and perturbation against what shiftbench declares for it.

``corrupt()`` refuses an image whose declared working memory (``Corruption.working_memory``) exceeds the memory
available, and ``perturb()`` one whose canvases (``perturbations.sequence_memory``) do, before allocating: the
declarations must be at least the real peaks, or a large image still ends in a ``MemoryError`` or an OOM kill.
This script measures the peaks: each operation runs in a fresh process (one thread), first on a 64 x 64 image
(imports, compiled kernels, caches), then on each size; the growth of the process's peak resident memory
(``ru_maxrss``) over the warm-up is the measured working memory, beside the declared one. Run::

    python perf/memory_per_pixel.py --out perf/results/memory_per_pixel.json

A declaration below its measured peak is a bug in the declaration. (``tests/test_hostile_memory.py`` checks the
refusals themselves: every corruption and perturbation on very long strips under an address-space limit.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

CHILD = r"""
import json, resource, sys
import numpy as np
import shiftbench
from shiftbench.corruptions import get_corruption
from shiftbench.perturbations import perturb, sequence_memory
kind, name, sizes = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
def run(x):
    if kind == "corruption":
        shiftbench.corrupt(x, name, 3, threads=1)
    else:
        perturb(x, name, 1)
try:
    run(np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8))
except shiftbench.errors.ShiftbenchError as e:
    print(json.dumps({"error": str(e)[:200]}))
    sys.exit(0)
base = peak()
out = {}
for h, w in sizes:
    x = np.random.default_rng(1).integers(0, 256, (h, w, 3), dtype=np.uint8)
    run(x)
    if kind == "corruption":
        spec = get_corruption(name)
        ed = shiftbench.edition_for_size(h, w).name
        ed = ed if ed in spec.params else next(iter(spec.params))
        declared = spec.working_memory(h, w, ed, spec.severity_params(ed, 3))
    else:
        declared = sequence_memory(h, w, "224")
    out[f"{h}x{w}"] = {"peak_bytes": peak() - base, "declared_bytes": int(declared)}
print(json.dumps(out))
"""


def measure(kind: str, name: str, sizes: list[tuple[int, int]]) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", CHILD, kind, name, json.dumps(sizes)], capture_output=True, text=True,
                       env=env, timeout=1800, check=False)  # fmt: skip
    line = next((ln for ln in reversed(r.stdout.splitlines()) if ln.startswith("{")), None)
    if r.returncode != 0 or line is None:
        return {"error": f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''}"}
    return json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1024x1024,64x4096,32x8192", help="H x W of the images, comma separated")
    ap.add_argument("--p-sizes", default="256x256,32x4000,32x12000", help="H x W of the photos for perturb")
    ap.add_argument("--only", default=None, help="comma-separated operation names")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from perf.speed import machine

    import shiftbench
    from shiftbench.perturbations import list_perturbations

    def sizes(text: str) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for a, b in (s.split("x") for s in text.split(","))]

    only = set(args.only.split(",")) if args.only else None
    rows: dict[str, dict[str, object]] = {"corruption": {}, "perturbation": {}}
    for kind, names, sz in (("corruption", shiftbench.list_corruptions(namespace="all"), sizes(args.sizes)),
                            ("perturbation", list_perturbations(), sizes(args.p_sizes))):
        for name in names:
            if only is not None and name not in only:
                continue
            got = measure(kind, name, sz)
            rows[kind][name] = got
            short = {k: (round(v["peak_bytes"] / 2**20), round(v["declared_bytes"] / 2**20)) for k, v in got.items()
                     if isinstance(v, dict)} if "error" not in got else got  # fmt: skip
            print(f"{kind:12} {name:24} MiB measured, declared: {short}", flush=True)
    if args.out:
        meta = {"machine": machine(), "args": vars(args), "load": os.getloadavg()}
        Path(args.out).write_text(json.dumps({"metadata": meta, "results": rows}, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
