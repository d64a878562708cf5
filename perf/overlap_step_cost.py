#!/usr/bin/env python3
"""Per-step cost of an overlap study on the CPU, and the whole study's time extrapolated from it.

Measures, with one torch thread (the studies' setting on 2 shared cores):

* a training step of the config's model on a batch (forward, backward, SGD);
* corrupting the corrupted half of a batch with each training corruption (ImageNet-C at a
  severity drawn per image, as the study does) and with each mixture;
* a test pass of one model over the test set on one test set.

and extrapolates the study: for every model, epochs x steps x (step + corruption of its half
batch), plus (models x (1 + tests)) test passes and one corruption of the test set per test.
The load average is recorded: on a shared machine the numbers are upper bounds of an idle one.

    PYTHONPATH=src python perf/overlap_step_cost.py --config mnist-imagenet-c

Writes perf/results/overlap_step_cost--<config>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from shiftbench.overlap.harness import build_model, load_config, load_dataset
from shiftbench.overlap.study_corruptions import apply_corruption

CPU: dict[str, float] = {}


def timed(fn, repeat: int, label: str = "") -> float:  # type: ignore[no-untyped-def]
    """Median wall seconds of ``fn``; its median CPU seconds (process time) go to ``CPU[label]``."""
    fn()  # warm-up (compiles kernels, fills caches)
    ts, cs = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        ts.append(time.perf_counter() - t)
        cs.append(time.process_time() - c)
    if label:
        CPU[label] = statistics.median(cs)
    return statistics.median(ts)


def extrapolate(step: float, corrupt: dict[str, float], test: float, test_corrupt: float, epochs: int, steps: int,
                tests: int) -> dict[str, object]:
    per_model = {"standard": epochs * steps * step}
    for name, t in corrupt.items():
        per_model[name] = epochs * steps * (step + t)
    testing = len(per_model) * (1 + tests) * test + test_corrupt
    return {
        "per_model": {n: round(t, 1) for n, t in per_model.items()},
        "training": round(sum(per_model.values()), 1),
        "testing": round(testing, 1),
        "total": round(sum(per_model.values()) + testing, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="mnist-imagenet-c")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    cfg = load_config(a.config)
    ds = load_dataset(cfg.data, cfg.seed)
    assert ds.train_x is not None and ds.test_x is not None
    tc = cfg.train
    bs = tc.batch_size
    k = int(round(bs * tc.corrupted_fraction))
    x = ds.train_x[:bs]
    y = ds.train_y[:bs]
    net = build_model(cfg.model, ds.channels, len(ds.classes))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step() -> None:
        loss = F.cross_entropy(net((x.float() / 255 - 0.5) / 0.25), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    load0 = os.getloadavg()
    t_step = timed(step, a.repeat * 4, "step")
    t_corrupt: dict[str, float] = {}
    rep = [0]

    for name in [*cfg.corruptions, *cfg.mixtures]:
        sc = cfg.study_corruption(name)

        def run(sc=sc) -> None:  # type: ignore[no-untyped-def]
            rep[0] += 1  # fresh keys every call: new draws, as in training
            apply_corruption(x[:k], sc, seed=0, keys=[f"train:{rep[0]}:{i}" for i in range(k)])

        t_corrupt[name] = timed(run, a.repeat, f"corrupt:{name}")
    xt = ds.test_x

    @torch.no_grad()
    def test_pass() -> None:
        net.eval()
        for i in range(0, len(xt), tc.eval_batch_size):
            net((xt[i : i + tc.eval_batch_size].float() / 255 - 0.5) / 0.25)

    t_test = timed(test_pass, 2, "test")
    t_test_corrupt = {}
    for name in cfg.tests:
        sc = cfg.study_corruption(name)
        t_test_corrupt[name] = timed(
            lambda sc=sc: apply_corruption(xt, sc, seed=0, keys=list(range(len(xt)))), 1, f"test_corrupt:{name}"
        )
    load1 = os.getloadavg()
    steps = int(np.ceil(len(ds.train_y) / bs))
    wall = extrapolate(t_step, t_corrupt, t_test, sum(t_test_corrupt.values()), tc.epochs, steps, len(cfg.tests))
    cpu = extrapolate(
        CPU["step"],
        {n: CPU[f"corrupt:{n}"] for n in t_corrupt},
        CPU["test"],
        sum(CPU[f"test_corrupt:{n}"] for n in t_test_corrupt),
        tc.epochs,
        steps,
        len(cfg.tests),
    )
    doc = {
        "config": a.config,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, one torch thread",
        "load_average_before_after": [round(load0[0], 1), round(load1[0], 1)],
        "train_images": len(ds.train_y),
        "batch": bs,
        "steps_per_epoch": steps,
        "epochs": tc.epochs,
        "train_step_s": round(t_step, 5),
        "train_step_cpu_s": round(CPU["step"], 5),
        "corrupt_half_batch_s": {n: round(t, 5) for n, t in t_corrupt.items()},
        "test_pass_s": round(t_test, 4),
        "corrupt_test_set_s": {n: round(t, 3) for n, t in t_test_corrupt.items()},
        "extrapolated_wall_s": wall,
        "extrapolated_cpu_s": cpu,
        "note": "medians of repeated timings. Wall seconds are inflated by other jobs on a shared machine; CPU "
        "seconds (process time, one thread) approximate the wall time on an idle core, ignoring cache and memory "
        "contention. The extrapolation ignores checkpoint writes and data loading (in memory here)",
    }
    out = Path(a.out or f"perf/results/overlap_step_cost--{a.config}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
