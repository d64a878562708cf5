"""Baselines that normalise Corruption Errors.

The AlexNet ImageNet-C errors ship as package data
(``shiftbench/data/alexnet_imagenet_c.json``): per-severity errors for all 19
corruptions and the clean error, each with its source. They are published
numbers; shiftbench does not re-measure them. Any model already in a results
store can serve as the baseline instead (see :meth:`ResultsStore.baseline`),
which is the only option for editions without published AlexNet numbers.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import DataError, InvalidArgumentError
from .metrics import Baseline

__all__ = ["alexnet_baseline", "load_baseline_file", "baseline_from_dict", "resolve_baseline", "BASELINE_FORMAT"]

BASELINE_FORMAT = "shiftbench-baseline/1"


def baseline_from_dict(doc: dict[str, Any], origin: str) -> Baseline:
    """Build a :class:`Baseline` from the JSON layout of the package data.

    Args:
        doc: ``{"format": "shiftbench-baseline/1", "name": ..., "errors": {corruption: [e1..e5]},
            "clean_error": ..., "edition": ..., "errors_source": ...}``.
        origin: where ``doc`` was read from (for error messages).

    Raises:
        DataError: for a document that does not have this layout.
    """
    if not isinstance(doc, dict) or doc.get("format") != BASELINE_FORMAT:
        raise DataError(f'baseline {origin!r}: expected a JSON object with "format": "{BASELINE_FORMAT}"')
    try:
        name = str(doc["name"])
        raw = doc["errors"]
        errors: dict[str, dict[int, float]] = {}
        for corruption, values in raw.items():
            if isinstance(values, dict):
                errors[str(corruption)] = {int(s): float(v) for s, v in values.items()}
            else:
                errors[str(corruption)] = {i + 1: float(v) for i, v in enumerate(values)}
        clean = doc.get("clean_error")
        source = str(doc.get("errors_source") or doc.get("source") or origin)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise DataError(f"baseline {origin!r}: malformed ({e!r}); expected name, errors and clean_error") from e
    for corruption, sev in errors.items():
        for s, v in sev.items():
            if not 1 <= s <= 5 or not 0.0 <= v <= 1.0:
                raise DataError(
                    f"baseline {origin!r}: {corruption} severity {s} has error {v}; expected severities 1..5 "
                    "and errors as fractions in [0, 1]"
                )
    return Baseline(
        name=name,
        errors=errors,
        clean_error=None if clean is None else float(clean),
        source=source,
        edition=str(doc.get("edition", "224")),
        n_images=doc.get("n_images"),
    )


@lru_cache(maxsize=1)
def alexnet_baseline() -> Baseline:
    """AlexNet's published ImageNet-C errors (224 edition), per severity, for all 19 corruptions.

    Clean error 0.4348 (printed as 43.5 % in the paper's tables). Sources are in
    the package data file and in :attr:`Baseline.source`.
    """
    text = resources.files("shiftbench").joinpath("data/alexnet_imagenet_c.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    b = baseline_from_dict(doc, "shiftbench/data/alexnet_imagenet_c.json")
    source = (
        "published AlexNet errors (not re-measured): per-severity table of the hendrycks/robustness README, "
        "commit 76d9393 (2019); clean error 0.4348 (43.5 % in the paper's tables)"
    )
    return Baseline(b.name, b.errors, b.clean_error, source, b.edition, b.n_images)


def load_baseline_file(path: str | Path) -> Baseline:
    """Read a baseline JSON file in the package-data layout (see :func:`baseline_from_dict`)."""
    p = Path(path)
    if not p.is_file():
        raise InvalidArgumentError(
            "baseline", str(path), "'alexnet', a model name in the store, or a baseline .json file"
        )
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"baseline {str(p)!r} is not readable JSON: {e}") from e
    return baseline_from_dict(doc, str(p))


def resolve_baseline(
    spec: str | Baseline | None, *, store: Any, edition: str, source_kind: str | None = None
) -> tuple[Baseline | None, str | None]:
    """The CE baseline for ``spec`` and, when there is none, the reason.

    ``spec``: ``"alexnet"`` (published numbers; edition 224 only), ``"none"``, a
    baseline ``.json`` file, a model name in the store, ``"eval:<id>"``, or a
    :class:`Baseline`.
    """
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "none"):
        return None, "no baseline requested"
    if isinstance(spec, Baseline):
        return spec, None
    s = spec.strip()
    if s.lower() == "alexnet":
        if edition != "224":
            return None, (
                f"no published AlexNet errors exist for edition {edition} (only for the 224 edition); pass "
                "--baseline with a model evaluated in the store on the same data to normalise CE"
            )
        return alexnet_baseline(), None
    if s.lower().endswith(".json"):
        b = load_baseline_file(s)
        return b, None
    if store is None:
        raise InvalidArgumentError("baseline", spec, "'alexnet', 'none' or a baseline .json file (no store given)")
    b = store.baseline(s, edition=edition, source_kind=source_kind)
    if b.edition != edition:
        return None, f"baseline {b.name} was evaluated on edition {b.edition}, not {edition}"
    return b, None
