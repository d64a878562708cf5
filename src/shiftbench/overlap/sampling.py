"""The overlap study's sampling mode for the candidate corruptions.

The papers draw *one value uniformly from the candidate's whole severity range for each image*
(:func:`corrupt_candidate`); the candidates themselves are operations of the corruption engine
(namespace ``"noc"``, :mod:`shiftbench.corruptions.candidates`), which this module only drives:
it samples each image's draws from the full range and replays them through
:func:`shiftbench.corrupt`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..checks import check_seed
from ..corruptions import SampleContext, get_corruption, to_batch
from ..corruptions.candidates import CANDIDATES, CandidateSpec
from ..errors import InvalidArgumentError
from ..rng.seeding import FastDraws, derive_generator, image_key, key_to_int

__all__ = ["corrupt_candidate", "candidate_draws", "FULL_RANGE_LEVEL"]

FULL_RANGE_LEVEL = 0
"""The ``level`` of :func:`~shiftbench.rng.seeding.derive_generator` used for full-range draws."""


def _check_candidate(name: str) -> CandidateSpec:
    spec = get_corruption(name)
    if spec.name not in CANDIDATES:
        raise InvalidArgumentError(
            "corruption", name, f"a candidate corruption of the overlap study: {', '.join(CANDIDATES)}"
        )
    return CANDIDATES[spec.name]


def candidate_draws(
    images: Any, corruption: str, *, seed: int = 0, keys: Sequence[Any] | None = None
) -> list[dict[str, np.ndarray]]:
    """Per-image draws of the papers' mode (a value uniform over the whole range).

    Each image's draws come from the generator of ``(seed, key, corruption, level 0)``
    (level 0 is reserved for this mode; severities 1..5 use their own levels), so an
    image's corruption never depends on its batch.
    """
    cand = _check_candidate(corruption)
    reg = get_corruption(cand.name)
    assert reg.sample is not None
    seed = check_seed(seed)
    b = to_batch(images, "images")
    h, w = b.size
    if keys is not None and len(keys) != b.n:
        raise InvalidArgumentError("keys", f"{len(keys)} keys", f"exactly one key per image ({b.n})")
    out = []
    for i in range(b.n):
        k = key_to_int(keys[i]) if keys is not None else image_key(b.canonical_uint8(i))
        src = FastDraws(derive_generator(seed, k, cand.name, FULL_RANGE_LEVEL))
        ctx = SampleContext(params=cand.continuous_range(), height=h, width=w, edition="224", severity=0)
        out.append(reg.sample(src, ctx))
    return out


def corrupt_candidate(
    images: Any,
    corruption: str,
    *,
    seed: int = 0,
    keys: Sequence[Any] | None = None,
    device: torch.device | str | None = None,
) -> Any:
    """Apply a candidate corruption as the papers do: one value drawn uniformly from its range per image.

    Accepts everything :func:`shiftbench.corrupt` accepts (uint8 or [0, 1] float tensors,
    arrays, PIL images; batched or not) and returns the same type.

    Raises:
        UnknownCorruptionError / InvalidArgumentError: not a candidate corruption, bad seed or keys.
    """
    from ..api import corrupt

    cand = _check_candidate(corruption)
    draws = candidate_draws(images, cand.name, seed=seed, keys=keys)
    edition = "224"
    return corrupt(images, cand.name, 1, seed=seed, keys=keys, draws=draws, device=device, edition=edition)
