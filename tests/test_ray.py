"""Running on Ray: generate --ray writes the single-machine files, survives a lost node and a killed driver;
the evaluation executor predicts what the runner stores.

The cluster tests start a real multi-node Ray cluster on this machine (a head and a worker node, each a
separate ``ray start --block`` process on 127.0.0.1 with one CPU) and are marked ``ray`` and ``slow``:
run them with ``pytest -m ray tests/test_ray.py``. The tests without a cluster run in the default suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shiftbench.cli import main
from shiftbench.errors import ClusterConnectionError, MissingDependencyError

from .conftest import REPO, sample_paths

PY = sys.executable
CORRUPTIONS = "contrast,saturate,spatter"
SEVERITIES = "1,4"


def _have_ray() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


needs_ray = pytest.mark.skipif(not _have_ray(), reason="Ray is not installed (pip install 'shiftbench[ray]')")


def cluster_test(f: Any) -> Any:
    """Marks a test that needs the cluster fixture: ray and slow, skipped without Ray."""
    return pytest.mark.ray(pytest.mark.slow(needs_ray(f)))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO)])
    env.pop("RAY_ADDRESS", None)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["RAY_AUTH_MODE"] = "disabled"  # as LocalCluster's nodes: a token in ~/.ray must not turn auth on
    return env


# ----------------------------------------------------------------------------- without a cluster


def test_missing_ray_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as without the package
    from shiftbench.distributed import RayExecutor, require_ray

    with pytest.raises(MissingDependencyError) as e:
        require_ray()
    assert e.value.package == "ray" and "pip install 'shiftbench[ray]'" in str(e.value)
    with pytest.raises(MissingDependencyError):
        RayExecutor("127.0.0.1:1")
    src = tmp_path / "src" / "n01440764"
    src.mkdir(parents=True)
    shutil.copy(sample_paths()[0], src / "a.JPEG")
    rc = main(["generate", "imagenet-c", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "out"),
               "--corruptions", "contrast", "--severities", "1", "--ray"])
    err = capsys.readouterr().err
    assert rc == 1 and "pip install 'shiftbench[ray]'" in err and len(err.strip().splitlines()) == 1
    assert not list((tmp_path / "out").rglob("*.JPEG"))
    # without --ray nothing needs Ray
    assert main(["generate", "imagenet-c", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "out"),
                 "--corruptions", "contrast", "--severities", "1", "--workers", "1"]) == 0


@needs_ray
@pytest.mark.parametrize("address", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}", "no-port-here"])
def test_unreachable_address_is_a_typed_error(tmp_path: Path, address: str, capsys: pytest.CaptureFixture[str]) -> None:
    from shiftbench.distributed import RayExecutor
    from shiftbench.distributed.local import free_port

    addr = address.format(port=free_port())
    t0 = time.monotonic()
    with pytest.raises(ClusterConnectionError) as e:
        RayExecutor(addr)
    assert e.value.argument == "--ray" and e.value.value == addr and "HOST:PORT" in e.value.allowed
    assert isinstance(e.value, ConnectionError) and time.monotonic() - t0 < 30
    src = tmp_path / "src" / "n01440764"
    src.mkdir(parents=True)
    shutil.copy(sample_paths()[0], src / "a.JPEG")
    rc = main(["generate", "imagenet-c", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "out"),
               "--corruptions", "contrast", "--severities", "1", "--ray", addr])
    err = capsys.readouterr().err
    assert rc == 2 and "--ray" in err and addr in err


# ----------------------------------------------------------------------------- a cluster on this machine


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    if not _have_ray():
        pytest.skip("Ray is not installed (pip install 'shiftbench[ray]')")
    from shiftbench.distributed.local import LocalCluster

    with pytest.MonkeyPatch.context() as mp, LocalCluster(nodes=2, cpus=1, env=_env()) as c:
        mp.setenv("RAY_AUTH_MODE", "disabled")  # drivers in this process too: a token in ~/.ray must not turn auth on
        yield c


@pytest.fixture(scope="module")
def photos_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 100 shared sample photos as an ImageFolder (links, by their wnid), plus one unreadable file."""
    src = tmp_path_factory.mktemp("ray") / "src"
    for p in sample_paths():
        d = src / p.name.split("_")[0]
        d.mkdir(parents=True, exist_ok=True)
        (d / p.name).symlink_to(p)
    (src / "n01440764" / "zz_broken.JPEG").write_bytes(b"not a jpeg")
    return src


