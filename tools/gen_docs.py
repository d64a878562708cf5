"""Write the measured tables of docs/*.md from perf/results/*.json.

Each table sits between two marker comments::

    <!-- gen:speed-cpu start: written by tools/gen_docs.py from perf/results/; edit the JSON, not the table -->
    ...
    <!-- gen:speed-cpu end -->

and is rewritten from the JSON a perf/ script stored, so rerunning a benchmark and this script
updates the docs, and nobody edits the numbers by hand. ``--check`` changes nothing and exits 1
when a document is not what the script would write (the tests run the same check).

    python tools/gen_docs.py            # rewrite the tables
    python tools/gen_docs.py --check    # exit 1 if a table is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "perf" / "results"

BENCHMARK_15 = [
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
]  # fmt: skip
PEERS = [("imagenet_c", "imagenet-c 0.0.3 (reference)"), ("imagecorruptions", "imagecorruptions 1.1.2"),
         ("albumentations", "albumentations 2.0.8 (look-alikes, not ImageNet-C)")]  # fmt: skip


def _load(name: str, results: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((results / name).read_text())
    return data


def _num(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def _rate(entry: dict[str, Any]) -> float:
    return float(entry["images"]) / float(entry["cpu_seconds"])


def _machine(meta: dict[str, Any]) -> str:
    m = meta.get("machine", {})
    if isinstance(m, dict):
        return f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, Python {m.get('python', '?')}"
    return str(m)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def speed_cpu(results: Path, name: str = "speed--2cpu--cpu.json") -> list[str]:
    d = _load(name, results)
    res, meta = d["results"], d["metadata"]
    ref = res["imagenet_c"]["overall_rate"]
    rows = [["shiftbench", f"**{_num(res['shiftbench']['overall_rate'], 0)}** / {_num(res['shiftbench']['overall_rate_median_pass'], 0)}",
             f"**{res['shiftbench']['overall_rate'] / ref:.1f}x**"]]  # fmt: skip
    for key, label in PEERS:
        if key in res:
            r = res[key]
            rows.append([label, f"{_num(r['overall_rate'])} / {_num(r['overall_rate_median_pass'])}", f"{r['overall_rate'] / ref:.1f}x"])
    out = [
        f"`perf/results/{name}`: {_machine(meta)}, torch {meta['torch']}, "
        f"{meta['args']['processes']} processes, batches of {meta['args']['batch_size']}, "
        f"{meta['args']['repeat']} passes per corruption.",
        "",
    ]
    out += _table(["", "corrupted 224 images / s, whole 15 x 5 pass: fastest / median pass", "vs reference"], rows)
    out += ["", "Per corruption, corrupted 224 images per second of one core (fastest pass):", ""]
    per_rows = []
    for name in BENCHMARK_15:
        ours = _rate(res["shiftbench"]["per_corruption"][name])
        cells = [name, _num(ours, 0)]
        for key, _ in PEERS:
            entry = res.get(key, {}).get("per_corruption", {}).get(name)
            cells.append(_num(_rate(entry)) if entry and "cpu_seconds" in entry else "-")
        refentry = res["imagenet_c"]["per_corruption"].get(name)
        cells.append(f"{ours / _rate(refentry):.1f}x" if refentry and "cpu_seconds" in refentry else "-")
        per_rows.append(cells)
    out += _table(["corruption", "shiftbench", "imagenet-c", "imagecorruptions", "albumentations", "shiftbench / reference"], per_rows)
    return out


def _load_note(meta: dict[str, Any]) -> str:
    a, b = meta.get("load_average_at_start"), meta.get("load_average_at_end")
    if not a or not b:
        return ""
    return f", load average (1 min) {a[0]:.1f} at the start and {b[0]:.1f} at the end"


def _shared_note(meta: dict[str, Any]) -> str:
    """Whether other jobs shared the machine: more runnable work at the start than the run's own processes."""
    start, procs = meta.get("load_average_at_start"), int(meta["args"].get("processes") or 1)
    return " (the machine was shared)" if start and start[0] > procs + 0.5 else ""


