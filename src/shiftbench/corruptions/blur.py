"""blur corruptions of ImageNet-C."""

from __future__ import annotations