def _cmd(src: Path, out: Path, *extra: str) -> list[str]:
    return [PY, "-m", "shiftbench.cli", "generate", "imagenet-c", "--src", str(src), "--out", str(out),
            "--corruptions", CORRUPTIONS, "--severities", SEVERITIES, "--batch-size", "8", *extra]


@pytest.fixture(scope="module")
def single_machine(photos_src: Path) -> Path:
    out = photos_src.parent / "single"
    r = subprocess.run(_cmd(photos_src, out, "--workers", "1"), env=_env(), capture_output=True, text=True)
    assert r.returncode == 1 and "zz_broken.JPEG" in r.stderr, r.stderr  # one unreadable source file
    return out


def _same_output(a: Path, b: Path) -> None:
    assert (a / "checksums.sha256").read_bytes() == (b / "checksums.sha256").read_bytes()
    lines = (a / "checksums.sha256").read_text().splitlines()
    assert len(lines) == 100 * 3 * 2
    for line in lines[:: 37]:  # the listed files are the files on disk
        h, rel = line.split("  ")
        assert hashlib.sha256((b / rel).read_bytes()).hexdigest() == h
    ma, mb = json.loads((a / "manifest.json").read_text()), json.loads((b / "manifest.json").read_text())
    ma["config"].pop("src"), mb["config"].pop("src")
    assert ma == mb and [f["file"] for f in mb["failed"]] == ["n01440764/zz_broken.JPEG"]
    assert sorted(p.relative_to(b).as_posix() for p in b.rglob("*.JPEG")) == sorted(line.split("  ")[1] for line in lines)
    assert not list((b / ".shiftbench" / "tmp").iterdir())  # no temporary file or run folder left


@cluster_test
def test_generate_on_cluster_equals_single_machine(cluster: Any, photos_src: Path, single_machine: Path) -> None:
    out = photos_src.parent / "cluster"
    r = subprocess.run(_cmd(photos_src, out, "--ray", cluster.address), env=_env(), capture_output=True, text=True)
    assert r.returncode == 1, r.stderr  # the unreadable file, as on one machine
    assert "2 node(s)" in r.stderr and "skipped n01440764/zz_broken.JPEG" in r.stderr
    _same_output(single_machine, out)
    # a rerun has nothing left to do
    r = subprocess.run(_cmd(photos_src, out, "--ray", cluster.address), env=_env(), capture_output=True, text=True)
    assert "0 files written, 600 corrupted images already done" in r.stdout, r.stdout + r.stderr
    _same_output(single_machine, out)


