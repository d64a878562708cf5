"""What a pixel-exact JPEG corruption costs on one CPU core, against what a codec costs.

The reference's ``jpeg_compression`` is Pillow's save (quality q, 4:2:0) and open of a 224 image.
shiftbench gives the same pixels with a compiled pipeline of libjpeg-turbo's lossy stages, without
the (lossless) entropy coder. This script times, per image and on one thread: the reference's
Pillow round trip (with its array conversions), libjpeg-turbo's encode and decode alone through
OpenCV (the codec's own floor), shiftbench's ``jpeg_compression`` through ``corrupt``, the compiled
pipeline alone (writing into a reused array), and the integer tensor pipeline (the GPU route) on
the CPU. Each is the fastest of ``--repeat`` passes over the real 224 photos, at every severity's
quality. Then the compiled pipeline's stages one by one (microseconds per image, severity 3's
quality), to show where its time goes. The DCT passes run as word-vector code where the CPU is x86
(``dct_vectors`` in the output: the width; ``SHIFTBENCH_JPEG_VECTORS=off`` times the portable kernels).
Run::

    python perf/jpeg_floor.py --out perf/results/jpeg_floor--cpu.json
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def _best(fn, repeat: int, n: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e3  # ms per image


def _stage_times(planes: np.ndarray, quality: int, repeat: int) -> dict[str, float]:
    """Microseconds per image of each stage of the compiled pipeline (fastest of ``repeat`` passes)."""
    from shiftbench.corruptions._cpu import jpeg as J

    _, _, h, w = planes.shape
    bf = J._buffers(h, w)
    yp, cp = bf.y, bf.c
    luma, chroma = J._tables(quality)
    out = np.empty_like(planes[0])
    stages = {
        "Y colour": lambda a: J._luma(a, h, w, yp.nby, yp.level),
        "CbCr colour and 2x2": lambda a: J._chroma(a, h, w, bf.cby, cp.level),
        "Y DCT, quantisation, IDCT": lambda a: yp.code(luma),
        "CbCr DCT, quantisation, IDCT": lambda a: cp.code(chroma),
        "upsampling": lambda a: J._upsample(cp.dec, h, w, bf.cby, bf.v, bf.up),
        "YCbCr to RGB": lambda a: J._to_rgb(yp.dec, bf.up8, h, w, yp.nby, out),
    }
    result = {}
    for name, stage in stages.items():
        result[name] = 1e3 * _best(lambda: [stage(a) for a in planes], repeat, len(planes))
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from perf.speed import machine
    from tests.oracle.harness import load_sample_224

    import shiftbench
    from shiftbench.corruptions._cpu.jpeg import jpeg_round_trip_planes
    from shiftbench.corruptions._jpeg_torch import jpeg_round_trip_tensor

    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    imgs = load_sample_224(args.images)
    n = len(imgs)
    x = torch.from_numpy(imgs).permute(0, 3, 1, 2).contiguous()
    bgr = [np.ascontiguousarray(a[..., ::-1]) for a in imgs]
    planes, planes_out = x.numpy(), np.empty_like(x.numpy())
    spec = shiftbench.get_corruption("jpeg_compression")
    rows = []
    for s in range(1, 6):
        q = int(spec.severity_params("224", s))
        params = [cv2.IMWRITE_JPEG_QUALITY, q, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420]
        encoded = [cv2.imencode(".jpg", a, params)[1] for a in bgr]

        def pillow() -> None:
            for a in imgs:
                buf = io.BytesIO()
                Image.fromarray(a).save(buf, "JPEG", quality=q)
                np.uint8(Image.open(buf))

        rows.append({
            "severity": s,
            "quality": q,
            "reference_pillow_round_trip_ms": _best(pillow, args.repeat, n),
            "libjpeg_turbo_encode_ms": _best(lambda: [cv2.imencode(".jpg", a, params) for a in bgr], args.repeat, n),
            "libjpeg_turbo_decode_ms": _best(lambda: [cv2.imdecode(e, cv2.IMREAD_COLOR) for e in encoded], args.repeat, n),
            "shiftbench_ms": _best(lambda: shiftbench.corrupt(x, "jpeg_compression", s), args.repeat, n),
            "shiftbench_compiled_pipeline_ms": _best(lambda: jpeg_round_trip_planes(planes, q, out=planes_out), args.repeat, n),
            "shiftbench_tensor_pipeline_cpu_ms": _best(lambda: jpeg_round_trip_tensor(x, q), max(1, args.repeat // 2), n),
        })
    stages = _stage_times(planes, int(spec.severity_params("224", 3)), args.repeat)
    keys = [k for k in rows[0] if k.endswith("_ms")]
    mean = {k: float(np.mean([r[k] for r in rows])) for k in keys}
    lines = [f"{k:38s} {mean[k]:7.3f} ms per 224 image" for k in keys]
    lines.append(f"5x the reference needs                 {mean['reference_pillow_round_trip_ms'] / 5:7.3f} ms per image")
    lines.append("compiled pipeline by stage (us per image): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))
    print("\n".join(lines))
    if args.out:
        from shiftbench.corruptions._cpu import jpeg_vec as _jpeg_vec

        width = {v: k for k, v in _jpeg_vec._WIDTHS.items()}[_jpeg_vec._PIECES]
        meta = {"machine": machine(), "torch": torch.__version__, "opencv": cv2.__version__, "dct_vectors": width, "args": vars(args)}
        Path(args.out).write_text(json.dumps({"metadata": meta, "per_severity": rows, "mean": mean, "compiled_stages_us": stages}, indent=1))


if __name__ == "__main__":
    main()
