"""The corruptions a study can train and test with, and how one is applied to a batch.

A study names its corruptions with short strings (see ``docs/overlap.md``):

* ``"fog"``: an ImageNet-C corruption (or any corruption registered with five severities) at a
  severity drawn uniformly from 1..5 **for every image**. This is the papers' protocol for
  ImageNet-C (Laugros et al., 2020, Section 5.1: "The corruption severity is randomly selected for each image
  corrupted in the process"; Laugros et al. (2020) Section 5.2 for m_IC).
* ``"fog@3"``: the same corruption at a fixed severity.
* ``"noc_rain"``: a candidate corruption of Laugros et al. (2020, 2021), one value per image drawn from its whole
  range (the papers' mode); ``"noc_rain@2"`` draws from the second fifth of the range.
* a name given to :func:`register_corruption`: a user corruption with a parameter range; one
  value per image is drawn uniformly from that range.

A *mixture* (:func:`mixture`) trains one model with a corruption drawn per image from a set, as
Laugros et al.'s (2020) m_IC (all of ImageNet-C) and m_INOC (all of ImageNet-NOC). Mixtures are models only: they
have no test column.

Every draw is seeded per image: the severity of ``"fog"`` comes from the generator of
``(seed, key, "fog:severity")``, the member of a mixture from that of ``(seed, key,
"mixture:<name>")``, then the member corrupts the image with the same key. So an image's
corruption never depends on the batch it is in, and a resumed run draws the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..errors import InvalidArgumentError, UnknownCorruptionError
from ..registry import Registry
from ..rng.seeding import derive_generator, key_to_int

__all__ = [
    "StudyCorruption",
    "UserCorruption",
    "register_corruption",
    "unregister_corruption",
    "user_corruptions",
    "get_user_corruption",
    "resolve",
    "mixture",
    "mixture_members",
    "BENCHMARK_SETS",
    "imagenet_c_names",
    "apply_corruption",
    "apply_at_value",
    "draw_indices",
]

UserFn = Callable[[torch.Tensor, torch.Tensor, Sequence[np.random.Generator]], torch.Tensor]


@dataclass(frozen=True)
class UserCorruption:
    """A corruption given by a function of the images and one parameter value per image.

    ``fn(images, values, generators)``: ``images`` are float32 ``N x C x H x W`` in [0, 1],
    ``values`` a float64 tensor of N parameter values, ``generators`` one seeded NumPy generator
    per image for any further randomness; it returns the corrupted images in [0, 1].
    The study draws each value uniformly from ``value_range`` (mild -> harsh; ``integer``:
    each whole number of the range with the same chance); calibration passes fixed values.
    """

    name: str
    fn: UserFn
    value_range: tuple[float, float]
    integer: bool = False
    description: str = ""


_USER: Registry[UserCorruption] = Registry("corruption", normalise=str, error=UnknownCorruptionError)
"""The user corruptions by name (:func:`register_corruption`)."""


def register_corruption(
    name: str,
    fn: UserFn,
    value_range: tuple[float, float],
    *,
    integer: bool = False,
    description: str = "",
    replace: bool = False,
) -> UserCorruption:
    """Make ``fn`` usable by name in overlap studies, mixtures and severity calibration.

    Raises:
        InvalidArgumentError: the name is taken (by a registered corruption, or by another user
            corruption without ``replace=True``), or the range is not two finite numbers.
    """
    from ..corruptions import get_corruption

    if not isinstance(name, str) or not name or "@" in name or ":" in name or name in ("standard", "clean"):
        raise InvalidArgumentError("name", name, "a non-empty name without '@' or ':', not 'standard' or 'clean'")
    try:
        get_corruption(name)
    except UnknownCorruptionError:
        pass
    else:
        raise InvalidArgumentError("name", name, "a name that no registered corruption uses")
    if name in _USER and not replace:
        raise InvalidArgumentError("name", name, "a new name (or replace=True)")
    if not callable(fn):
        raise InvalidArgumentError("fn", fn, "a function fn(images, values, generators) -> images")
    try:
        lo, hi = (float(v) for v in value_range)
    except (TypeError, ValueError):
        raise InvalidArgumentError("value_range", value_range, "two numbers (mild, harsh)") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InvalidArgumentError("value_range", value_range, "two finite numbers (mild, harsh)")
    return _USER.register(name, UserCorruption(name, fn, (lo, hi), bool(integer), description), replace=True)


def unregister_corruption(name: str) -> None:
    """Remove a user corruption (tests, notebooks)."""
    _USER.unregister(name)


def get_user_corruption(name: str) -> UserCorruption:
    """The user corruption registered as ``name``."""
    return _USER.get(name)


def user_corruptions() -> list[str]:
    """Names registered with :func:`register_corruption`."""
    return list(_USER)


def imagenet_c_names() -> list[str]:
    """The 15 ImageNet-C corruptions in the papers' order."""
    from ..corruptions import list_corruptions

    return list_corruptions(group="benchmark")


