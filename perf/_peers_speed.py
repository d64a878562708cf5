"""Timing worker run inside the peers environment (reference imagenet-c, imagecorruptions, albumentations).

Usage: python _peers_speed.py IN.npz OUT.json LIBRARY PROCESSES [REPEAT]
Times LIBRARY on every (image, corruption, severity) of IN (N x 224 x 224 x 3
uint8, corruption names, severities) with PROCESSES worker processes, one
thread each, and writes per-corruption counts and seconds (the fastest of REPEAT
passes per corruption, default 1).
"""

import json
import os
import sys
import time
import warnings
from multiprocessing import get_context

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
warnings.simplefilter("ignore")

import numpy as np  # noqa: E402


def _albu_transform(name, s):
    """Closest albumentations 2.x transform for each ImageNet-C corruption (not faithful: no ImageNet-C severities)."""
    import albumentations as A

    k = s / 5.0
    table = {
        "gaussian_noise": lambda: A.GaussNoise(std_range=(0.08 * s / 2, 0.08 * s / 2), p=1),
        "shot_noise": lambda: A.ShotNoise(scale_range=(0.1 * k, 0.1 * k), p=1),
        "impulse_noise": lambda: A.SaltAndPepper(amount=(0.03 * s, 0.03 * s), p=1),
        "defocus_blur": lambda: A.Defocus(radius=(2 + s, 2 + s), alias_blur=(0.1, 0.5), p=1),
        "glass_blur": lambda: A.GlassBlur(sigma=0.5 + 0.2 * s, max_delta=max(1, s // 2 + 1), iterations=2, p=1),
        "motion_blur": lambda: A.MotionBlur(blur_limit=(7 + 2 * s + 1, 7 + 2 * s + 1), p=1),
        "zoom_blur": lambda: A.ZoomBlur(max_factor=(1.0 + 0.06 * s, 1.0 + 0.06 * s), step_factor=(0.01, 0.03), p=1),
        "snow": lambda: A.RandomSnow(snow_point_range=(0.1 * k, 0.3 * k + 0.01), brightness_coeff=2.0, p=1),
        "frost": lambda: A.RandomFog(fog_coef_range=(0.3 * k, 0.3 * k + 0.01), p=1),
        "fog": lambda: A.RandomFog(fog_coef_range=(0.5 * k, 0.5 * k + 0.01), p=1),
        "brightness": lambda: A.RandomBrightnessContrast(brightness_limit=(0.1 * s, 0.1 * s), contrast_limit=0, p=1),
        "contrast": lambda: A.RandomBrightnessContrast(brightness_limit=0, contrast_limit=(-0.18 * s, -0.18 * s), p=1),
        "elastic_transform": lambda: A.ElasticTransform(alpha=30 * s, sigma=5, p=1),
        "pixelate": lambda: A.Downscale(scale_range=(0.6 - 0.07 * s, 0.6 - 0.07 * s), p=1),
        "jpeg_compression": lambda: A.ImageCompression(quality_range=(30 - 5 * s, 30 - 5 * s), p=1),
    }
    return table[name]()


def _run(args):
    lib, images, names, sevs, repeat, clock_name = args
    clock = time.process_time if clock_name == "cpu" else time.perf_counter  # cpu: this process's CPU time (a shared machine)
    try:  # one thread per process for OpenCV too (the reference and imagecorruptions call it)
        import cv2

        cv2.setNumThreads(1)
    except ImportError:
        pass
    if lib == "imagenet_c":
        np.random.default_rng = lambda seed=None: np.random.mtrand._rand
        from imagenet_c import corrupt

        fn = lambda img, n, s: corrupt(img, severity=s, corruption_name=n)  # noqa: E731
    elif lib == "imagecorruptions":
        from imagecorruptions import corrupt as ic

        fn = lambda img, n, s: ic(img, corruption_name=n, severity=s)  # noqa: E731
    else:
        cache = {}

        def fn(img, n, s):
            if (n, s) not in cache:
                cache[(n, s)] = _albu_transform(n, s)
            return cache[(n, s)](image=img)["image"]

    out = {}
    for n in names:
        for _ in range(repeat):
            t0 = clock()
            cnt = 0
            failed = None
            for s in sevs:
                for img in images:
                    try:
                        fn(img, n, s)
                    except Exception as e:  # the library cannot run this corruption on today's stack
                        failed = {"error": f"{type(e).__name__}: {e}"[:200]}
                        break
                    cnt += 1
                if failed:
                    break
            if failed:
                out[n] = failed
                break
            out.setdefault(n, {"images": cnt, "passes": []})["passes"].append(clock() - t0)
    return out


def main():
    data = np.load(sys.argv[1])
    lib, procs = sys.argv[3], int(sys.argv[4])
    repeat = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    clock = sys.argv[6] if len(sys.argv) > 6 else "wall"
    images = data["images"]
    names = [str(x) for x in data["names"]]
    sevs = [int(x) for x in data["severities"]]
    parts = [images[i::procs] for i in range(procs)]
    t0 = time.perf_counter()
    with get_context("fork").Pool(procs) as pool:
        results = pool.map(_run, [(lib, p, names, sevs, repeat, clock) for p in parts])
    wall = time.perf_counter() - t0
    merged = {}
    for n in names:
        errs = [r[n] for r in results if "error" in r[n]]
        if errs:
            merged[n] = errs[0]
        else:
            merged[n] = {"images": sum(r[n]["images"] for r in results), "cpu_seconds": sum(min(r[n]["passes"]) for r in results)}
    busy = max(sum(min(r[n]["passes"]) for n in names if "passes" in r[n]) for r in results)
    busy_median = max(sum(float(np.median(r[n]["passes"])) for n in names if "passes" in r[n]) for r in results)
    summary = {"library": lib, "processes": procs, "wall_seconds": wall, "busy_seconds": busy, "busy_seconds_median_pass": busy_median,
               "clock": clock}
    json.dump({**summary, "per_corruption": merged}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
