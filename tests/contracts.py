"""The contract every registered corruption and each of its backends keeps (torchvision's
``check_kernel`` idea, for this engine's reproducibility rules).

:func:`check_corruption` runs one corruption with one backend on one batch of real photos, at
every severity, and checks:

* the input (uint8 and float) is never modified;
* the output keeps the input's shape, dtype, device and layout;
* the same seed gives the same output; another seed another output at some severity (random
  corruptions), the same output (deterministic ones);
* batched equals unbatched: each image alone (C x H x W) and as a batch of 1 gives its batch result;
* the float path ([0, 1] float32 in and out) agrees with the uint8 path: at least 99.9 % of the
  values (99 % for the candidates, which compute in float32) within one 8-bit level of it;
* every backend gives the tensor path's 8-bit output for uint8 inputs, and its float output within
  1e-5 for float inputs (the order of float sums may differ);
* a functional told that its result will be truncated (``ApplyContext.levels``) returns exactly
  the truncated result;
* every kernel takes the tensor path's parameters (names and kinds, :func:`check_kernel_signature`);
* a batch of 0 images gives a batch of 0 images (torchvision's degenerate case), through the
  kernel itself and through :func:`shiftbench.corrupt`.

It returns the mean absolute distortion per severity, for the monotonicity checks of
``tests/test_contracts.py``. :func:`check_cpu_equals_cuda` is the device check (``gpu`` tests).
"""

from __future__ import annotations

import inspect

import numpy as np
import torch

import shiftbench
from shiftbench.corruptions._registry import ApplyContext, Corruption

SEED = 3


def _uint8(y: torch.Tensor) -> torch.Tensor:
    return y if y.dtype == torch.uint8 else y.clamp(0, 255).to(torch.uint8)


