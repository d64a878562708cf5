"""Per-image seeding and random draws.

Every random quantity of a corruption is drawn from a generator that is derived
from ``(seed, image key, operation name, severity)`` alone. An image's output
therefore never depends on which other images share its batch, on the batch
size, on the number of worker processes or on the process that computes it.

The default image key is a digest of the image's 8-bit pixels, so the same
picture gets the same draws whether it arrives as a uint8 array, a float
tensor or a PIL image. Callers that prefer stable names (file paths, dataset
indices) pass them as ``keys``.

Samplers never call NumPy's global RNG. They draw through the :class:`Draws`
interface; :class:`FastDraws` (PCG64, the default) and :class:`LegacyDraws`
(NumPy's legacy ``RandomState``, for replaying the reference implementation's
draw order in tests) both implement it.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any, Protocol

import numpy as np
from numpy.random.bit_generator import ISpawnableSeedSequence

from .pcg64 import bounded_words, raw_words, uniform_words
from .seedseq import seed_words
from .xxh64 import xxh64

__all__ = [
    "Draws",
    "FastDraws",
    "LegacyDraws",
    "image_key",
    "name_key",
    "key_to_int",
    "derive_generator",
]

_MASK64 = (1 << 64) - 1


class Draws(Protocol):
    """The random primitives a sampler may use. ``high`` bounds are exclusive. ``integers(..., dtype=)``
    returns NumPy's int64 draws stored as ``dtype`` (the values must fit; the draws do not change)."""

    def normal(self, size: Any, loc: float = 0.0, scale: float = 1.0) -> np.ndarray: ...

    def standard_normal32(self, size: Any) -> np.ndarray: ...

    def poisson_levels(self, levels: np.ndarray, scale: float) -> np.ndarray: ...

    def uniform(self, low: float, high: float, size: Any = None) -> Any: ...

    def integers(self, low: int, high: int | None = None, size: Any = None, dtype: Any = None) -> Any: ...

    def random(self, size: Any) -> np.ndarray: ...

    def salt_and_pepper(self, size: Any, amount: float) -> tuple[np.ndarray, np.ndarray]: ...

    def poisson(self, lam: np.ndarray) -> np.ndarray: ...


def _shape(size: Any) -> tuple[int, ...]:
    """A NumPy ``size`` argument (int or sequence) as a shape tuple."""
    return (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(v) for v in size)


