"""The 19 ImageNet-C corruptions (15 benchmark + 4 extra), registered on import."""

from . import blur, digital, elastic, noise, weather  # noqa: F401
