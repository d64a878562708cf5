"""Access to the severity parameter tables shipped as package data."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["imagenet_c_params", "load_json"]


@cache
def load_json(name: str) -> Any:
    """Load ``shiftbench/data/<name>`` (a JSON file shipped with the package)."""
    with resources.files("shiftbench").joinpath("data", name).open("r", encoding="utf-8") as fh:
        return json.load(fh)


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


@cache
def imagenet_c_params(name: str) -> dict[str, tuple[Any, ...]]:
    """Per-edition severity table of ImageNet-C corruption ``name`` (5 entries per edition)."""
    table = load_json("imagenet_c_params.json")["corruptions"]
    if name not in table:
        raise KeyError(f"no parameter table for {name!r} in imagenet_c_params.json")
    return {edition: _freeze(values) for edition, values in table[name].items()}
