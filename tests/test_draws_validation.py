"""Replayed draws (``corrupt(..., draws=...)``) are validated before any compiled kernel runs.

Draws that do not fit the image, the edition or the severity (other shape, missing or extra key,
other dtype, values outside what sampling produces, NaN) are refused with a typed error naming
the draw; the compiled kernels that index by draws check their bounds at their boundary as well,
so that calling a registered ``apply`` directly cannot read or write outside its arrays either.
The contracts are generated from the registry: every random corruption is exercised.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import shiftbench
from shiftbench import errors
from shiftbench.corruptions._registry import ApplyContext, get_corruption

RNG = np.random.default_rng(7)
IMG32 = RNG.integers(0, 256, (32, 32, 3), dtype=np.uint8)
IMG64 = RNG.integers(0, 256, (64, 64, 3), dtype=np.uint8)
RANDOM = [n for n in shiftbench.list_corruptions("all") + shiftbench.list_corruptions(group="candidate") if get_corruption(n).random]


@pytest.mark.parametrize("name", RANDOM)
def test_draws_of_another_size_are_refused(name: str) -> None:
    """Draws whose shape depends on the image size are refused on another size; the others
    (angles, crop offsets...) must then be in range for the new size, and replay deterministically."""
    d = shiftbench.sample_draws(IMG32, name, 3)
    d64 = shiftbench.sample_draws(IMG64, name, 3)
    if any(np.shape(d[k]) != np.shape(d64[k]) for k in d):
        with pytest.raises(errors.InvalidArgumentError) as ei:
            shiftbench.corrupt(IMG64, name, 3, draws=[d])
        assert ei.value.argument.startswith("draws[0]")
        return
    try:
        y = shiftbench.corrupt(IMG64, name, 3, draws=[d])
    except errors.InvalidArgumentError as e:
        assert e.argument.startswith("draws[0]")
    else:
        assert np.array_equal(y, shiftbench.corrupt(IMG64, name, 3, draws=[d]))


@pytest.mark.parametrize("name", RANDOM)
def test_valid_draws_replay_exactly(name: str) -> None:
    d = shiftbench.sample_draws(IMG64, name, 2, seed=5)
    a = shiftbench.corrupt(IMG64, name, 2, draws=[d])
    b = shiftbench.corrupt(IMG64, name, 2, draws=[d])
    c = shiftbench.corrupt(IMG64, name, 2, seed=5)
    assert np.array_equal(a, b) and np.array_equal(a, c)


@pytest.mark.parametrize("name", RANDOM)
def test_missing_and_extra_keys_are_typed(name: str) -> None:
    d = shiftbench.sample_draws(IMG64, name, 3)
    k = sorted(d)[0]
    missing = {kk: v for kk, v in d.items() if kk != k}
    with pytest.raises(errors.InvalidArgumentError, match=k) as ei:
        shiftbench.corrupt(IMG64, name, 3, draws=[missing])
    assert not isinstance(ei.value, KeyError) or isinstance(ei.value, errors.ShiftbenchError)
    with pytest.raises(errors.InvalidArgumentError, match="bogus"):
        shiftbench.corrupt(IMG64, name, 3, draws=[{**d, "bogus": np.zeros(3)}])
    with pytest.raises(errors.InvalidArgumentError, match="draws"):
        shiftbench.corrupt(IMG64, name, 3, draws=["not a dict"])  # type: ignore[list-item]


def _mutations(v: np.ndarray) -> list[object]:
    v = np.asarray(v)
    out: list[object] = [np.zeros(v.shape + (2,), v.dtype), "text", np.array(["a"] * max(1, v.size)).reshape(v.shape)]
    if v.ndim:
        out.append(np.zeros(v.shape[:-1] + (v.shape[-1] + 1,), v.dtype))
    if v.dtype.kind == "f":
        out += [np.full(v.shape, np.nan, v.dtype), np.full(v.shape, np.inf, v.dtype), np.full(v.shape, 1e300)]
    if v.dtype.kind in "iu":
        info = np.iinfo(np.int64)
        out += [np.full(v.shape, info.max), np.full(v.shape, info.min), np.full(v.shape, 10**6)]
    if v.dtype.kind == "b":
        out += [np.full(v.shape, 7, np.int64)]
    return out


@pytest.mark.parametrize("name", RANDOM)
def test_adversarial_draws_give_typed_errors_or_valid_output(name: str) -> None:
    d = shiftbench.sample_draws(IMG64, name, 4)
    for k, v in d.items():
        for bad in _mutations(v):
            try:
                y = shiftbench.corrupt(IMG64, name, 4, draws=[{**d, k: bad}])
            except errors.ShiftbenchError as e:
                assert f"draws[0]['{k}']" in str(e)
            else:  # accepted: then it is in range and deterministic
                assert y.shape == IMG64.shape and np.array_equal(y, shiftbench.corrupt(IMG64, name, 4, draws=[{**d, k: bad}]))


def test_frost_out_of_range_crop_is_refused() -> None:
    d = shiftbench.sample_draws(IMG64, "frost", 3)
    for key, bad in [("top", 10**6), ("top", -1), ("left", 10**9), ("index", 5), ("index", -1)]:
        with pytest.raises(errors.InvalidArgumentError, match=key):
            shiftbench.corrupt(IMG64, "frost", 3, draws=[{**d, key: np.int64(bad)}])


def test_glass_offsets_out_of_range_are_refused() -> None:
    d = shiftbench.sample_draws(IMG64, "glass_blur", 3)
    off = d["offsets"].copy()
    off[0, 0, 0, 0] = 100
    with pytest.raises(errors.InvalidArgumentError, match="offsets"):
        shiftbench.corrupt(IMG64, "glass_blur", 3, draws=[{**d, "offsets": off}])


def test_hand_edited_frost_top_does_not_crash_the_process() -> None:
    """Found in the field: one edited ``top`` crashed the interpreter on a 224 image."""
    code = textwrap.dedent(
        """
        import numpy as np, shiftbench
        from shiftbench import errors
        img = np.zeros((224, 224, 3), np.uint8)
        d = shiftbench.sample_draws(img, "frost", 3)
        d["top"] = np.int64(10**7)
        try:
            shiftbench.corrupt(img, "frost", 3, draws=[d])
        except errors.InvalidArgumentError as e:
            print("typed", e.argument)
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "typed draws[0]['top']" in r.stdout


def _ctx(levels: bool = False) -> ApplyContext:
    return ApplyContext(edition="64", severity=3, levels=levels, backend="compiled")


@pytest.mark.parametrize("name", ["gaussian_noise", "speckle_noise", "impulse_noise", "fog", "frost", "elastic_transform"])
def test_compiled_kernels_check_draws_at_their_boundary(name: str) -> None:
    """Calling a registered apply with draws of a smaller image raises instead of reading past them."""
    spec = get_corruption(name)
    d = shiftbench.sample_draws(IMG32, name, 3)
    stacked = {k: torch.from_numpy(np.asarray(v)[None].copy()) for k, v in d.items()}
    if name == "frost":
        stacked["top"] = torch.tensor([10**6])
    x = torch.from_numpy(IMG64).permute(2, 0, 1)[None].to(spec.input_dtype(False)).contiguous()
    with pytest.raises((errors.ShiftbenchError, ValueError)):
        spec.apply(x, spec.severity_params("64", 3), stacked, _ctx())