def speed_ab(results: Path) -> list[str]:
    d = _load("speed-ab--2cpu--cpu.json", results)
    res, meta = d["results"], d["metadata"]
    new, old = res["shiftbench"], res["shiftbench-baseline"]
    args = meta["args"]
    out = [
        f"`perf/results/speed-ab--2cpu--cpu.json`: {_machine(meta)}, torch {meta['torch']}{_load_note(meta)}; "
        f"{args['processes']} processes, batches of {args['batch_size']}, {args['repeat']} passes per corruption, "
        f"the code before (commit {old.get('label') or '?'}) and after in turn ({new.get('rounds', 1)} round(s)), each keeping its fastest pass"
        + (f"; timed by each worker's CPU time{_shared_note(meta)}, so the whole pass is the rate with a core per process." if args.get("clock") == "cpu" else "."),
        "",
    ]
    ref = res.get("imagenet_c") if "per_corruption" in res.get("imagenet_c", {}) else None
    if ref is not None:
        out[0] += (f" The reference (imagenet-c) ran in the same invocation on {ref['per_corruption'][BENCHMARK_15[0]]['images'] // 5}"
                   " of the photos, timed the same way.")  # fmt: skip
    rows = []
    for name in BENCHMARK_15:
        a, b = _rate(old["per_corruption"][name]), _rate(new["per_corruption"][name])
        row = [name, _num(a, 0), _num(b, 0), f"{b / a:.2f}x"]
        if ref is not None:
            r = _rate(ref["per_corruption"].get(name))
            row += [_num(r), f"{a / r:.1f}x", f"{b / r:.1f}x"] if r else ["-", "-", "-"]
        rows.append(row)
    total_old = sum(float(v["images"]) for v in old["per_corruption"].values()) / float(old["busy_seconds"])
    total_new = sum(float(v["images"]) for v in new["per_corruption"].values()) / float(new["busy_seconds"])
    row = ["**whole 15 x 5 pass** (images / s, busiest process)", _num(total_old, 0), _num(total_new, 0), f"**{total_new / total_old:.2f}x**"]
    header = ["corruption (images / s of one core)", "before", "after", "after / before"]
    if ref is not None:
        total_ref = sum(float(v["images"]) for v in ref["per_corruption"].values()) / float(ref.get("busy_seconds", ref["wall_seconds"]))
        row += [_num(total_ref), f"{total_old / total_ref:.1f}x", f"**{total_new / total_ref:.1f}x**"]
        header += ["reference", "before / reference", "after / reference"]
    rows.append(row)
    return out + _table(header, rows)


def threads_cpu(results: Path) -> list[str]:
    d = _load("threads--2cpu--cpu.json", results)
    meta, runs = d["metadata"], d["runs"]
    args = meta["args"]
    labels = {"idle": "no process of ours beside it", "busy": "one process spinning", "busy-pinned": "one process spinning, pinned to CPU 0"}
    out = [
        f"`perf/results/threads--2cpu--cpu.json`: {_machine(meta)}, torch {meta['torch']}; a batch of {args['batch_size']}, "
        f"the fastest of {args['repeat']} passes per corruption; \"default\" is `threads=None`, \"forced\" `threads=t` on every call "
        "(what the default did before). Images per second of the whole pass; the threads the default chose, averaged over its calls.",
        "",
    ]
    rows = []
    for cond in args["conditions"]:
        sel = {(r["threads"], r["policy"]): r for r in runs if r["condition"] == cond}
        one = sel.get((1, "default"))
        for (t, pol), r in sorted(sel.items()):
            ratio = f"{r['rate'] / one['rate']:.2f}x" if one is not None else "-"
            rows.append([labels.get(cond, cond), f"{t} ({pol})", f"{r['threads_used_mean']:.2f}", _num(r["rate"]), ratio,
                         f"{r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}"])  # fmt: skip
    table = _table(["condition", "torch threads (policy)", "threads used", "images / s", "vs 1 thread", "load average (1 min)"], rows)
    ceiling = d.get("ceiling") or {}
    if ceiling:
        parts = [f"{labels.get(c, c)}: vector arithmetic {v['vector_arithmetic']:.2f}x, dependent loads {v['dependent_loads']:.2f}x"
                 for c, v in ceiling.items()]  # fmt: skip
        table += ["", "The machine alone in the same run (compiled loops, no shiftbench code; two threads over one): " + "; ".join(parts) + "."]
    return out + table


def speed_cuda(results: Path) -> list[str]:
    d = _load("speed--h100--cuda.json", results)
    res, meta = d["results"]["shiftbench"], d["metadata"]
    out = [
        f"`perf/results/speed--h100--cuda.json`: {meta.get('gpu', 'GPU')} with {_machine(meta)}, torch {meta['torch']}, "
        f"batches of {meta['args']['batch_size']}; whole 15 x 5 pass **{_num(res['overall_rate'], 0)}** images/s "
        f"(median pass {_num(res['overall_rate_median_pass'], 0)}).",
        "",
    ]
    rows = [[n, _num(_rate(res["per_corruption"][n]), 0)] for n in BENCHMARK_15]
    return out + _table(["corruption", "corrupted 224 images / s on the GPU"], rows)


