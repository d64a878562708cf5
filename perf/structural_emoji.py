#!/usr/bin/env python3
"""CPU study of style and subtype robustness on the emoji-styles stand-in for ICONS-50.

For every emoji style (7): train without it, test on it (style hold-out, Hendrycks &
Dietterich, 2018, Section 4.2); and one subtype hold-out (one seeded subtype per class held
out, all its styles; Section 4.3), with the authors' ICONS-50 recipe (``icons50-wrn-16-4``:
inputs in [0, 1], no normalisation) at a CPU size. Each run reports the held-out accuracy,
the accuracy on a held-out 10 % of the seen part and the gap: the study uses the seen-test
variant (``SEEN_TEST_SHARE``) where the authors' script trains on all the seen data, because
the gap is what it asks about. Training goes through the shared harness
(shiftbench.training), so a killed study resumes where it stopped (same --out).

    PYTHONPATH=src python perf/structural_emoji.py            # defaults below
    PYTHONPATH=src python perf/structural_emoji.py --epochs 50 --arch wrn-16-4 --size 32  # the paper's recipe

Writes perf/results/structural_emoji.json (and a figure next to it). The paper's
numbers (ICONS-50, WRN-16-4, 50 epochs): 57 % on held-out Microsoft icons, ~93 % on Apple,
60.4 % on 50 held-out subtypes. emoji-styles is smaller (3669 images, 48 classes) and the
CPU recipe is much shorter, so only the ordering of styles is comparable, not the levels.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from shiftbench.structural import SEEN_TEST_SHARE, evaluate_split, read_emoji_styles, style_holdout, subtype_holdout
from shiftbench.training.recipes import get_recipe, train_classifier

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "emoji-styles"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--arch", default="wrn-16-2", help="small_cnn (width 16) or wrn-<d>-<k> (the paper: wrn-16-4)")
    ap.add_argument("--size", type=int, default=32, help="image side the networks see (the paper: 32)")
    ap.add_argument("--epochs", type=int, default=8, help="the paper: 50")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default=str(ROOT / "perf" / "results" / "structural_emoji_work"), help="checkpoints (resume)")
    ap.add_argument("--out", default=str(ROOT / "perf" / "results" / "structural_emoji.json"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    data = read_emoji_styles(a.data, size=32)
    spec = get_recipe("icons50-wrn-16-4", arch=a.arch, image_size=a.size, epochs=a.epochs, batch_size=a.batch_size, lr=a.lr)
    share = SEEN_TEST_SHARE  # the seen-test variant: the gap needs a seen accuracy
    splits = [style_holdout(data, s, seed=a.seed, seen_test_fraction=share) for s in sorted(set(data.styles.tolist()))]
    splits.append(subtype_holdout(data, "random", seed=a.seed, seen_test_fraction=share))
    rows = []
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    t_all = time.perf_counter()
    cpu_all = time.process_time()
    for sp in splits:
        t0 = time.perf_counter()
        run = sp.name.replace(":", "_")
        model = train_classifier(sp.train_data(), spec, a.work, seed=a.seed, run_name=run, log=print)
        sc, _ = evaluate_split(model, sp)
        row = {**sc.to_dict(), **sp.counts(), "train_seconds": round(model.result.seconds, 1), "wall_seconds": round(time.perf_counter() - t0, 1),
               "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None}
        if sp.kind == "subtype":
            row["per_group"] = {}  # one entry per held-out subtype: left out of the summary
        rows.append(row)
        print(f"{sp.name:40s} held-out {sc.heldout_accuracy:.3f} seen {sc.seen_accuracy:.3f} gap {sc.gap:+.3f}")
    result = {
        "study": "style and subtype hold-outs on emoji-styles (CPU)",
        "data": str(Path(a.data).name),
        "images": len(data),
        "classes": len(data.classes),
        "spec": spec.to_dict(),
        "seed": a.seed,
        "seen_test_fraction": share,
        "rows": rows,
        "total_seconds": round(time.perf_counter() - t_all, 1),
        "total_cpu_seconds": round(time.process_time() - cpu_all, 1),
        "machine": {"cpu_threads": a.threads, "cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                    "load_average_before": load_before,
                    "load_average_after": os.getloadavg() if hasattr(os, "getloadavg") else None},
        "paper_icons50": {"held_out_microsoft": 0.57, "held_out_apple": 0.93, "held_out_subtypes": 0.604},
    }  # fmt: skip
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1), encoding="utf-8")
    os.replace(tmp, out)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 3.6))
        names = [r["split"].split(":", 1)[1] if r["kind"] == "style" else "subtypes (random)" for r in rows]
        xs = range(len(rows))
        ax.bar([x - 0.2 for x in xs], [100 * r["seen_accuracy"] for r in rows], 0.4, label="seen (in distribution)")
        ax.bar([x + 0.2 for x in xs], [100 * r["heldout_accuracy"] for r in rows], 0.4, label="held out")
        ax.set_xticks(list(xs), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("accuracy (%)")
        ax.set_title(f"emoji-styles hold-outs ({a.arch}, {a.size}px, {a.epochs} epochs, CPU)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out.with_suffix(".png"), dpi=110)
        plt.close(fig)
    except ImportError:
        print("matplotlib missing: no figure")
    print(f"wrote {out} in {result['total_seconds']} s")


if __name__ == "__main__":
    main()