def _stacked(draws: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    if not draws or not draws[0]:
        return {}
    return {k: torch.stack([torch.as_tensor(np.asarray(d[k])) for d in draws]) for k in draws[0]}


def check_levels_output(spec: Corruption, x: torch.Tensor, edition: str, severity: int, backend: str) -> None:
    """``apply`` with ``ApplyContext.levels`` returns exactly the truncated float result."""
    params = spec.severity_params(edition, severity)
    draws = _stacked(
        [shiftbench.sample_draws(x[i], spec.name, severity, seed=SEED, edition=edition) for i in range(len(x))]
    )
    for xin in {x.to(spec.input_dtype(False)), x.to(spec.dtype)}:
        if not spec.backend(backend).supports(xin.device, xin.dtype):
            continue
        ref = spec.apply(xin, params, draws, ApplyContext(edition, severity, backend=backend))
        got = spec.apply(xin, params, draws, ApplyContext(edition, severity, levels=True, backend=backend))
        assert torch.equal(_uint8(got), _uint8(ref)), (spec.name, severity, xin.dtype, backend)


def check_kernel_signature(spec: Corruption, backend: str) -> None:
    """The kernel registered for ``backend`` takes the tensor path's parameters (torchvision's
    ``check_functional_kernel_signature_match``): the dispatcher calls every kernel the same way."""
    want = [(p.name, p.kind) for p in inspect.signature(spec.kernels["tensor"][1]).parameters.values()]
    got = [(p.name, p.kind) for p in inspect.signature(spec.kernels[backend][1]).parameters.values()]
    assert got == want, (spec.name, backend, got, want)


def check_empty_batch(spec: Corruption, x: torch.Tensor, edition: str, backend: str) -> None:
    """A batch of 0 images (with 0 rows of each draw) gives 0 images of the same size, dtype and
    device: through the kernel, for each input dtype it takes, and through ``shiftbench.corrupt``."""
    severity = 3
    params = spec.severity_params(edition, severity)
    one = shiftbench.sample_draws(x[0], spec.name, severity, seed=SEED, edition=edition)
    draws = {k: torch.as_tensor(np.asarray(v))[None][:0] for k, v in one.items()}
    for dtype in {spec.input_dtype(False), spec.dtype}:
        xin = x[:0].to(dtype)
        if not spec.backend(backend).supports(xin.device, xin.dtype):
            continue
        for levels in (False, True):
            y = spec.apply(xin, params, draws, ApplyContext(edition, severity, levels=levels, backend=backend))
            assert tuple(y.shape) == tuple(xin.shape) and y.device == xin.device, (
                spec.name,
                backend,
                dtype,
                levels,
                tuple(y.shape),
            )
    for xin in (x[:0], x[:0].to(torch.float32) / 255.0):
        y = shiftbench.corrupt(xin, spec.name, severity, seed=SEED, edition=edition, backend=backend)
        assert y.shape == xin.shape and y.dtype == xin.dtype and y.device == xin.device, (spec.name, backend, y.shape)


def check_corruption(
    name: str,
    x: torch.Tensor,
    *,
    edition: str,
    backend: str = "tensor",
    severities: tuple[int, ...] = (1, 2, 3, 4, 5),
    float_agreement: float = 0.999,
    same_as: tuple[str, ...] | None = None,
) -> list[float]:
    """Check the contract for corruption ``name`` run by ``backend`` on ``x`` (B x 3 x H x W uint8,
    B >= 2). ``same_as``: the backends whose output this one must equal (default: the tensor path,
    for any other backend). Returns the mean absolute distortion of the uint8 output at each severity."""
    spec = shiftbench.get_corruption(name)
    assert backend in spec.backends, (name, backend, spec.backends)
    assert x.dtype == torch.uint8 and x.ndim == 4 and len(x) >= 2
    if same_as is None:
        same_as = () if backend == "tensor" else ("tensor",)
    check_kernel_signature(spec, backend)
    check_empty_batch(spec, x, edition, backend)
    xf = x.to(torch.float32) / 255.0
    x_before, xf_before = x.clone(), xf.clone()
    dists: list[float] = []
    seed_changed: list[bool] = []

    def run(images: torch.Tensor, severity: int, seed: int = SEED, **kw: object) -> torch.Tensor:
        return shiftbench.corrupt(images, name, severity, seed=seed, edition=edition, backend=backend, **kw)

    for s in severities:
        out = run(x, s)
        assert out.shape == x.shape and out.dtype == torch.uint8 and out.device == x.device, (name, s)
        assert out.layout == x.layout and out.is_contiguous()
        assert torch.equal(x, x_before), f"{name} modified its input"
        assert torch.equal(run(x, s), out), "same seed, other output"
        for i in range(len(x)):
            single = run(x[i], s)
            assert single.shape == x[i].shape and torch.equal(single, out[i]), f"image {i} differs when corrupted alone"
            assert torch.equal(run(x[i : i + 1], s), out[i : i + 1]), f"image {i} differs in a batch of 1"
        other = run(x, s, seed=SEED + 1)
        if spec.random:
            seed_changed.append(not torch.equal(other, out))
        else:
            assert torch.equal(other, out), "a deterministic corruption depends on the seed"
        of = run(xf, s)
        assert of.dtype == torch.float32 and of.shape == xf.shape and of.device == xf.device
        assert float(of.min()) >= 0.0 and float(of.max()) <= 1.0
        assert torch.equal(xf, xf_before), f"{name} modified its float input"
        q = torch.floor(of.to(torch.float64) * 255 + 1e-3).to(torch.int16)
        close = float(((q - out.to(torch.int16)).abs() <= 1).to(torch.float64).mean())
        assert close >= float_agreement, f"float/uint8 paths disagree at severity {s}: {close}"
        for other in same_as:
            want = shiftbench.corrupt(x, name, s, seed=SEED, edition=edition, backend=other)
            assert torch.equal(out, want), f"backend {backend!r} differs from {other!r} at severity {s}"
            ft = shiftbench.corrupt(xf, name, s, seed=SEED, edition=edition, backend=other)
            gap = float((of - ft).abs().max())  # float results: summation order may differ
            assert gap <= 1e-5, f"backend {backend!r} differs from {other!r} on float input at severity {s}: {gap}"
        if s in (1, 5):
            check_levels_output(spec, x, edition, s, backend)
        dists.append(float((out.to(torch.float64) - x.to(torch.float64)).abs().mean()))
    # (a severity whose range holds one integer value, e.g. a candidate's fifth, may draw the same
    # output for two seeds: the seed must change the result at some severity)
    assert not spec.random or any(seed_changed), "another seed gives the same output at every severity"
    return dists


def check_cpu_equals_cuda(name: str, x: torch.Tensor, *, severities: tuple[int, ...] = (1, 2, 3, 4, 5)) -> None:
    """The tensor path on CUDA gives the CPU's 8-bit output bit for bit (the tensor paths avoid
    CUDA's reciprocal division: corruptions._ops.fdiv); float results within 1e-5; release mode too."""
    for s in severities:
        a = shiftbench.corrupt(x, name, s, seed=1)
        b = shiftbench.corrupt(x.cuda(), name, s, seed=1)
        assert b.device.type == "cuda" and torch.equal(a, b.cpu()), (name, s)
        xf = x.to(torch.float32) / 255.0
        af = shiftbench.corrupt(xf, name, s, seed=1)
        bf = shiftbench.corrupt(xf.cuda(), name, s, seed=1).cpu()
        assert float((af - bf).abs().max()) <= 1e-5, (name, s, "float")  # summation order may differ
    rel = shiftbench.corrupt(x.cuda(), name, 3, seed=1, release=True)
    assert rel.device.type == "cuda" and torch.equal(rel.cpu(), shiftbench.corrupt(x, name, 3, seed=1, release=True)), (
        name
    )
