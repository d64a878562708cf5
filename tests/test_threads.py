"""A CPU batch split across threads: the same pixels whatever the split, every corruption of every
namespace and each of its backends; the threads really run at once; torch's own thread count is
kept; errors and bad arguments."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import shiftbench
from shiftbench import cpus
from shiftbench.corruptions import _parallel
from shiftbench.corruptions._parallel import resolve_threads, run_in_threads, split
from shiftbench.errors import InvalidArgumentError

from .conftest import photos

# style_transfer needs a style folder and networks: its split is tested in test_style_corruption.py
ALL = [n for n in shiftbench.list_corruptions(namespace="all") if shiftbench.get_corruption(n).namespace != "style"]
CASES = [(n, b) for n in ALL for b in shiftbench.get_corruption(n).backends]


def _batch(edition: str, n: int) -> torch.Tensor:
    x = torch.from_numpy(photos(edition, 6)).permute(0, 3, 1, 2).contiguous()
    return torch.cat([x, x.flip(-1)])[:n].contiguous()  # distinct images (distinct keys)


@pytest.mark.parametrize(("name", "backend"), CASES, ids=[f"{n}-{b}" for n, b in CASES])
def test_same_pixels_whatever_the_split(name: str, backend: str) -> None:
    """11 images at 64 px: threads=2 splits them into ranges of 3, threads=3 into ranges of 2;
    both equal one thread bit for bit (uint8 and float input), as does each image alone."""
    spec = shiftbench.get_corruption(name)
    x = _batch("64", 11)
    xf = x.to(torch.float32) / 255.0
    sev = 2 + ALL.index(name) % 4  # the severities 2..5 across the corruptions
    for inp in (x, xf):
        if not spec.backend(backend).supports("cpu", spec.input_dtype(inp.dtype != torch.uint8)):
            continue
        one = shiftbench.corrupt(inp, name, sev, seed=5, backend=backend, threads=1)
        for t in (2, 3):
            got = shiftbench.corrupt(inp, name, sev, seed=5, backend=backend, threads=t)
            assert got.dtype == one.dtype and torch.equal(got, one), (name, backend, inp.dtype, t)
        alone = shiftbench.corrupt(inp[4], name, sev, seed=5, backend=backend, threads=1)
        assert torch.equal(alone, one[4])


@pytest.mark.parametrize("name", shiftbench.list_corruptions(group="benchmark"))
def test_same_pixels_at_224_odd_batch(name: str) -> None:
    """At 224 the one-thread chunks (6 images) and the split ranges (7, 5...) differ: 13 images,
    threads 1, 2 and 3, the backend ``auto`` picks."""
    x = _batch("224", 13)
    one = shiftbench.corrupt(x, name, 3, seed=1, threads=1)
    for t in (2, 3):
        assert torch.equal(shiftbench.corrupt(x, name, 3, seed=1, threads=t), one), (name, t)


def test_keys_release_draws_and_transform_split_alike() -> None:
    x = _batch("64", 7)
    keys = [f"img{i}" for i in range(7)]
    for kw in ({"keys": keys}, {"release": True}, {"quantize": True}):
        inp = x.to(torch.float64) / 255.0 if "quantize" in kw else x
        a = shiftbench.corrupt(inp, "glass_blur", 2, seed=3, threads=1, **kw)
        b = shiftbench.corrupt(inp, "glass_blur", 2, seed=3, threads=2, **kw)
        assert torch.equal(a, b), kw
    draws = [shiftbench.sample_draws(x[i], "snow", 4, seed=9) for i in range(7)]
    a = shiftbench.corrupt(x, "snow", 4, draws=draws, threads=1)
    assert torch.equal(shiftbench.corrupt(x, "snow", 4, draws=draws, threads=2), a)
    assert torch.equal(a, shiftbench.corrupt(x, "snow", 4, seed=9, threads=3))
    t = shiftbench.Corrupt("zoom_blur", 2, threads=2)
    assert t.threads == 2 and torch.equal(t(x), shiftbench.corrupt(x, "zoom_blur", 2, threads=1))
    arr = x.permute(0, 2, 3, 1).numpy()  # NumPy batches split too
    np.testing.assert_array_equal(
        shiftbench.corrupt(arr, "motion_blur", 5, threads=2), shiftbench.corrupt(arr, "motion_blur", 5, threads=1)
    )


def test_threads_run_at_once_and_torch_threads_are_kept() -> None:
    """Two ranges meet at a barrier: only two threads working at once get past it. Inside the
    split torch runs single-threaded; afterwards the caller's setting is back."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        barrier = threading.Barrier(2, timeout=20)
        seen: dict[tuple[int, int], tuple[int, int]] = {}

        def fn(a: int, e: int) -> None:
            seen[(a, e)] = (threading.get_ident(), torch.get_num_threads())
            barrier.wait()

        run_in_threads(fn, [(0, 2), (2, 3)], 2)
        assert len({ident for ident, _ in seen.values()}) == 2
        assert {n for _, n in seen.values()} == {1}
        assert torch.get_num_threads() == 2
        # one range (or one thread): torch is single-threaded there too
        got: list[int] = []
        run_in_threads(lambda a, e: got.append(torch.get_num_threads()), [(0, 4)], 2)
        run_in_threads(lambda a, e: got.append(torch.get_num_threads()), [(0, 2), (2, 4)], 1)
        assert got == [1, 1, 1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_pixels_do_not_depend_on_torch_thread_count() -> None:
    """torch's bilinear resampling gives other last bits at 1 and 2 intra-op threads; the engine runs
    torch single-threaded inside every call, so a batch (split) and each image alone (one range)
    agree whatever ``torch.set_num_threads`` says."""
    x = _batch("224", 3)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        want = shiftbench.corrupt(x, "noc_thumbnail_resize", 4, seed=2)
        torch.set_num_threads(2)
        assert torch.equal(shiftbench.corrupt(x, "noc_thumbnail_resize", 4, seed=2), want)
        for i in range(3):
            assert torch.equal(shiftbench.corrupt(x[i], "noc_thumbnail_resize", 4, seed=2), want[i])
    finally:
        torch.set_num_threads(before)


def test_first_error_is_raised_and_the_rest_skipped() -> None:
    done: list[int] = []

    def fn(a: int, e: int) -> None:
        if a == 1:
            raise ValueError("range 1 fails")
        done.append(a)

    with pytest.raises(ValueError, match="range 1 fails"):
        run_in_threads(fn, split(40, 1), 2)
    assert 1 not in done and len(done) < 39
    before = torch.get_num_threads()
    with pytest.raises(ValueError):
        run_in_threads(fn, split(3, 1), 3)
    assert torch.get_num_threads() == before


def test_split_covers_in_order() -> None:
    assert split(13, 5) == [(0, 5), (5, 10), (10, 13)]
    assert split(1, 8) == [(0, 1)] and split(0, 3) == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_bad_threads_name_argument_and_allowed(bad: object) -> None:
    x = _batch("64", 2)
    for call in (lambda: shiftbench.corrupt(x, "fog", 1, threads=bad), lambda: shiftbench.Corrupt("fog", threads=bad)):
        with pytest.raises(InvalidArgumentError) as err:
            call()
        assert "threads" in str(err.value) and "int >= 1" in str(err.value)


def test_default_follows_torch_and_explicit_is_kept() -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert resolve_threads(None) == 1
        assert resolve_threads(5) == 5
    finally:
        torch.set_num_threads(before)


def test_every_compiled_kernel_releases_the_gil() -> None:
    """Threads only overlap in the compiled kernels if they release the GIL: every Numba function of
    the engine's modules is compiled with ``nogil=True``."""
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    import shiftbench.corruptions
    import shiftbench.corruptions._cpu
    import shiftbench.rng

    mods = [f"shiftbench.rng.{m.name}" for m in pkgutil.iter_modules(shiftbench.rng.__path__)]
    mods += [f"shiftbench.corruptions.{m.name}" for m in pkgutil.iter_modules(shiftbench.corruptions.__path__)]
    mods += [f"shiftbench.corruptions._cpu.{m.name}" for m in pkgutil.iter_modules(shiftbench.corruptions._cpu.__path__)]
    kernels = {}
    for m in mods:
        mod = importlib.import_module(m)
        for k, v in vars(mod).items():
            if isinstance(v, CPUDispatcher) and v.__module__ == m:
                kernels[f"{m}.{k}"] = v
    assert len(kernels) > 40
    assert [k for k, v in kernels.items() if not v.targetoptions.get("nogil")] == []


def test_concurrent_callers_share_the_pool() -> None:
    """Callers on several threads at once (one growing the pool) each get their own batch back."""
    x = _batch("64", 9)
    want = {t: shiftbench.corrupt(x, "impulse_noise", 3, seed=t, threads=1) for t in (2, 3, 4)}
    got: dict[int, torch.Tensor] = {}
    callers = [threading.Thread(target=lambda t=t: got.__setitem__(t, shiftbench.corrupt(x, "impulse_noise", 3, seed=t, threads=t))) for t in (2, 3, 4)]
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    assert all(torch.equal(got[t], want[t]) for t in want)


def _tasks(root: Path, states: str) -> Path:
    """A ``/proc/self/task`` stand-in: one thread per state letter (names may hold ') ' as real ones may)."""
    for i, state in enumerate(states):
        (root / str(i)).mkdir(parents=True)
        (root / str(i) / "stat").write_text(f"{100 + i} (py) x) {state} 1 2 3\n")
    return root


def test_other_tasks_are_the_runnable_count_less_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "loadavg"
    alone = _tasks(tmp_path / "alone", "RSS")  # the caller runs, two of its threads sleep
    for line, others in [("0.00 0.01 0.05 1/120 999", 0), ("1.00 0.50 0.20 2/120 999", 1), ("9.1 9.0 8.7 17/300 999", 16)]:
        f.write_text(line + "\n")
        assert cpus.other_tasks(str(f), str(alone)) == others  # the caller itself is one of the runnable tasks
    # this process's own spinning threads (torch's OpenMP workers after a parallel region) are not others' work
    f.write_text("0.5 0.5 0.5 3/120 999\n")
    assert cpus.other_tasks(str(f), str(_tasks(tmp_path / "spinning", "RRRS"))) == 0
    assert cpus.other_tasks(str(f), str(alone)) == 2
    assert cpus.other_tasks(str(f), str(tmp_path / "no-task-list")) == 2  # unreadable: the caller alone
    assert cpus.own_runnable(str(alone)) == 1 and cpus.own_runnable(str(tmp_path / "none")) == 1
    # no runnable count: the one-minute load average stands in
    monkeypatch.setattr(cpus.os, "getloadavg", lambda: (2.6, 1.0, 0.5))
    assert cpus.other_tasks(str(tmp_path / "missing")) == 2.6
    f.write_text("garbage\n")
    assert cpus.other_tasks(str(f)) == 2.6


def test_own_runnable_reads_this_process() -> None:
    if not Path("/proc/self/task").is_dir():
        pytest.skip("no /proc")
    torch.set_num_threads(torch.get_num_threads())
    assert 1 <= cpus.own_runnable() <= len(list(Path("/proc/self/task").iterdir()))


def test_free_cpus_leaves_out_other_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cpus.free_cpus(0, cpus=4, machine=4) == 4  # idle: every CPU
    assert cpus.free_cpus(1, cpus=4, machine=4) == 3
    assert cpus.free_cpus(3.4, cpus=8, machine=8) == 5  # a load average rounds
    assert cpus.free_cpus(16, cpus=2, machine=2) == 1  # a busy shared machine: one, never 0
    assert cpus.free_cpus(1.6, cpus=2, machine=2) == 1
    # other tasks may run on CPUs outside the process's affinity mask: taken from the machine's
    assert cpus.free_cpus(2, cpus=2, machine=4) == 2
    assert cpus.free_cpus(3, cpus=2, machine=4) == 1
    monkeypatch.setattr(cpus, "other_tasks", lambda: None)  # nothing known: every CPU of the process
    assert cpus.free_cpus(cpus=3, machine=8) == 3
    monkeypatch.setattr(cpus, "other_tasks", lambda: 1.0)
    monkeypatch.setattr(cpus, "available_cpus", lambda: 2)
    monkeypatch.setattr(cpus.os, "cpu_count", lambda: 2)
    assert cpus.free_cpus() == 1


def test_default_threads_are_the_cpus_the_process_may_run_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # the batch's threads share one queue of ranges, so busy CPUs are not left out (free_cpus is the model's rule)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        monkeypatch.setattr(_parallel, "available_cpus", lambda: 2)  # e.g. taskset or a container
        monkeypatch.setattr(cpus, "other_tasks", lambda: 5.0)  # a busy machine changes nothing
        assert resolve_threads(None) == 2
        assert resolve_threads(3) == 3  # as asked
        monkeypatch.setattr(_parallel, "available_cpus", lambda: 8)
        assert resolve_threads(None) == 4  # never more than torch's setting
        torch.set_num_threads(1)
        assert resolve_threads(None) == 1
    finally:
        torch.set_num_threads(before)
