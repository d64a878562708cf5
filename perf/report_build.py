"""How long `shiftbench report` takes, and where the time goes.

Store: the v2 store fixture (tests/fixtures/stores/v2_all.sqlite: ImageNet-C,
-P, -NOC and -D toy evaluations), copied to a temporary folder. Timed parts,
interleaved for ``--repeats`` rounds (the fastest round is the least disturbed
on a shared machine; medians are reported too):

* ``collect``: every registered benchmark's ``stored()`` section and its figures (matplotlib);
* ``gallery``: the shared photo under 19 corruptions x 5 severities at 224 px;
* ``report_no_gallery``: the whole report without the gallery (``--no-gallery``);
* ``report``: the whole report, figures also written as PNG and SVG (``--figures``).

Run::

    PYTHONPATH=src python perf/report_build.py --json perf/results/report_build--2cpu--cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STORE = REPO / "tests" / "fixtures" / "stores" / "v2_all.sqlite"
PHOTO = REPO.parent / "shared" / "data" / "imagenet-sample-100" / "n01530575_brambling.JPEG"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--photo", type=Path, default=PHOTO)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    import matplotlib.pyplot as plt
    import torch

    from shiftbench.evaluation.metrics import ALL_CORRUPTIONS
    from shiftbench.report import build_report
    from shiftbench.report.build import collect
    from shiftbench.report.gallery import gallery

    times: dict[str, list[float]] = {"collect": [], "gallery": [], "report_no_gallery": [], "report": []}
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "results.sqlite"
        shutil.copy(STORE, store)
        gallery(args.photo, ["snow"])  # first calls (kernel set-up) outside the timing
        size = 0
        for _ in range(args.repeats):
            t = time.perf_counter()
            _, figs = collect(store)
            times["collect"].append(time.perf_counter() - t)
            for fl in figs.values():
                for f in fl:
                    plt.close(f.figure)
            t = time.perf_counter()
            gallery(args.photo, list(ALL_CORRUPTIONS))
            times["gallery"].append(time.perf_counter() - t)
            t = time.perf_counter()
            build_report(store, Path(tmp) / "a.html", gallery=False)
            times["report_no_gallery"].append(time.perf_counter() - t)
            t = time.perf_counter()
            r = build_report(store, Path(tmp) / "b.html", figures_dir=Path(tmp) / "figs", gallery_image=args.photo)
            times["report"].append(time.perf_counter() - t)
            size = r.html.stat().st_size
    doc = {
        "metadata": {
            "machine": platform.machine(), "python": platform.python_version(), "torch": torch.__version__,
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(), "repeats": args.repeats,
            "store": "tests/fixtures/stores/v2_all.sqlite", "photo": args.photo.name,
            "note": "2-core machine shared with other developers' jobs: the fastest round is the least disturbed",
        },
        "seconds_fastest": {k: round(min(v), 2) for k, v in times.items()},
        "seconds_median": {k: round(statistics.median(v), 2) for k, v in times.items()},
        "html_bytes": size,
    }
    text = json.dumps(doc, indent=1)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