def _noc() -> list[str]:
    from .noc import IMAGENET_NOC

    return list(IMAGENET_NOC)


BENCHMARK_SETS: dict[str, Callable[[], list[str]]] = {"imagenet-c": imagenet_c_names, "imagenet-noc": _noc}
"""Names a mixture may use for a whole benchmark: its corruptions (ImageNet-C at drawn severities)."""


@dataclass(frozen=True)
class StudyCorruption:
    """One resolved corruption of a study.

    Attributes:
        name: as written in the config (``"fog"``, ``"fog@3"``, ``"noc_rain"``, a user name, a mixture name).
        kind: ``"severity"`` (a registered corruption with five severities), ``"candidate"``,
            ``"user"`` or ``"mixture"``.
        base: the registered or user name (empty for a mixture).
        severity: the fixed severity, or None when it is drawn per image.
        members: a mixture's corruptions.
    """

    name: str
    kind: str
    base: str = ""
    severity: int | None = None
    members: tuple[StudyCorruption, ...] = field(default_factory=tuple)

    @property
    def protocol(self) -> str:
        """How a value is chosen for each image, in words."""
        if self.kind == "mixture":
            return f"one of {len(self.members)} corruptions drawn uniformly per image"
        if self.kind == "user":
            return "one value per image drawn uniformly from its range"
        if self.severity is not None:
            return f"fixed severity {self.severity}" + (" (that fifth of the range)" if self.kind == "candidate" else "")
        if self.kind == "candidate":
            return "one value per image drawn uniformly from the whole range (Laugros et al., 2020)"
        return "severity drawn uniformly from 1..5 per image (Laugros et al., 2020, Section 5)"


def _candidates() -> dict[str, Any]:
    from ..corruptions.candidates import CANDIDATES

    return CANDIDATES


def resolve(spec: str, *, where: str = "corruption") -> StudyCorruption:
    """A study's corruption from its name (see the module docstring).

    Raises:
        UnknownCorruptionError: no registered or user corruption of that name (with suggestions).
        InvalidArgumentError: a bad ``@severity`` suffix.
    """
    from ..checks import suggest
    from ..corruptions import get_corruption, list_corruptions

    if not isinstance(spec, str) or not spec.strip():
        raise InvalidArgumentError(where, spec, "a corruption name such as 'fog', 'fog@3' or 'noc_rain'")
    base, at, sev_txt = spec.strip().partition("@")
    sev: int | None = None
    if at:
        try:
            sev = int(sev_txt)
        except ValueError:
            sev = None
        if sev is None or not 1 <= sev <= 5:
            raise InvalidArgumentError(where, spec, "a name, or name@severity with a severity in 1..5")
    if base in _USER:
        if sev is not None:
            raise InvalidArgumentError(where, spec, f"{base!r} without '@' (a user corruption has a range, not severities)")
        return StudyCorruption(spec.strip(), "user", base)
    try:
        reg = get_corruption(base)
    except UnknownCorruptionError:
        names = list_corruptions("all") + list_corruptions(group="candidate") + list(_USER)
        raise UnknownCorruptionError(where, spec, names, suggest(base, names)) from None
    kind = "candidate" if reg.name in _candidates() else "severity"
    name = reg.name if sev is None else f"{reg.name}@{sev}"
    return StudyCorruption(name, kind, reg.name, sev)


