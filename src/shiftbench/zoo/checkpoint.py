"""Read a published checkpoint's state_dict, refusing any pickle that needs code to load."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import torch

from ..errors import InvalidArgumentError
from .errors import UnsafeCheckpointError

__all__ = ["read_state_dict"]


def read_state_dict(
    path: str | Path,
    *,
    key: str | None = None,
    strip_prefix: str | None = None,
    remap: Sequence[tuple[str, str]] = (),
) -> dict[str, torch.Tensor]:
    """Load the tensors of a checkpoint with ``torch.load(weights_only=True)``.

    Args:
        path: the checkpoint file.
        key: the entry holding the state_dict in a training checkpoint
            (e.g. ``"state_dict"``, ``"model_state_dict"``); None for a bare state_dict.
        strip_prefix: removed from every key that starts with it (``"module."``
            of ``nn.DataParallel`` checkpoints).
        remap: ``(regex, replacement)`` pairs applied to each key, in order
            (old key spellings of an architecture).

    Raises:
        UnsafeCheckpointError: the pickle references code (a class or function
            outside torch's allow-list); nothing was executed.
        InvalidArgumentError: the file holds no state_dict at ``key``.
    """
    p = Path(path)
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises UnpicklingError, RuntimeError, ... for refused or broken files
        first = str(e).strip().splitlines()[0][:240] if str(e).strip() else type(e).__name__
        raise UnsafeCheckpointError(
            "weights",
            str(p),
            "a checkpoint that torch.load(weights_only=True) accepts (tensors and plain containers only)",
            f"It was refused and nothing in it was run: {first}",
        ) from e
    if key is not None:
        if not isinstance(obj, dict) or key not in obj:
            found = sorted(obj)[:10] if isinstance(obj, dict) else type(obj).__name__
            raise InvalidArgumentError(
                "weights", str(p), f"a training checkpoint with the entry {key!r}", f"Found: {found}."
            )
        obj = obj[key]
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise InvalidArgumentError("weights", str(p), "a state_dict: a mapping of parameter names to tensors")
    state: dict[str, torch.Tensor] = {}
    patterns = [(re.compile(a), b) for a, b in remap]
    for name, tensor in obj.items():
        if (tensor.is_floating_point() or tensor.is_complex()) and not bool(torch.isfinite(tensor).all()):
            raise InvalidArgumentError("weights", str(p), "weights with finite values",
                                       f"{name} holds NaN or infinite values (a damaged or diverged file).")  # fmt: skip
        if strip_prefix and name.startswith(strip_prefix):
            name = name[len(strip_prefix) :]
        for rx, repl in patterns:
            name = rx.sub(repl, name)
        state[name] = tensor
    return state