def eval_overhead(results: Path) -> list[str]:
    d = _load("eval_overhead--2cpu--cpu.json", results)
    meta, secs, added = d["metadata"], d["seconds_per_pass"], d["added_vs_precorrupted"]
    labels = {"precorrupted": "pre-corrupted tensors", "onthefly-serial": "corrupted on the fly, in line",
              "onthefly-prefetch": "corrupted on the fly, prefetch thread"}  # fmt: skip
    rows = []
    for key, label in labels.items():
        extra = "-" if key == "precorrupted" else f"+{100 * added['median'][key]:.1f} % / +{100 * added['min'][key]:.1f} %"
        rows.append([label, f"{secs[key]['median']:.2f} / {secs[key]['min']:.2f}", extra])
    head = (
        f"`perf/results/eval_overhead--2cpu--cpu.json`: {meta['n_images']} images x {meta['conditions']} conditions, "
        f"batches of {meta['batch_size']}, {meta['cpu_count']} cores, {meta['torch_threads']} torch threads, "
        f"{meta['repeats']} passes."
    )
    return [head, ""] + _table(["EfficientNet-Lite0 on", "seconds per pass: median / fastest", "added: median / fastest"], rows)


def eval_threads(results: Path) -> list[str]:
    d = _load("eval_threads--2cpu--cpu.json", results)
    meta = d["metadata"]
    rows = []
    for r in d["runs"]:
        used = f"{r['threads']}" + (f" (= {r['threads_used']})" if r["threads"] == "auto" else "")
        rows.append([r["condition"], used, f"{r['seconds']:.1f}", f"{r['predictions_per_s']:.2f}",
                     f"{r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}"])
    head = (
        f"`perf/results/eval_threads--2cpu--cpu.json` ({meta['when']}, {_machine(meta)}, torch {meta['torch']}, "
        f"torch's default {meta['torch_default_threads']} threads): EfficientNet-Lite0, 8 photos x (clean + 2 "
        f"corruptions), the fastest of {meta['args']['repeat']} runs."
    )
    return [head, ""] + _table(["machine", "--threads", "seconds", "predictions / s", "load average (1 min)"], rows)


def generate_workers(results: Path, name: str = "generate_workers--2cpu--cpu.json") -> list[str]:
    d = _load(name, results)
    meta = d["metadata"]
    rows = []
    for r in d["runs"]:
        w = "0 (default: " + f"{r['default_policy']} = {r['workers_used']})" if r["workers"] == 0 else str(r["workers"])
        rows.append([r["command"], r["condition"], w, f"{r['seconds']:.1f}",
                     f"{r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}"])
    head = (
        f"`perf/results/{name}` ({meta['when']}, {_machine(meta)}, torch {meta['torch']}): "
        f"`generate imagenet-c` on {meta['work']['imagenet-c']}; `generate imagenet-p` on {meta['work']['imagenet-p']}; "
        "each the command line in a fresh process, "
        + (f"the fastest of {meta['args']['repeat']} runs." if str(meta["args"]["repeat"]) != "1" else "one run each.")
    )
    return [head, ""] + _table(["command", "machine", "--workers", "seconds", "load average (1 min)"], rows)