def mixture_members(members: str | Sequence[str], *, where: str = "mixtures") -> list[str]:
    """A mixture's corruption names: a list, or a benchmark name of :data:`BENCHMARK_SETS`."""
    if isinstance(members, str):
        key = members.strip().lower()
        if key not in BENCHMARK_SETS:
            raise InvalidArgumentError(where, members, f"a list of corruptions or one of {sorted(BENCHMARK_SETS)}")
        return BENCHMARK_SETS[key]()
    out = list(members)
    if len(out) < 2:
        raise InvalidArgumentError(where, out, "at least two corruptions (or a benchmark name)")
    return out


def mixture(name: str, members: str | Sequence[str], *, where: str = "mixtures") -> StudyCorruption:
    """A mixture model's corruption: each image gets one of ``members``, drawn uniformly per image."""
    names = mixture_members(members, where=f"{where}.{name}")
    res = tuple(resolve(m, where=f"{where}.{name}") for m in names)
    if len({r.name for r in res}) != len(res):
        raise InvalidArgumentError(f"{where}.{name}", names, "names without duplicates")
    return StudyCorruption(name, "mixture", "", None, res)


def _keys(n: int, keys: Sequence[Any] | None) -> list[int]:
    if keys is None or len(keys) != n:
        raise InvalidArgumentError("keys", None if keys is None else len(keys), f"one key per image ({n})")
    return [key_to_int(k) for k in keys]


def draw_indices(n_choices: int, seed: int, keys: Sequence[Any], stream: str) -> np.ndarray:
    """One uniform index in ``0..n_choices-1`` per image, from the generator of ``(seed, key, stream)``."""
    return np.array(
        [int(derive_generator(seed, k, stream, 0).integers(n_choices)) for k in _keys(len(keys), keys)], dtype=np.int64
    )


