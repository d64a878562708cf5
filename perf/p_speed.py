"""ImageNet-P speed: generate and evaluate one 224 sequence set of the 10 test perturbations on the CPU.

For each image the 10 test sequences (9 x 31 + 41 = 320 frames at 224 x 224)
are generated in memory by shiftbench and streamed through EfficientNet-Lite0.
The run is split into generation, model and ranking time; the model's share
of the wall time says whether the evaluation is model-bound. A second
section times generation alone per perturbation (ms per frame).

    python perf/p_speed.py [--images 1] [--threads 2] [--out perf/results/p_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from p_decision import lite0_fn, load_lite0, sample_photos  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--out", default=str(HERE / "results" / "p_speed.json"))
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from shiftbench import perturbations as P

    paths, labels = sample_photos(args.images)
    fn = lite0_fn(load_lite0())
    prep = P.prepare(paths, "224")
    # warm-up: compile the Numba kernels and touch the model once
    for name in P.TEST_PERTURBATIONS:
        next(P.perturb_chunks(prep.subset(0, 1), name, chunk_frames=2))
    fn(prep.crops[:2])

    res = P.evaluate_sequences(fn, prep, labels, "test", 1, seed=0, batch_size=args.batch_size)
    t = res.timing
    share = t["model_s"] / t["total_s"]
    print(f"{res.frames} frames ({res.n_videos} image(s) x 10 test perturbations), threads {torch.get_num_threads()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"total {t['total_s']:.1f} s = generation {t['generate_s']:.1f} s + model {t['model_s']:.1f} s "
          f"+ ranking {t['rank_s']:.2f} s + other {t['total_s'] - t['generate_s'] - t['model_s'] - t['rank_s']:.2f} s")
    print(f"model share {100 * share:.1f} %  ({res.frames / t['total_s']:.1f} frames/s end to end, "
          f"model alone {res.frames / t['model_s']:.1f} frames/s, generation alone {res.frames / t['generate_s']:.1f} frames/s)")
    per = {}
    for name in P.TEST_PERTURBATIONS:
        runs = []
        for _ in range(2):  # best of two: the machine is shared
            t0 = time.perf_counter()
            y = P.perturb(prep, name)
            runs.append(time.perf_counter() - t0)
        per[name] = 1e3 * min(runs) / (y.shape[0] * y.shape[1])
        print(f"  generate {name:15s} {per[name]:6.1f} ms/frame")
    meta = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "images": [p.name for p in paths],
    }
    out = {"metadata": meta, "timing": t, "frames": res.frames, "model_share": share, "generate_ms_per_frame": per}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