def jpeg_floor(results: Path) -> list[str]:
    d = _load("jpeg_floor--cpu.json", results)
    meta, mean, stages = d["metadata"], d["mean"], d["compiled_stages_us"]
    qualities = ", ".join(str(r["quality"]) for r in d["per_severity"])
    rows = [
        [f"reference: Pillow encode + decode (qualities {qualities})", f"{mean['reference_pillow_round_trip_ms']:.3f}"],
        ["libjpeg-turbo encode alone", f"{mean['libjpeg_turbo_encode_ms']:.3f}"],
        ["libjpeg-turbo decode alone", f"{mean['libjpeg_turbo_decode_ms']:.3f}"],
        ["shiftbench `corrupt`", f"{mean['shiftbench_ms']:.3f}"],
        [f"shiftbench compiled pipeline ({meta['dct_vectors']} DCT)", f"{mean['shiftbench_compiled_pipeline_ms']:.3f}"],
    ]
    out = [f"`perf/results/jpeg_floor--cpu.json`: {_machine(meta)}; mean over the 5 severities.", ""]
    out += _table(["JPEG of one 224 image", "ms"], rows)
    out += ["", "The compiled pipeline by stage (us per image): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()) + "."]
    return out


def decision_fidelity(results: Path) -> list[str]:
    d = _load("decision_fidelity.json", results)
    rows = []
    for r in d["rows"]:
        ours, ref = 100 * sum(r["ours"]) / len(r["ours"]), 100 * sum(r["reference"]) / len(r["reference"])
        diff = 100 * r["mean_abs_diff"]
        rows.append([r["corruption"], f"{ours:.1f} / {ref:.1f}", "identical" if diff < 1e-9 else f"{diff:.1f}"])
    rows.append(["**mean over the 15 benchmark corruptions**",
                 f"**{100 * d['mean15']['shiftbench']:.2f} / {100 * d['mean15']['reference']:.2f}**", ""])  # fmt: skip
    head = (
        f"`perf/results/decision_fidelity.json`: EfficientNet-Lite0 on {d['images']} photos "
        f"(clean error {100 * d['clean_error']:.0f} %), 224 edition, independent seeds."
    )
    return [head, ""] + _table(
        ["corruption", "top-1 error, mean of 5 severities: shiftbench / reference (%)", "mean abs. difference per severity (points)"], rows
    )


P_SHORT = {"gaussian_noise": "Gauss.", "shot_noise": "Shot", "motion_blur": "Motion", "zoom_blur": "Zoom", "snow": "Snow",
           "brightness": "Bright", "translate": "Transl.", "rotate": "Rotate", "tilt": "Tilt", "scale": "Scale"}  # fmt: skip


def p_decision(results: Path) -> list[str]:
    d = _load("p_decision.json", results)
    rows_in = [r for r in d["results"] if r["difficulty"] == 1]
    summ = d["summaries"]["1"]
    header = [""] + [P_SHORT.get(r["perturbation"], r["perturbation"]) for r in rows_in] + ["mean"]
    fp = [f"{r['fp_percent']:.2f}" for r in rows_in]
    rows = [
        ["FP (%)", *fp, f"{100 * summ['mean_fp']:.2f}"],
        ["FR (%)", *(f"{r['fr_percent']:.1f}" for r in rows_in), f"**mFR {100 * summ['mfr']:.1f}**"],
        ["uT5D", *(f"{r['ut5d']:.2f}" for r in rows_in), ""],
        ["T5D (%)", *(f"{r['t5d_percent']:.1f}" for r in rows_in), f"**mT5D {100 * summ['mt5d']:.1f}**"],
    ]
    t = d["timing"]
    head = (
        f"`perf/results/p_decision.json`: EfficientNet-Lite0, {len(d['metadata']['images'])} photos, seed "
        f"{d['metadata']['seed']}, difficulty 1, {d['frames']:,} frames in {t['total_s']:,.0f} s "
        f"({100 * t['model_s'] / t['total_s']:.0f} % in the model) on {d['metadata']['threads']} threads."
    )
    return [head, ""] + _table(header, rows)


def ray_evaluate(results: Path) -> list[str]:
    d = _load("ray_scaling.json", results)
    e = d.get("evaluate")
    if e is None:
        return ["Not measured yet: run `perf/ray_scaling.py --part evaluate --json perf/results/ray_scaling.json`."]
    st, runs, ov, m = e["settings"], e["runs"], e["per_shard_overhead_ms"], e["machine"]
    labels = {"local": "one machine, no Ray (PyTorch's default threads)",
              "local-1thread": "one machine, no Ray, one thread (as a Ray worker)",
              "ray-1node": "`--ray`, head alone (1 CPU)", "ray-2nodes": "`--ray`, head + worker node (1 CPU each)"}  # fmt: skip
    same = e["predictions_identical_to_local"]
    rows = [[labels[k], f"{runs[k]['best_s']:.1f}", f"{runs[k]['images_per_s']:.2f}", "yes" if same.get(k) else "NO"]
            for k in labels if k in runs]
    lb, la = e["loadavg_before"], e["loadavg_after"]
    head = (
        f"`perf/ray_scaling.py --part evaluate` (`perf/results/ray_scaling.json`, key `evaluate`): `shiftbench "
        f"evaluate` with {st['model']} on {st['images']} shared sample photos x {st['conditions']} = "
        f"{st['predictions']} predictions, batch size {st['batch_size']}, shards of {st['shard_images']} images; "
        f"the fastest of {st['repeats']} runs of the whole command (start-up, Ray connection and model loading "
        f"included), {m['cpu_count']} cores **shared with other developers' jobs** (load average {lb[0]:.1f} before, "
        f"{la[0]:.1f} after; both Ray nodes on the same cores, so this shows Ray's cost, not a second machine's gain)."
    )
    over = (
        f"Ray's cost per shard: {ov['ray_ms_per_extra_shard']:.0f} ms ({ov['images']} clean images, a tiny model, "
        f"batches of one: {ov['ray_s_shards_of_one']:.1f} s in shards of one image against "
        f"{ov['ray_s_one_shard']:.1f} s in one shard, worker start included in both; the local loop takes "
        f"{ov['local_ms_per_image']:.0f} ms per image, decoding included)."
    )
    return [head, ""] + _table(["set-up", "seconds", "predictions / s", "same stored predictions"], rows) + ["", over]


def structural_emoji(results: Path) -> list[str]:
    d = _load("structural_emoji.json", results)
    sp, m = d["spec"], d["machine"]
    rows = []
    for r in d["rows"]:
        name = r["split"].split(":", 1)[1] if r["kind"] == "style" else "one random subtype per class"
        rows.append([f"{r['kind']}: {name}", f"{r['train']:,}", f"{r['n_heldout']:,}",
                     f"{100 * r['seen_accuracy']:.1f}", f"{100 * r['heldout_accuracy']:.1f}", f"{100 * r['gap']:+.1f}"])
    load = m.get("load_average_before")
    head = (
        f"`perf/results/structural_emoji.json`: {d['images']:,} images, {d['classes']} classes; recipe "
        f"`{sp['name']}` (input mean {sp['recipe']['mean'][0]:g}, std {sp['recipe']['std'][0]:g}) with {sp['arch']} at "
        f"{sp['image_size']} px, {sp['recipe']['epochs']} epochs, batch {sp['recipe']['batch_size']}, lr "
        f"{sp['recipe']['lr']}, seed {d['seed']}"
        + (f", seen-test share {100 * d['seen_test_fraction']:.0f} %" if d.get("seen_test_fraction") else "")
        + f"; {d['total_seconds'] / 60:.1f} min wall "
        f"({d.get('total_cpu_seconds', float('nan')) / 60:.1f} CPU-min) on {m['cpus']} cores with "
        f"{m['cpu_threads']} threads" + (f", load average {load[0]:.1f} at the start" if load else "") + "."
    )
    return [head, ""] + _table(
        ["held out", "training images", "held-out images", "seen accuracy (%)", "held-out accuracy (%)", "gap (points)"], rows
    )


GENERATORS: dict[str, Callable[[Path], list[str]]] = {
    "ray-evaluate": ray_evaluate,
    "speed-cpu": speed_cpu,
    "generate-workers-quiet": lambda results: generate_workers(results, "generate_workers-quiet--2cpu--cpu.json"),
    "speed-cpu-amd": lambda results: speed_cpu(results, "speed--2cpu-amd--cpu.json"),
    "speed-cuda": speed_cuda,
    "speed-ab": speed_ab,
    "threads-cpu": threads_cpu,
    "eval-overhead": eval_overhead,
    "eval-threads": eval_threads,
    "generate-workers": generate_workers,
    "jpeg-floor": jpeg_floor,
    "decision-fidelity": decision_fidelity,
    "p-decision": p_decision,
    "structural-emoji": structural_emoji,
}

# markers count only at the start of a line (a marker quoted in prose is not one)
_BLOCK = re.compile(r"^(<!-- gen:(?P<name>[\w-]+) start[^>]*-->\n)(?P<body>.*?)^(<!-- gen:(?P=name) end -->)", re.S | re.M)


def render(text: str, results: Path = RESULTS) -> str:
    """The document with every generated block rewritten from ``results``."""

    def fill(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in GENERATORS:
            raise KeyError(f"unknown generated table {name!r} (known: {', '.join(GENERATORS)})")
        return m.group(1) + "\n".join(GENERATORS[name](results)) + "\n" + m.group(4)

    starts = re.findall(r"^<!-- gen:([\w-]+) start", text, re.M)
    out, count = _BLOCK.subn(fill, text)
    if count != len(starts):
        raise ValueError(f"{len(starts)} generated blocks start but {count} end properly")
    return out


def documents() -> list[Path]:
    return sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a document is stale")
    args = ap.parse_args(argv)
    stale = []
    for path in documents():
        text = path.read_text()
        new = render(text)
        if new != text:
            stale.append(path.relative_to(REPO))
            if not args.check:
                path.write_text(new)
    verb = "stale" if args.check else "rewritten"
    for p in stale:
        print(f"{verb}: {p}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