def _to_float(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    if x.dtype == torch.uint8:
        return x.to(torch.float32) / 255.0, True
    return x.to(torch.float32), False


def _from_float(y: torch.Tensor, was_uint8: bool, like: torch.Tensor) -> torch.Tensor:
    y = y.clamp(0.0, 1.0)
    if was_uint8:
        return (y * 255.0).round().to(torch.uint8)
    return y.to(like.dtype)


def _user_values(uc: UserCorruption, seed: int, ks: list[int]) -> tuple[torch.Tensor, list[np.random.Generator]]:
    gens = [derive_generator(seed, k, f"user:{uc.name}", 0) for k in ks]
    lo, hi = uc.value_range
    vals = []
    for g in gens:
        u = float(g.uniform(0.0, 1.0))
        v = lo + u * ((hi - lo + (1 if hi >= lo else -1)) if uc.integer else (hi - lo))
        if uc.integer:
            v = float(min(max(math.floor(v), min(lo, hi)), max(lo, hi)))
        vals.append(v)
    return torch.tensor(vals, dtype=torch.float64), gens


def _apply_user(uc: UserCorruption, x: torch.Tensor, values: torch.Tensor, gens: list[np.random.Generator]) -> torch.Tensor:
    xf, was_u8 = _to_float(x)
    y = uc.fn(xf, values.to(xf.device), gens)
    if not isinstance(y, torch.Tensor) or y.shape != xf.shape:
        raise InvalidArgumentError(
            f"user corruption {uc.name!r}", type(y).__name__, f"a tensor of the input's shape {tuple(xf.shape)}"
        )
    return _from_float(y, was_u8, x)


def apply_corruption(images: torch.Tensor, sc: StudyCorruption, *, seed: int, keys: Sequence[Any]) -> torch.Tensor:
    """Corrupt a batch (``N x C x H x W`` uint8 or [0, 1] float) as the study does, one key per image."""
    from ..api import corrupt

    n = images.shape[0]
    if n == 0:
        return images
    keys = list(keys)
    ks = _keys(n, keys)
    if sc.kind == "mixture":
        pick = draw_indices(len(sc.members), seed, keys, f"mixture:{sc.name}")
        out = images.clone()
        for j in np.unique(pick).tolist():
            rows = np.flatnonzero(pick == j)
            sub = [keys[i] for i in rows]
            t = torch.from_numpy(rows).to(images.device)
            out[t] = apply_corruption(images[t], sc.members[j], seed=seed, keys=sub)
        return out
    if sc.kind == "user":
        uc = _USER.get(sc.base)  # UnknownCorruptionError, with the closest names
        vals, gens = _user_values(uc, seed, ks)
        return _apply_user(uc, images, vals, gens)
    if sc.kind == "candidate" and sc.severity is None:
        from .sampling import corrupt_candidate

        return corrupt_candidate(images, sc.base, seed=seed, keys=keys)
    if sc.severity is not None:
        return corrupt(images, sc.base, sc.severity, seed=seed, keys=keys)
    sev = draw_indices(5, seed, keys, f"{sc.base}:severity") + 1
    out = images.clone()
    for s in np.unique(sev).tolist():
        rows = np.flatnonzero(sev == s)
        t = torch.from_numpy(rows).to(images.device)
        out[t] = corrupt(images[t], sc.base, int(s), seed=seed, keys=[keys[i] for i in rows])
    return out


def apply_at_value(images: torch.Tensor, name: str, value: float, *, seed: int, keys: Sequence[Any]) -> torch.Tensor:
    """Corrupt every image with one fixed parameter value (severity calibration).

    ``name`` is a candidate corruption (the value is its range's parameter, e.g. the number of
    rain drops; integer candidates are floored and kept inside their range) or a user corruption. The value may lie outside the published range (calibration searches beyond it).
    """
    keys = list(keys)
    ks = _keys(images.shape[0], keys)
    sc = resolve(name, where="corruption")
    v = float(value)
    if not math.isfinite(v):
        raise InvalidArgumentError("value", value, "a finite number")
    if sc.kind == "user":
        uc = _USER[sc.base]
        gens = [derive_generator(seed, k, f"user:{uc.name}", 0) for k in ks]
        return _apply_user(uc, images, torch.full((len(ks),), math.floor(v) if uc.integer else v, dtype=torch.float64), gens)
    if sc.kind != "candidate" or sc.severity is not None:
        raise InvalidArgumentError(
            "corruption", name, "a candidate corruption (noc_*, border, obstruction) or a user corruption with a range"
        )
    from ..corruptions import ApplyContext, SampleContext, get_corruption, to_batch
    from ..rng.seeding import FastDraws

    reg = get_corruption(sc.base)
    assert reg.sample is not None
    b = to_batch(images, "images")
    h, w = b.size
    ctx = SampleContext(params=(v, v), height=h, width=w, edition="224", severity=0)
    # the candidate's own sampler, with a range of one value: its other draws (positions, signs...) stay random.
    # The value is the calibration's own, not a draw a user replays: it may lie outside the published range
    # (Laugros et al. (2020, Appendix A) search beyond it), so it goes to the corruption's apply directly rather than through
    # corrupt(..., draws=...), which accepts only values its sampler can produce.
    draws = [reg.sample(FastDraws(derive_generator(seed, k, f"{sc.base}:value", 0)), ctx) for k in ks]
    dev = b.raw.device
    stacked = {k: torch.from_numpy(np.stack([np.asarray(d[k]) for d in draws])).to(dev) for k in draws[0]}
    y = reg.apply(b.rgb(0, b.n, reg.dtype), ctx.params, stacked, ApplyContext(edition="224", severity=1))
    return _like_input(y, images)


def _like_input(y: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    """A B x 3 x H x W result in 0..255 back in the form of ``images`` (B x C x H x W, uint8 or float in [0, 1]),
    as :func:`shiftbench.corrupt` returns it: 8-bit levels truncated, gray images as ITU-R 601 luma (PIL's 'L')."""
    y = y.clamp(0, 255)
    c = int(images.shape[1])
    if images.dtype == torch.uint8:
        y = y.to(torch.uint8).to(torch.int32)
        if c in (1, 2):
            y = (y[:, 0:1] * 19595 + y[:, 1:2] * 38470 + y[:, 2:3] * 7471 + 0x8000) >> 16
        out = y.to(torch.uint8)
    else:
        y = y / 255.0
        if c in (1, 2):
            y = (y[:, 0:1] * 0.299 + y[:, 1:2] * 0.587 + y[:, 2:3] * 0.114).clamp(0, 1)
        out = y.to(images.dtype)
    if c in (2, 4):  # alpha kept as it was
        out = torch.cat([out, images[:, c - 1 :].to(out.dtype)], 1)
    return out
