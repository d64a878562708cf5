"""Validation of replayed draws (``corrupt(..., draws=...)``) before any kernel runs.

A replayed draw must be what sampling could have produced for *this* image size, edition and
severity: the same keys, the same shapes, a compatible dtype, finite values, and values inside
the range the sampler draws from (crop offsets inside the texture, shuffle offsets inside
``-d..d-1``, angles inside their interval...). Keys, shapes and dtypes come from sampling a
blank image of the same size once (cached); the ranges are declared by each corruption beside
its sampler (``register(..., bounds=...)``). Draws
that pass are converted to the sampler's dtype where that is lossless, so the compiled kernels
only ever see arrays of the layout they were written for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ._registry import Corruption

__all__ = ["validate_draws", "draw_bounds"]

Bounds = dict[str, tuple[Any, Any]]  # key -> (low, high), inclusive, scalars or per-element arrays


Schema = tuple[tuple[str, tuple[int, ...], str], ...]
"""(key, shape, dtype) of the draws sampling produces for an image of h x w."""


def draw_bounds(spec: Corruption, h: int, w: int, edition: str, params: Any, draws: Mapping[str, np.ndarray]) -> Bounds:
    """The inclusive value ranges of ``spec``'s draws for an h x w image, as the corruption declares
    them (``register(..., bounds=...)``); keys not listed, or not drawn: any finite value."""
    if spec.bounds is None:
        return {}
    return {k: v for k, v in spec.bounds(h, w, edition, params, draws).items() if k in draws}


def _describe(v: Any) -> str:
    a = np.asarray(v) if not isinstance(v, (str, bytes)) else None
    if a is None or a.dtype == object:
        return f"{type(v).__name__} value"
    return f"array of shape {tuple(a.shape)} and dtype {a.dtype}" if a.ndim else f"{a.dtype} scalar {a.item()!r}"


def _convert(arg: str, v: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if isinstance(v, (str, bytes)) or v is None:
        raise InvalidArgumentError(arg, _describe(v), f"a NumPy array of shape {shape} and dtype {dtype}")
    try:
        a = v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)
    except Exception as e:  # noqa: BLE001 - anything that is not array-like
        raise InvalidArgumentError(arg, type(v).__name__, f"a NumPy array of shape {shape} and dtype {dtype}") from e
    if tuple(a.shape) != shape:
        raise InvalidArgumentError(
            arg,
            _describe(a),
            f"shape {shape} (what sampling gives for this image size, edition and severity)",
            "Draws only replay on an image of the size they were sampled for.",
        )
    kind = a.dtype.kind
    if dtype.kind == "b":
        if kind == "b":
            return a
        if kind in "iu" and a.size and (a.min() < 0 or a.max() > 1):
            raise InvalidArgumentError(arg, _describe(a), "booleans (or integers 0 and 1)")
        if kind not in "iu":
            raise InvalidArgumentError(arg, _describe(a), "a boolean array")
        return a.astype(np.bool_)
    if dtype.kind in "iu":
        if kind not in "iub":
            raise InvalidArgumentError(arg, _describe(a), f"an integer array ({dtype})")
        return a
    if kind not in "fiub":
        raise InvalidArgumentError(arg, _describe(a), f"a real-valued array ({dtype})")
    if kind == "f" and a.size and not np.isfinite(a).all():
        raise InvalidArgumentError(arg, _describe(a), "finite values")
    big = float(np.finfo(dtype).max) if dtype.kind == "f" else math.inf
    if a.size and kind in "fiu" and float(np.abs(a).max()) > big:
        raise InvalidArgumentError(arg, _describe(a), f"values that fit {dtype}")
    return a


def _check_range(arg: str, a: np.ndarray, lo: Any, hi: Any) -> None:
    if a.size == 0:
        return
    lo_a, hi_a = np.broadcast_to(lo, a.shape), np.broadcast_to(hi, a.shape)
    bad = (a < lo_a) | (a > hi_a)
    if bool(np.any(bad)):
        where = np.argwhere(bad)[0] if a.ndim else ()
        got = a[tuple(where)] if a.ndim else a[()]
        lo_v = lo_a[tuple(where)] if a.ndim else lo_a[()]
        hi_v = hi_a[tuple(where)] if a.ndim else hi_a[()]
        at = f" at {tuple(int(i) for i in where)}" if a.ndim else ""
        raise InvalidArgumentError(
            arg, f"{got.item()!r}{at}", f"values in [{lo_v}, {hi_v}] (the range sampling draws from for this image)"
        )


def validate_draws(
    spec: Corruption,
    draws: Any,
    n: int,
    h: int,
    w: int,
    edition: str,
    severity: int,
    params: Any,
    schema_of: Callable[[], Schema],
) -> list[dict[str, np.ndarray]]:
    """Check ``draws`` (one mapping per image) against what sampling gives for h x w images; return them as arrays.

    ``schema_of()`` gives the (key, shape, dtype) of sampled draws (:mod:`shiftbench.api` samples
    a blank image; called only for corruptions that draw).

    Raises :class:`~shiftbench.errors.InvalidArgumentError` naming ``draws[i]['key']`` for a
    missing or unknown key, another shape, an incompatible dtype, a non-finite value or a value
    outside the sampler's range.
    """
    if isinstance(draws, (str, bytes, Mapping)) or not isinstance(draws, Sequence):
        raise InvalidArgumentError(
            "draws", type(draws).__name__, f"a list of {n} dicts (one per image, see sample_draws)"
        )
    if len(draws) != n:
        raise InvalidArgumentError("draws", f"{len(draws)} dicts", f"exactly one dict per image ({n})")
    if spec.sample is None:
        for i, d in enumerate(draws):
            if not isinstance(d, Mapping) or len(d):
                raise InvalidArgumentError(f"draws[{i}]", _describe(d), f"an empty dict ({spec.name} draws nothing)")
        return [{} for _ in draws]
    schema = schema_of()
    keys = [k for k, _, _ in schema]
    out: list[dict[str, np.ndarray]] = []
    for i, d in enumerate(draws):
        if not isinstance(d, Mapping):
            raise InvalidArgumentError(f"draws[{i}]", _describe(d), f"a dict with the keys {keys} (see sample_draws)")
        unknown = [k for k in d if k not in keys]
        if unknown:
            raise InvalidArgumentError(f"draws[{i}]", f"key {unknown[0]!r}", f"only the keys {keys} for {spec.name}")
        conv: dict[str, np.ndarray] = {}
        for k, shape, dt in schema:
            arg = f"draws[{i}][{k!r}]"
            if k not in d:
                raise InvalidArgumentError(arg, "missing", f"every key of {keys} for {spec.name} (see sample_draws)")
            conv[k] = _convert(arg, d[k], shape, np.dtype(dt))
        for k, (lo, hi) in draw_bounds(spec, h, w, edition, params, conv).items():
            if k in conv:
                _check_range(f"draws[{i}][{k!r}]", conv[k], lo, hi)
        for k, _, dt in schema:  # lossless now that the ranges hold
            want = np.dtype(dt)
            a = conv[k]
            if a.dtype != want and not (want.kind == "f" and a.dtype in (np.float32, np.float64)):
                a = a.astype(want)
            conv[k] = a
        out.append(conv)
    return out
