"""What an image key costs: shiftbench's compiled XXH64 against SHA-256 (hashlib, OpenSSL).

Every random corruption and ImageNet-P sequence seeds an image's draws with a digest of its pixels
when no explicit keys are given, so the key is paid once per image and corruption (once per image
in ``shiftbench generate``). This script times, on one thread, ``seeding.image_key`` (XXH64 of the
3 x H x W uint8 pixels) and SHA-256 of the same bytes, fastest of ``--repeat`` passes over the real
photos, at the editions' sizes. Run::

    python perf/image_key.py --out perf/results/image_key--cpu.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from perf.jpeg_floor import _best
    from perf.speed import machine
    from tests.conftest import photos

    from shiftbench.rng.seeding import image_key

    rows = {}
    for edition in ("224", "299", "64", "32"):
        imgs = [np.ascontiguousarray(im.transpose(2, 0, 1)) for im in photos(edition, args.images)]
        ours = 1e3 * _best(lambda: [image_key(a) for a in imgs], args.repeat, len(imgs))
        sha = 1e3 * _best(lambda: [hashlib.sha256(memoryview(a).cast("B")).digest() for a in imgs], args.repeat, len(imgs))
        rows[edition] = {"side": int(imgs[0].shape[-1]), "xxh64_us": ours, "sha256_us": sha, "ratio": sha / ours}
        print(f"{edition:>4}: image_key (XXH64) {ours:7.1f} us   SHA-256 {sha:7.1f} us   {sha / ours:5.1f}x")
    if args.out:
        meta = {"machine": machine(), "numpy": np.__version__, "args": vars(args)}
        Path(args.out).write_text(json.dumps({"metadata": meta, "results": rows}, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
