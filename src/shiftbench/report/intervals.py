"""What a stored number rests on: 95 % intervals, image counts, model and data identities for the report.

* Errors get Wilson score intervals (:func:`wilson`) from the stored right/wrong records of their run.
* ImageNet-C mCE and relative mCE get percentile bootstrap intervals over images
  (:func:`bootstrap_mce`): the images are resampled with replacement, the same draw for every condition, and
  the CE of each corruption recomputed against AlexNet's published errors.
* :func:`store_facts` reads, per stored evaluation, the model's weights digest, the data's name and digest
  (never its local path) and the number of images.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..evaluation.store import ResultsStore

__all__ = ["EvaluationFacts", "bootstrap_mce", "data_label", "scrub_paths", "store_facts", "wilson"]

Z95 = 1.959963984540054


def wilson(wrong: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of a proportion ``wrong / n`` (fractions); None when ``n`` is 0."""
    if n <= 0:
        return None
    p = wrong / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_mce(
    wrong: Mapping[tuple[str, int], np.ndarray],
    clean: np.ndarray | None,
    baseline: Mapping[str, Mapping[int, float]],
    baseline_clean: float | None,
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """Bootstrap intervals of mCE and relative mCE over images.

    Args:
        wrong: (corruption, severity) -> 0/1 array over the same images (1: top-1 wrong), in one image order.
        clean: 0/1 wrong on the clean images in that order (None: no relative mCE).
        baseline: AlexNet's errors per corruption and severity (fractions).
        baseline_clean: AlexNet's clean error.
        resamples: bootstrap draws; seed: their generator's seed.

    Returns:
        ``{"mce": (lo, hi), "relative_mce": (lo, hi)}`` as fractions, for the keys that can be computed (every
        corruption of ``baseline`` present in ``wrong`` at every severity the baseline has).
    """
    corrs = sorted({c for c, _ in wrong if c in baseline and all((c, s) in wrong for s in baseline[c])})
    if not corrs:
        return {}
    conds = [(c, s) for c in corrs for s in sorted(baseline[c])]
    n = len(next(iter(wrong.values())))
    if n == 0 or any(len(wrong[k]) != n for k in conds) or (clean is not None and len(clean) != n):
        return {}
    m = np.stack([wrong[k].astype(np.float64) for k in conds])  # conditions x images
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(np.float64)  # resamples x images
    err = weights @ m.T / n  # resamples x conditions
    idx = {k: i for i, k in enumerate(conds)}
    out: dict[str, tuple[float, float]] = {}
    ce = np.stack([err[:, [idx[(c, s)] for s in sorted(baseline[c])]].sum(axis=1)
                   / sum(baseline[c][s] for s in sorted(baseline[c])) for c in corrs], axis=1)
    q = ((1 - level) / 2, 1 - (1 - level) / 2)
    mce = ce.mean(axis=1)
    out["mce"] = (float(np.quantile(mce, q[0])), float(np.quantile(mce, q[1])))
    if clean is not None and baseline_clean is not None:
        e_clean = weights @ clean.astype(np.float64) / n
        rel = np.stack([(err[:, [idx[(c, s)] for s in sorted(baseline[c])]] - e_clean[:, None]).sum(axis=1)
                        / sum(baseline[c][s] - baseline_clean for s in sorted(baseline[c])) for c in corrs], axis=1)
        r = rel.mean(axis=1)
        out["relative_mce"] = (float(np.quantile(r, q[0])), float(np.quantile(r, q[1])))
    return out


@dataclass
class EvaluationFacts:
    """One stored evaluation as the report identifies it."""

    id: int
    benchmark: str
    model: str
    checksum: str
    data: str
    """The data's name and digest, e.g. ``val (data sha256:1a2b3c4d5e6f)``."""
    n_images: int
    """Images (or videos) scored in its clean run, else its largest run."""
    intervals: dict[str, tuple[float, float]]
    """``clean_error`` (Wilson) and, for ImageNet-C, ``mce`` and ``relative_mce`` (bootstrap), as fractions."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def data_label(location: str, identity: str | None = None) -> str:
    """A data folder as ``name (data sha256:…)``: its last path component and a digest of the stored identity
    (or of the location when the identity is unknown); never the local path."""
    name = Path(str(location).rstrip("/\\")).name or str(location)
    return f"{name} (data sha256:{_digest(identity or str(location))})"


_ABS = re.compile(r"(?<![\w.:/~-])(?:~/|/)(?:[^\s/'\"<>,;()\[\]{}]+/)+[^\s/'\"<>,;()\[\]{}]*")


def scrub_paths(value: Any, known: Mapping[str, str] | None = None) -> Any:
    """``value`` with every absolute local path (in strings, lists and dicts) replaced by its name and a digest
    (:func:`data_label`; ``known``: path -> label for the stores' data sources). URLs are left alone."""
    labels = dict(known or {})

    def one(text: str) -> str:
        def sub(m: re.Match[str]) -> str:
            p = m.group(0)
            if p in labels:
                return labels[p]
            for loc, lab in labels.items():  # a file under a known folder
                if p.startswith(loc.rstrip("/") + "/"):
                    return f"{lab}/{p[len(loc.rstrip('/')) + 1:]}"
            return data_label(p)

        return _ABS.sub(sub, text) if ("/" in text or "~" in text) else text

    if isinstance(value, str):
        return one(value)
    if isinstance(value, list):
        return [scrub_paths(v, labels) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_paths(v, labels) for v in value)
    if isinstance(value, dict):
        return {k: scrub_paths(v, labels) for k, v in value.items()}
    return value


def _wrong(db: ResultsStore, run_id: int) -> tuple[list[str], np.ndarray]:
    items, labels, top, _ = db.top5(run_id)
    return items, (top[:, 0] != labels).astype(np.int8) if len(items) else np.zeros(0, dtype=np.int8)


def store_facts(store: str | Path, *, resamples: int = 1000, benchmarks_with_mce: Sequence[str] = ("imagenet-c",)
                ) -> dict[int, EvaluationFacts]:
    """Every stored evaluation's model digest, data label, image count and intervals, by evaluation id."""
    from ..evaluation.baselines import alexnet_baseline

    out: dict[int, EvaluationFacts] = {}
    with ResultsStore(Path(store)) as db:
        idents = db.sources()
        for e in db.evaluations():
            runs = [r for r in db.runs(e.id) if r.status == "complete"]
            clean = next((r for r in runs if r.severity == 0 and r.corruption == "clean"), None)
            n = clean.n_predicted if clean is not None else max((r.n_predicted for r in runs), default=0)
            intervals: dict[str, tuple[float, float]] = {}
            if clean is not None and clean.frames == 1 and not clean.n_unjudged:
                ci = wilson(clean.n_wrong, clean.n_predicted)
                if ci is not None:
                    intervals["clean_error"] = ci
            if e.benchmark in benchmarks_with_mce and resamples > 0 and str(e.edition) in ("224", "299"):
                # AlexNet's published errors are the ImageNet (224 / 299) baseline
                base = alexnet_baseline()
                wrong: dict[tuple[str, int], np.ndarray] = {}
                order: list[str] | None = None
                clean_wrong = None
                ok = True
                for r in runs:
                    if r.frames != 1 or (r.corruption not in base.errors and r.corruption != "clean"):
                        continue
                    items, w = _wrong(db, r.id)
                    if order is None:
                        order = items
                    if items != order:  # not the same images in every condition: no paired bootstrap
                        ok = False
                        break
                    if r.corruption == "clean":
                        clean_wrong = w
                    else:
                        wrong[(r.corruption, r.severity)] = w
                if ok and wrong:
                    intervals.update(bootstrap_mce(wrong, clean_wrong, base.errors, base.clean_error,
                                                   resamples=resamples))
            loc = str(e.source or "")
            out[e.id] = EvaluationFacts(e.id, e.benchmark, e.model, e.model_checksum,
                                        data_label(loc, idents.get(loc)) if loc else "", n, intervals)
    return out


def is_local_path(text: str) -> bool:
    """An absolute path or one starting with ``~`` (what the report never shows)."""
    return text.startswith("~") or os.path.isabs(text)