def _journal_rows(out: Path) -> int:
    import sqlite3

    db = out / ".shiftbench" / "journal.sqlite"
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT count(*) FROM files").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def _start_until(src: Path, out: Path, address: str, rows: int, timeout: float = 300) -> subprocess.Popen[str]:
    """generate --ray started in the background, returned once ``rows`` files are journaled."""
    p = subprocess.Popen(_cmd(src, out, "--ray", address), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    t0 = time.monotonic()
    while _journal_rows(out) < rows:
        assert p.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() - t0 < timeout
        time.sleep(0.2)
    return p


@cluster_test
def test_driver_killed_then_rerun_completes(cluster: Any, photos_src: Path, single_machine: Path) -> None:
    out = photos_src.parent / "driver-killed"
    p = _start_until(photos_src, out, cluster.address, 60)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    assert 0 < _journal_rows(out) < 600
    r = subprocess.run(_cmd(photos_src, out, "--ray", cluster.address), env=_env(), capture_output=True, text=True)
    assert r.returncode == 1 and "corrupted images already done" in r.stdout, r.stderr
    assert " 0 corrupted images already done" not in r.stdout
    _same_output(single_machine, out)


@cluster_test
def test_worker_node_killed_mid_run_same_checksums(cluster: Any, photos_src: Path, single_machine: Path) -> None:
    """kill -9 of the worker node's raylet during the run: its shards run again elsewhere, same files."""
    out = photos_src.parent / "node-killed"
    p = _start_until(photos_src, out, cluster.address, 60)
    try:
        os.kill(cluster.raylet_of(1), signal.SIGKILL)
        stdout, stderr = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1, stderr  # the unreadable file only
    assert "600 files written, 0 corrupted images already done" in stdout, stdout  # each file journaled once
    assert "1 node(s) lost" in stderr, stderr  # the summary says what happened (Ray may rerun its tasks itself)
    _same_output(single_machine, out)
    cluster.nodes[1].wait(timeout=60)  # the node's `ray start --block` ends with its raylet
    cluster.add_node()  # for the tests after this one


@cluster_test
def test_cifar_arrays_on_cluster_equal_single_machine(cluster: Any, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    np.save(tmp_path / "x.npy", rng.integers(0, 256, (24, 32, 32, 3), dtype=np.uint8))
    np.save(tmp_path / "y.npy", rng.integers(0, 10, 24))
    outs = {}
    for mode, extra in (("single", ["--workers", "1"]), ("cluster", ["--ray", cluster.address])):
        outs[mode] = tmp_path / mode
        r = subprocess.run([PY, "-m", "shiftbench.cli", "generate", "imagenet-c", "--src", str(tmp_path / "x.npy"),
                            "--labels", str(tmp_path / "y.npy"), "--out", str(outs[mode]), "--edition", "32",
                            "--corruptions", "contrast,gaussian_noise", "--severities", "1,5", *extra],
                           env=_env(), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    assert (outs["single"] / "checksums.sha256").read_bytes() == (outs["cluster"] / "checksums.sha256").read_bytes()
    assert len((outs["cluster"] / "checksums.sha256").read_text().splitlines()) == 3


def _store_rows(store: Path) -> dict[tuple[str, int, str], tuple[int, list[int]]]:
    """(condition, severity, image) -> (label, top-5) of every stored prediction."""
    import sqlite3

    con = sqlite3.connect(store)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        assert "records" in tables and "runs" in tables, tables
        rows = con.execute(
            "SELECT r.condition, r.level, p.item, p.label, p.top1, p.top2, p.top3, p.top4, p.top5 "
            "FROM records p JOIN runs r ON p.run_id = r.id WHERE p.skipped IS NULL"
        ).fetchall()
    finally:
        con.close()
    return {(c, int(s), k): (int(lab), [t for t in top if t is not None]) for c, s, k, lab, *top in rows}


@cluster_test
def test_executor_predicts_what_the_runner_stores(cluster: Any, tmp_path: Path) -> None:
    """RayExecutor.predict over the runner's work items gives the predictions evaluate() stores."""
    import ray

    from shiftbench.distributed import ModelSpec, RayExecutor, work_items
    from shiftbench.evaluation.data import ImageFolderSource
    from shiftbench.evaluation.models import resolve_label_space

    from ._eval_toys import evaluate_c as evaluate
    from ._eval_toys import image_folder, toy_classifier

    data = image_folder(tmp_path / "data", n_per_class=3, n_classes=2)
    store = tmp_path / "store.sqlite"
    evaluate(toy_classifier(), data=data, corruptions="contrast,gaussian_noise", severities="1,3", batch_size=2,
             store=store, baseline="none", seed=5)
    want = _store_rows(store)
    source = ImageFolderSource(data, edition="224")
    clf = toy_classifier()
    marker = tmp_path / "died-once"
    space = resolve_label_space(clf.classes, source.classes, "auto")
    lmap = np.array([space.classes.index(c) for c in source.classes])
    conds = [("clean", 0)] + [(c, s) for c in ("contrast", "gaussian_noise") for s in (1, 3)]
    keys = [it.key for it in source.items(("clean", 0))]
    items = work_items(source, {c: set(keys) for c in conds}, 4)
    assert [(i.condition, len(i.keys)) for i in items[:2]] == [(("clean", 0), 4), (("clean", 0), 2)]
    try:
        with RayExecutor(cluster.address) as ex:
            got = {}
            order = []
            spec = ModelSpec(dies_once, {"marker": str(marker)})  # its first forward pass kills its worker
            for b in ex.predict(spec, source, items, space=space, batch_size=2, seed=5, release=False):
                order.append(b.item)
                for k, lab, top in zip(b.keys, b.labels, b.top5, strict=True):
                    got[(b.condition[0], b.condition[1], k)] = (int(lmap[lab]), top)
    finally:
        ray.shutdown()
    assert marker.exists()  # a worker died, and was replaced
    assert order == sorted(order)  # the items' order, whatever worker finished first
    assert len(got) == len(conds) * len(keys) == len(want)
    assert got == want


def dies_once(marker: str) -> Any:
    """The toy classifier, whose first forward pass anywhere on the cluster ends its worker process."""
    from ._eval_toys import toy_classifier

    clf = toy_classifier()
    forward = clf.forward

    def first_call_dies(x: Any) -> Any:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return forward(x)
        os.close(fd)
        os._exit(1)

    clf.forward = first_call_dies
    return clf


def die_on_three(marker: str, item: int) -> int:
    """item * 10; the first call for item 3 ends its worker process."""
    if item == 3:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return item * 10
        os._exit(1)
    return item * 10


@cluster_test
def test_map_reruns_an_item_whose_worker_died(cluster: Any, tmp_path: Path) -> None:
    import functools

    import ray

    from shiftbench.distributed import RayExecutor

    marker = tmp_path / "died"
    try:
        with RayExecutor(cluster.address) as ex:
            got = list(ex.map_ordered(functools.partial(die_on_three, str(marker)), range(12)))
            unordered = sorted(ex.map_unordered(abs, [-3, 1, -2]))
    finally:
        ray.shutdown()
    assert marker.exists() and got == [i * 10 for i in range(12)] and unordered == [1, 2, 3]


@cluster_test
def test_generate_imagenet_p_on_cluster_equals_single_machine(cluster: Any, tmp_path: Path) -> None:
    """generate imagenet-p --ray: the same videos, checksums and manifest as on one machine."""
    src = tmp_path / "src"
    for p in sample_paths()[:4]:
        d = src / p.name.split("_")[0]
        d.mkdir(parents=True, exist_ok=True)
        (d / p.name).symlink_to(p)
    outs = {}
    for mode, extra in (("single", ["--workers", "1"]), ("cluster", ["--ray", cluster.address])):
        outs[mode] = tmp_path / mode
        r = subprocess.run([PY, "-m", "shiftbench.cli", "generate", "imagenet-p", "--src", str(src), "--out", str(outs[mode]),
                            "--edition", "64x64", "--perturbations", "shot_noise,scale", "--difficulties", "1,2",
                            "--preset", "ultrafast", "--batch-size", "1", *extra], env=_env(), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "12 files written" in r.stdout  # 4 photos x (shot_noise, shot_noise_2, scale)
    assert (outs["single"] / "checksums.sha256").read_bytes() == (outs["cluster"] / "checksums.sha256").read_bytes()
    ma, mb = (json.loads((outs[m] / "manifest.json").read_text()) for m in ("single", "cluster"))
    assert ma == mb and ma["dataset"] == "ImageNet 64x64-P"
