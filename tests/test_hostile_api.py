"""Arguments of the Python API that used to escape as untyped exceptions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shiftbench
from shiftbench import errors

X = np.random.default_rng(0).integers(0, 256, (40, 40, 3), dtype=np.uint8)


@pytest.mark.parametrize("severity", [np.array([3]), np.array([[3]]), np.array([]), torch.tensor([3, 4])])
def test_severity_arrays_of_one_or_more_elements_are_refused(severity: object) -> None:
    with pytest.raises(errors.InvalidSeverityError):
        shiftbench.corrupt(X, "fog", severity)  # type: ignore[arg-type]


@pytest.mark.parametrize("severity", [np.array(3), np.int64(3), torch.tensor(3)])
def test_zero_dimensional_integer_severities_are_accepted(severity: object) -> None:
    assert np.array_equal(shiftbench.corrupt(X, "fog", severity, seed=1), shiftbench.corrupt(X, "fog", 3, seed=1))  # type: ignore[arg-type]


@pytest.mark.parametrize("device", ["mps", "xla", "hpu", "xpu"])
def test_devices_this_build_lacks_are_refused(device: str) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="device"):
        shiftbench.corrupt(X, "fog", 3, device=device)


def test_sparse_tensors_are_refused() -> None:
    with pytest.raises(errors.ImageTypeError, match="sparse"):
        shiftbench.corrupt(torch.zeros(3, 40, 40).to_sparse(), "fog", 3)
