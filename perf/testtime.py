"""Cost of the test-time methods (``evaluate --tta ten-crop``, ``--preprocess clahe``, ``--preprocess nlm-denoise``).

Times the classifier's ``logits`` on ImageNet-C-style 224 px images (the shared sample photos, Gaussian noise at
severity 3), for the plain classifier and each method, and the top-1 agreement of each method with the plain
classifier. Writes ``perf/results/testtime--<N>cpu--cpu.json`` with the machine, its load average and the threads.

    python perf/testtime.py [--model efficientnet-lite0] [--images 16] [--threads 2] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from shiftbench import corrupt  # noqa: E402
from shiftbench.editions import preprocess  # noqa: E402
from shiftbench.evaluation.models import load_model  # noqa: E402
from shiftbench.evaluation.testtime import with_test_time  # noqa: E402
from shiftbench.io import load_image_rgb  # noqa: E402

SAMPLE = REPO.parent / "shared" / "data" / "imagenet-sample-100"
METHODS = {"plain": {}, "ten-crop": {"tta": "ten-crop"}, "clahe": {"preprocess": "clahe"},
           "nlm-denoise": {"preprocess": "nlm-denoise"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="efficientnet-lite0")
    ap.add_argument("--images", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    files = sorted(Path(os.environ.get("SHIFTBENCH_SAMPLE_DIR", SAMPLE)).glob("*.JPEG"))[: args.images]
    x = torch.from_numpy(np.stack([np.asarray(preprocess(load_image_rgb(f), "224")) for f in files])).permute(0, 3, 1, 2)
    x = corrupt(x.contiguous(), "gaussian_noise", 3, seed=0)
    base = load_model(args.model)
    load0 = os.getloadavg()
    out, top1 = {}, {}
    for name, kw in METHODS.items():
        clf = with_test_time(base, **kw)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            logits = clf.logits(x)
            times.append(time.perf_counter() - t0)
        top1[name] = logits.argmax(1)
        best = min(times)
        out[name] = {"seconds": round(best, 3), "images_per_second": round(len(files) / best, 2),
                     "cost_vs_plain": None}
    for name in METHODS:
        out[name]["cost_vs_plain"] = round(out[name]["seconds"] / out["plain"]["seconds"], 2)
        out[name]["top1_agreement_with_plain"] = round(float((top1[name] == top1["plain"]).float().mean()), 3)
    result = {
        "script": "perf/testtime.py",
        "model": args.model,
        "images": len(files),
        "input": "shared sample photos, 224 edition, gaussian_noise severity 3 (seed 0)",
        "threads": args.threads,
        "repeat": args.repeat,
        "methods": out,
        "metadata": {"machine": platform.node(), "platform": platform.platform(),
                     "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                     "torch": torch.__version__, "load_average_at_start": load0,
                     "load_average_at_end": os.getloadavg()},
    }
    dest = REPO / "perf" / "results" / f"testtime--{args.threads}cpu--cpu.json"
    dest.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for name, r in out.items():
        print(f"{name:12s} {r['seconds']:7.2f} s  {r['images_per_second']:6.2f} img/s  x{r['cost_vs_plain']:.2f}  "
              f"top-1 agreement {r['top1_agreement_with_plain']:.2f}")
    print(f"wrote {dest}; load average {load0} -> {os.getloadavg()}")


if __name__ == "__main__":
    main()
