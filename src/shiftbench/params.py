"""The parameter tables shipped as package data (``shiftbench/data/*.json``), read once and cached."""

from __future__ import annotations

from ._params import imagenet_c_params, load_json

__all__ = ["load_json", "imagenet_c_params"]