class FastDraws:
    """Draws from a NumPy ``Generator`` (PCG64): fast, independent streams."""

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator

    def normal(self, size: Any, loc: float = 0.0, scale: float = 1.0) -> Any:
        if size is None:
            return loc + scale * float(self.generator.standard_normal())
        from .ziggurat import standard_normal64

        shape = _shape(size)
        z = standard_normal64(self.generator.bit_generator, int(np.prod(shape))).reshape(shape)
        if scale != 1.0:
            z *= scale
        if loc != 0.0:
            z += loc
        return z

    def uniform(self, low: float, high: float, size: Any = None) -> Any:
        if size is not None and isinstance(low, (int, float)) and isinstance(high, (int, float)):
            shape = _shape(size)
            fast = uniform_words(self.generator.bit_generator, low, high, int(np.prod(shape)))
            if fast is not None:
                return fast.reshape(shape)
        return self.generator.uniform(low, high, size)

    def uniform_into(self, low: float, high: float, out: np.ndarray) -> None:
        """``out[...] = uniform(low, high, out.shape)``; a C-contiguous float64 ``out`` is written in place by the
        compiled path (no array in between)."""
        fits = out.dtype == np.float64 and out.flags.c_contiguous
        if not fits or uniform_words(self.generator.bit_generator, low, high, out.size, out.reshape(-1)) is None:
            out[...] = self.uniform(low, high, out.shape)

    def integers(self, low: int, high: int | None = None, size: Any = None, dtype: Any = None) -> Any:
        """``Generator.integers(low, high, size)`` (int64 draws); ``dtype``: the returned array's dtype
        (the values must fit), written directly by the compiled path (no int64 array in between)."""
        if size is not None and high is not None and isinstance(low, int) and isinstance(high, int):
            shape = _shape(size)
            fast = bounded_words(self.generator.bit_generator, low, high, int(np.prod(shape)), dtype or np.int64)
            if fast is not None:
                return fast.reshape(shape)
        out = self.generator.integers(low, high, size)
        return out if dtype is None else np.asarray(out).astype(dtype)

    def random(self, size: Any) -> np.ndarray:
        return self.generator.random(size)

    def salt_and_pepper(self, size: Any, amount: float) -> tuple[np.ndarray, np.ndarray]:
        """Boolean masks (flipped, salted): flipped with probability ``amount`` (to 2**-31), salted
        with probability 1/2, all independent. One 32-bit word per value, in one compiled pass:
        its low 31 bits decide the flip, its top bit the salt."""
        from .discrete import salt_pepper_masks

        shape = _shape(size)
        n = int(np.prod(shape))
        if not 0.0 <= float(amount) <= 1.0:
            raise ValueError(f"amount={amount!r} must lie in [0, 1]")
        from .ziggurat import halves

        words = halves(raw_words(self.generator.bit_generator, (n + 1) // 2))
        flipped, salted = salt_pepper_masks(words, n, int(round(float(amount) * 2.0**31)))
        return flipped.reshape(shape), salted.reshape(shape)

    def poisson(self, lam: np.ndarray) -> np.ndarray:
        return self.generator.poisson(lam)

    def standard_normal32(self, size: Any) -> np.ndarray:
        """Standard normal field in float32 (the reference's noise fields): a compiled ziggurat on the
        generator's raw 64-bit words, about 3x faster than ``Generator.standard_normal``."""
        from .ziggurat import standard_normal32

        shape = _shape(size)
        return standard_normal32(self.generator.bit_generator, int(np.prod(shape))).reshape(shape)

    def poisson_levels(self, levels: np.ndarray, scale: float) -> np.ndarray:
        """Poisson(scale * level / 255) for uint8 levels, exact, via per-level alias tables."""
        from .discrete import alias_lookup

        prob, alias = poisson_alias_tables(float(scale))
        k = prob.shape[0] // 256
        # the raw words of generator.random(levels.shape): same uniforms, no float array in between
        raw = raw_words(self.generator.bit_generator, levels.size)
        return alias_lookup(raw, np.ascontiguousarray(levels), prob, alias, k).reshape(levels.shape)


@lru_cache(maxsize=64)
def poisson_alias_tables(scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Walker/Vose alias tables of Poisson(scale * l / 255), l = 0..255, flattened (256 rows of K).

    Rows are truncated at K = scale + 12 sqrt(scale) + 30, where the tail mass is below 1e-17.
    """
    from scipy.special import gammaln, xlogy

    lam = np.arange(256) / 255.0 * scale
    k = int(scale + 12 * np.sqrt(scale) + 30)
    ks = np.arange(k, dtype=np.float64)[None, :]
    pmf = np.exp(xlogy(ks, lam[:, None]) - lam[:, None] - gammaln(ks + 1))  # Poisson pmf; 0**0 = 1 for level 0
    pmf /= pmf.sum(axis=1, keepdims=True)
    prob = np.ones((256, k))
    alias = np.tile(np.arange(k), (256, 1))
    for row in range(256):
        p = pmf[row] * k
        small = [i for i in range(k) if p[i] < 1.0]
        large = [i for i in range(k) if p[i] >= 1.0]
        while small and large:
            s_, l_ = small.pop(), large.pop()
            prob[row, s_] = p[s_]
            alias[row, s_] = l_
            p[l_] = p[l_] + p[s_] - 1.0
            (small if p[l_] < 1.0 else large).append(l_)
        for i in large + small:
            prob[row, i] = 1.0
    return prob.ravel(), alias.ravel()


class LegacyDraws:
    """Draws from NumPy's legacy ``RandomState`` with the reference code's calls.

    Used to replay exactly the random numbers the reference ImageNet-C code draws
    after ``np.random.seed(s)``, so that its output and ours can be compared pixel
    by pixel with identical randomness.
    """

    def __init__(self, state: np.random.RandomState | int) -> None:
        self.state = state if isinstance(state, np.random.RandomState) else np.random.RandomState(state)

    def normal(self, size: Any, loc: float = 0.0, scale: float = 1.0) -> np.ndarray:
        return self.state.normal(loc=loc, scale=scale, size=size)

    def uniform(self, low: float, high: float, size: Any = None) -> Any:
        return self.state.uniform(low, high, size)

    def integers(self, low: int, high: int | None = None, size: Any = None, dtype: Any = None) -> Any:
        out = self.state.randint(low, high, size)  # int64 draws, whatever dtype stores them
        return out if dtype is None else np.asarray(out).astype(dtype)

    def random(self, size: Any) -> np.ndarray:
        return self.state.random_sample(size)

    def salt_and_pepper(self, size: Any, amount: float) -> tuple[np.ndarray, np.ndarray]:
        # scikit-image's random_noise(mode='s&p'): Bernoulli trials "flipped" (p = amount),
        # then "salted" (p = 0.5), each as uniform <= p over the whole array
        flipped = self.state.random_sample(size) <= amount
        salted = self.state.random_sample(size) <= 0.5
        return flipped, salted

    def poisson(self, lam: np.ndarray) -> np.ndarray:
        return self.state.poisson(lam)

    def standard_normal32(self, size: Any) -> np.ndarray:
        # the reference draws float64 normals: keep them, the functional casts
        return self.state.normal(loc=0.0, scale=1.0, size=size)

    def poisson_levels(self, levels: np.ndarray, scale: float) -> np.ndarray:
        # the reference: np.random.poisson(np.array(img) / 255. * c)
        return self.state.poisson(levels / 255.0 * scale)


def _digest_int(data: bytes | memoryview) -> int:
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "little")


@lru_cache(maxsize=1024)
def name_key(name: str) -> int:
    """Stable 64-bit integer for an operation name."""
    return _digest_int(name.encode("utf-8"))


@lru_cache(maxsize=256)
def _shape_seed(shape: tuple[int, ...]) -> np.uint64:
    return np.uint64(_digest_int(f"{tuple(int(s) for s in shape)}".encode()))


def image_key(pixels: np.ndarray) -> int:
    """Content key of an image: XXH64 of its 8-bit pixels (3 x H x W uint8, channels first),
    seeded with a digest of the shape (:mod:`shiftbench.rng.xxh64`)."""
    a = np.ascontiguousarray(pixels, dtype=np.uint8)
    return int(xxh64(a.reshape(-1), _shape_seed(a.shape)))


def key_to_int(key: Any) -> int:
    """Turn a user key (int in 0..2**64-1, str, bytes) into a non-negative 64-bit integer."""
    from ..errors import InvalidArgumentError

    allowed = "an int in 0..2**64-1, a str or bytes"
    if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        if not 0 <= int(key) <= _MASK64:  # other ints would alias keys in range
            raise InvalidArgumentError("key", key, allowed)
        return int(key)
    if isinstance(key, str):
        return _digest_int(b"s:" + key.encode("utf-8", "surrogatepass"))
    if isinstance(key, bytes):
        return _digest_int(b"b:" + key)
    raise InvalidArgumentError("key", key, allowed)


class _DerivedSeed(ISpawnableSeedSequence):
    """The seed of a derived generator: what ``SeedSequence(entropy)`` gives PCG64, its four words computed by
    :func:`~shiftbench.rng.seedseq.seed_words`. Anything else (other words, spawning) is asked of the
    ``SeedSequence`` itself, made once when first needed, so spawned children are its children."""

    __slots__ = ("entropy", "_words", "_full")

    def __init__(self, entropy: list[int], words: np.ndarray) -> None:
        self.entropy = entropy
        self._words = words
        self._full: np.random.SeedSequence | None = None

    def _sequence(self) -> np.random.SeedSequence:
        if self._full is None:
            self._full = np.random.SeedSequence(self.entropy)
        return self._full

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        if n_words == 4 and np.dtype(dtype) == np.uint64:
            return self._words.copy()
        return self._sequence().generate_state(n_words, dtype)

    def spawn(self, n_children: int) -> list[np.random.SeedSequence]:  # type: ignore[override]  # SeedSequence's children
        return self._sequence().spawn(n_children)


def derive_generator(seed: int, key: int, name: str, level: int) -> np.random.Generator:
    """The generator for one (seed, image key, operation, level) tuple: a PCG64 seeded by
    ``SeedSequence([seed, key, name_key(name), level])`` (seed and key taken modulo 2**64)."""
    entropy = [int(seed) & _MASK64, int(key) & _MASK64, name_key(name), int(level)]
    if not 0 <= entropy[3] <= _MASK64:  # SeedSequence's own handling (and errors) for other levels
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
    words = seed_words(*(np.uint64(v) for v in entropy))
    # PCG64 takes any ISeedSequence (NumPy's documented protocol; its type stubs name SeedSequence only)
    return np.random.Generator(np.random.PCG64(_DerivedSeed(entropy, words)))  # type: ignore[arg-type]
